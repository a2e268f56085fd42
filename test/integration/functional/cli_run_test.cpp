// The CLI's `sandlet run`: exit statuses, signals, timeouts, stdin, options, large output, and the
// sandbox's end when the CLI is interrupted or its reader goes away.
#include "integration/functional/cli_support.hpp"

using namespace cli_test;

TEST_CASE("cli: run passes the command's exit status through and keeps stdout and stderr apart", "[cli][commands]") {
  Harness h;
  CliResult r = run(h, {"--", "sh", "-c", "exit 7"});
  CHECK(r.status == 7);
  CHECK(r.out.empty());
  CHECK(r.err.empty());  // a failing command is not an error of the CLI's

  r = run(h, {"--", "sh", "-c", "echo to-out; echo to-err >&2; echo more-out"});
  CHECK(r.status == 0);
  CHECK(r.out == "to-out\nmore-out\n");
  CHECK(r.err == "to-err\n");

  r = run(h, {"/bin/echo", "no", "dashes"});  // "[--] CMD": the first operand ends the options
  CHECK(r.status == 0);
  CHECK(r.out == "no dashes\n");
  expect_nothing_left(h);
}

TEST_CASE("cli: run reports a signal as 128+N, not found as 127, not executable as 126", "[cli][commands]") {
  Harness h;
  CliResult r = run(h, {"--", "sh", "-c", "kill -9 $$"});
  CHECK(r.status == 128 + SIGKILL);
  CHECK(r.signal == 0);  // the CLI itself exited normally
  r = run(h, {"--", "sh", "-c", "kill -TERM $$"});
  CHECK(r.status == 128 + SIGTERM);

  r = run(h, {"--", "no-such-command"});
  CHECK(r.status == 127);
  CHECK(contains(r.err, "no-such-command"));
  r = run(h, {"--", "/etc/passwd"});  // a regular file without execute permission
  CHECK(r.status == 126);
  CHECK(contains(r.err, "/etc/passwd"));
  expect_nothing_left(h);
}

TEST_CASE("cli: run --timeout kills the command and what it started, exit 124", "[cli][commands]") {
  Harness h;
  const std::string secs = unique_seconds(0);
  // A background sleep as well: the timeout must reach every process, not only the main one.
  const CliResult r = run(h, {"--timeout", "0.5", "--", "sh", "-c", "sleep " + secs + " & exec sleep " + secs});
  CHECK(r.status == 124);
  CHECK(r.seconds >= 0.5);
  CHECK(r.seconds < 5);  // far from the sleep's 30 s
  CHECK(contains(r.err, "timed out"));
  // run destroys its sandbox before it returns: no sleep is left anywhere on the host.
  CHECK(wait_until([&] { return host_pids({"sleep", secs}).empty(); }, 5));
  expect_nothing_left(h);
}

TEST_CASE("cli: run without a command or with an invalid spec value exits 2 naming the field", "[cli][commands]") {
  Harness h;
  for (auto [flags, field] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"--memory", "banana"}, "limits.memory"},
           {{"--memory", "1M"}, "limits.memory"},  // below the minimum
           {{"--cpus", "-1"}, "limits.cpus"},
           {{"--pids", "many"}, "limits.pids"},
           {{"--disk", "huge"}, "limits.disk"},
           {{"--hostname", "-bad-"}, "hostname"},
           {{"--workdir", "relative"}, "workdir"},
           {{"--network", "host"}, "network"},
           {{"--max-lifetime", "-1"}, "max_lifetime_s"},
           {{"--keep-on-expiry", "0"}, "keep_s"},
       }) {
    std::vector<std::string> args = flags;
    args.insert(args.end(), {"--", "true"});
    const CliResult r = run(h, args);
    INFO(flags[0] << " " << flags[1] << "\nstderr: " << r.err);
    CHECK(r.status == 2);
    CHECK(contains(r.err, "'" + field + "'"));
  }
  const CliResult missing = cli(h, {"run", "--layer", "/no/such/layer", "--", "true"});
  CHECK(missing.status == 2);
  CHECK(contains(missing.err, "layers[0]"));
  // A store layer reference that does not exist is a spec error too (it used to exit 1).
  const CliResult unknown_ref = cli(h, {"run", "--layer", "no-such-layer", "--", "true"});
  CHECK(contains(unknown_ref.err, "layers[0]"));
  CHECK(unknown_ref.status == 2);
  expect_nothing_left(h);
}

TEST_CASE("cli: run -i sends stdin to the command; without -i its stdin is empty", "[cli][commands]") {
  Harness h;
  CliResult r = run(h, {"-i", "--", "cat"}, {"hi"});
  CHECK(r.status == 0);
  CHECK(r.out == "hi");

  // More than a pipe buffer, binary included, arrives whole.
  std::string big(300000, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 7 + i / 256);
  r = run(h, {"--interactive", "--", "cat"}, {big});
  CHECK(r.status == 0);
  CHECK(r.out.size() == big.size());
  CHECK(r.out == big);

  // Without -i the host's stdin is not read even when it has data and never ends: cat sees EOF at once.
  r = run(h, {"--", "cat"}, {"host data\n", /*close=*/false});
  CHECK(r.status == 0);
  CHECK(r.out.empty());
  CHECK(r.seconds < 5);
  expect_nothing_left(h);
}

TEST_CASE("cli: run --env, --workdir, --hostname and --user take effect", "[cli][commands]") {
  Harness h;
  CliResult r = run(h, {"--env", "FOO=bar", "-e", "EMPTY=", "--env=SPACED=a b", "--", "sh", "-c",
                        "echo \"$FOO|${EMPTY-unset}|$SPACED\""});
  CHECK(r.status == 0);
  CHECK(r.out == "bar||a b\n");
  r = run(h, {"--workdir", "/etc", "--", "pwd"});
  CHECK(r.out == "/etc\n");
  r = run(h, {"-w", "/tmp", "--", "pwd"});
  CHECK(r.out == "/tmp\n");
  r = run(h, {"--hostname", "box-one", "--", "hostname"});
  CHECK(r.out == "box-one\n");
  r = run(h, {"--user", "1000", "--", "id", "-u"});
  CHECK(r.out == "1000\n");
  r = run(h, {"-u", "1000:1001", "--", "sh", "-c", "echo $(id -u):$(id -g)"});
  CHECK(r.out == "1000:1001\n");
  r = run(h, {"--", "id", "-u"});  // the default stays root
  CHECK(r.out == "0\n");
  expect_nothing_left(h);
}

TEST_CASE("cli: run streams large stdout and stderr whole", "[cli][commands]") {
  Harness h;
  // 5,000,000 bytes on stdout and 3,000,000 on stderr at the same time, each a recognisable pattern.
  const CliResult r = run(h, {"--", "sh", "-c",
                              "yes 0123456789abcdef | head -c 5000000 & "
                              "yes to-stderr | head -c 3000000 >&2; wait"});
  CHECK(r.status == 0);
  auto pattern = [](const std::string& line, size_t size) {
    std::string s;
    while (s.size() < size) s += line + "\n";
    s.resize(size);
    return s;
  };
  REQUIRE(r.out.size() == 5000000);
  CHECK(r.out == pattern("0123456789abcdef", 5000000));
  REQUIRE(r.err.size() == 3000000);
  CHECK(r.err == pattern("to-stderr", 3000000));
  expect_nothing_left(h);
}

TEST_CASE("cli: run ended by Ctrl-C destroys its sandbox, then dies by SIGINT", "[cli][commands]") {
  Harness h;
  const std::string secs = unique_seconds(1);
  CliProcess p(h, {"run", "--layer", SANDLET_TEST_ROOTFS, "--", "sleep", secs});
  REQUIRE(wait_until([&] { return !host_pids({"sleep", secs}).empty(); }, 10));
  const auto ids = h.sandbox_dirs();
  REQUIRE(ids.size() == 1);
  ::kill(p.pid(), SIGINT);
  const CliResult r = p.wait(10);
  CHECK(r.signal == SIGINT);
  CHECK(r.seconds < 10);
  CHECK(wait_until([&] { return host_pids({"sleep", secs}).empty(); }, 5));
  CHECK(h.gone(ids[0]));  // destroyed before the CLI died, not left for the next sweep
  expect_nothing_left(h, ids);
}

TEST_CASE("cli: run whose reader goes away (| head) still destroys its sandbox", "[cli][commands]") {
  Harness h;
  const std::string token = "sigpipe-" + std::to_string(::getpid());
  CliProcess p(h, {"run", "--layer", SANDLET_TEST_ROOTFS, "--", "yes", token});
  REQUIRE(wait_until([&] { return !host_pids({"yes", token}).empty(); }, 10));
  const auto ids = h.sandbox_dirs();
  REQUIRE(ids.size() == 1);
  const CliResult r = p.wait(10, /*stdout_keep=*/100);  // then our end of its stdout is closed
  CHECK(r.out.size() == 100);
  CHECK(r.out.rfind(token + "\n" + token + "\n", 0) == 0);
  CHECK(r.seconds < 10);
  // The command writes to the pipe itself: it gets the SIGPIPE, the CLI reports that (128+13) and the
  // sandbox is destroyed before the CLI exits. (It used to be the CLI, relaying the output, that died by
  // SIGPIPE, leaving the sandbox's directory, cgroups and uid slot to a later sweep.)
  CHECK(r.signal == 0);
  CHECK(r.status == 128 + SIGPIPE);
  CHECK(h.gone(ids[0]));
  CHECK(wait_until([&] { return host_pids({"yes", token}).empty(); }, 5));
  expect_nothing_left(h, ids);
}

TEST_CASE("cli: --keep-logs-on-expiry keeps the last output; ps --all lists it, logs shows it, rm drops it",
          "[cli][commands][expiry]") {
  Harness h;
  const std::string id = expect_id(cli(h, {"create", "--layer", SANDLET_TEST_ROOTFS, "--max-lifetime", "1.5",
                                          "--keep-logs-on-expiry", "600", "--label", "job=cli"}));
  CHECK(cli(h, {"exec", id, "--", "sh", "-c", "echo agent-said-this; echo oops >&2"}).status == 0);
  // Nobody watches it (the CLI exited): the first sweep after its init ended (every ps does one) writes
  // its tombstone.
  CliResult ps;
  CHECK(wait_until([&] { return contains((ps = cli(h, {"ps", "--all", "--label", "job=cli"})).out, "expired"); }, 10));
  CHECK(contains(ps.out, id));
  CHECK(h.gone(id));
  CHECK_FALSE(contains(cli(h, {"ps"}).out, id));
  const CliResult logs = cli(h, {"logs", id});
  INFO(logs.out << logs.err);
  CHECK(logs.status == 0);
  CHECK(contains(logs.out, "max_lifetime"));
  CHECK(contains(logs.out, "agent-said-this"));
  CHECK(contains(logs.out, "oops"));
  CHECK(contains(logs.out, "destroy reason=max_lifetime"));
  CHECK(contains(cli(h, {"logs", "--json", id}).out, "\"state\":\"expired\""));
  CHECK(cli(h, {"rm", id}).status == 0);
  CHECK(cli(h, {"logs", id}).status == 1);
  CHECK(cli(h, {"rm", id}).status == 1);
  CHECK(cli(h, {"create", "--layer", SANDLET_TEST_ROOTFS, "--keep-on-expiry", "5", "--keep-logs-on-expiry", "5"})
            .status == 2);
  expect_nothing_left(h);
}
