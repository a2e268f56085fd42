// The CLI's core commands (--version, --help, run, create, exec, ps, rm, gc, cp) driven as a user would
// through the built `sandlet` binary against the harness's fresh root, checked against what their --help
// texts promise. Real sandboxes; each test ends by checking that nothing of its sandboxes is left.
#include "integration/functional/cli_support.hpp"

using namespace cli_test;

TEST_CASE("cli: --version, and --help of every command, exit 0 with the usage on stdout", "[cli][commands]") {
  Harness h;
  for (const auto& args : std::vector<std::vector<std::string>>{{"--version"}, {"version"}}) {
    const CliResult r = cli(h, args);
    CHECK(r.status == 0);
    CHECK(r.out.rfind("sandlet version ", 0) == 0);
    CHECK(contains(r.out, "(ABI "));
    CHECK(r.err.empty());
  }
  // The top level: --help, -h and `help` alike.
  for (const auto& args : std::vector<std::vector<std::string>>{{"--help"}, {"-h"}, {"help"}}) {
    const CliResult r = cli(h, args);
    INFO(args[0]);
    CHECK(r.status == 0);
    CHECK(r.out.rfind("Usage: sandlet ", 0) == 0);
    for (const char* command : {"run", "create", "exec", "ps", "rm", "pause", "resume", "gc", "cp", "layer", "env"})
      CHECK(contains(r.out, std::string("\n  ") + command + " "));  // every command is listed
    CHECK(r.err.empty());
  }
  for (const std::string command : {"run", "create", "exec", "ps", "rm", "pause", "resume", "gc", "cp", "layer", "env"}) {
    INFO("command: " << command);
    const CliResult r = cli(h, {command, "--help"});
    CHECK(r.status == 0);
    const std::string first_line = r.out.substr(0, r.out.find('\n'));
    CHECK((first_line == "Usage: sandlet " + command || first_line.rfind("Usage: sandlet " + command + " ", 0) == 0));
    CHECK(r.err.empty());
    // `help COMMAND` and `COMMAND -h` print the same text.
    CHECK(cli(h, {"help", command}).out == r.out);
    CHECK(cli(h, {command, "-h"}).out == r.out);
  }
  // What run and exec document about exit statuses, which the tests below hold them to.
  for (const std::string command : {"run", "exec"}) {
    const std::string usage = cli(h, {command, "--help"}).out;
    CHECK(contains(usage, "128+N if it was killed by signal N; 124 if --timeout expired"));
    CHECK(contains(usage, "126 if it cannot be executed, 127 if it was not found"));
  }
  expect_nothing_left(h);
}

TEST_CASE("cli: unknown commands and options, missing operands exit 2 with a hint on stderr", "[cli][commands]") {
  Harness h;
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  for (const Case& c : std::vector<Case>{
           {{"frob"}, "unknown command 'frob'"},
           {{"--frob"}, "unknown option '--frob'"},
           {{"help", "frob"}, "unknown command 'frob'"},
           {{"run", "--frob", "--", "true"}, "run: unknown option '--frob'"},
           {{"run", "--layer", SANDLET_TEST_ROOTFS}, "run: requires a command"},
           {{"run", "--layer", SANDLET_TEST_ROOTFS, "--"}, "run: requires a command"},
           {{"run", "--layer", SANDLET_TEST_ROOTFS, "--timeout", "soon", "--", "true"}, "invalid --timeout 'soon'"},
           {{"run", "--layer", SANDLET_TEST_ROOTFS, "--timeout", "-1", "--", "true"}, "invalid --timeout '-1'"},
           {{"run", "--layer", SANDLET_TEST_ROOTFS, "--label", "nokey", "--", "true"}, "invalid --label 'nokey'"},
           {{"run", "--layer"}, "option '--layer' requires a value"},
           {{"create", "--layer", SANDLET_TEST_ROOTFS, "extra"}, "create: unexpected argument 'extra'"},
           {{"exec"}, "exec: requires a sandbox ID and a command"},
           {{"exec", "0123456789ab"}, "exec: requires a command after the sandbox ID"},
           {{"exec", "--frob", "0123456789ab", "--", "true"}, "exec: unknown option '--frob'"},
           {{"ps", "--frob"}, "ps: unknown option '--frob'"},
           {{"ps", "--label", "nokey"}, "ps: invalid --label 'nokey'"},
           {{"rm"}, "rm: requires at least one sandbox ID"},
           {{"gc", "extra"}, "gc: unexpected argument 'extra'"},
           {{"cp", "a"}, "cp: requires exactly two arguments"},
           {{"cp", "/etc/hostname", "/tmp/x"}, "exactly one of SRC and DST must be ID:PATH"},
       }) {
    const CliResult r = cli(h, c.args);
    INFO("args: " << c.args[0] << " ... (" << c.args.size() << " in all)\nstderr: " << r.err);
    CHECK(r.status == 2);
    CHECK(contains(r.err, "sandlet: "));
    CHECK(contains(r.err, c.message));
    CHECK(contains(r.err, "--help'."));  // "See 'sandlet [COMMAND] --help'."
    CHECK(r.out.empty());
  }
  // No command at all: the usage, on stderr.
  const CliResult none = cli(h, {});
  CHECK(none.status == 2);
  CHECK(none.out.empty());
  CHECK(none.err.rfind("Usage: sandlet ", 0) == 0);
  expect_nothing_left(h);  // none of these made a sandbox
}

TEST_CASE("cli: a sub-command's usage error points at the sub-command's help", "[cli][commands]") {
  Harness h;
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"layer", "pull", "--bogus"}, {"layer", "import", "--bogus", "/x"}, {"layer", "--root", h.root(), "ls", "--bogus"},
           {"env", "create", "--bogus"}, {"env", "rm"}, {"loader", "status", "--bogus"},
           {"net", "update", "--bogus"}, {"net", "--allow", "10.0.0.1", "update", "--bogus"}, {"net", "stats", "--bogus"},
           {"policy", "stats", "--bogus"}}) {
    const CliResult r = cli(h, args);
    const std::string sub = args[args[1] == "--root" ? 3 : args[1] == "--allow" ? 3 : 1];
    const std::string help = "sandlet " + args[0] + " " + sub + " --help";
    INFO(help << "\nstderr: " << r.err);
    CHECK(r.status == 2);
    CHECK(contains(r.err, "See '" + help + "'."));
    // ... and that help exists.
    const CliResult usage = cli(h, {args[0], sub, "--help"});
    CHECK(usage.status == 0);
    CHECK(usage.out.rfind("Usage: sandlet " + args[0] + " ", 0) == 0);
  }
  // The group's own mistakes still point at the group's help.
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"layer", "frob"}, {"layer", "--bogus"}, {"net", "frob", "x"}, {"env", "--bogus", "create"}}) {
    const CliResult r = cli(h, args);
    INFO(args[0] << " " << args[1] << "\nstderr: " << r.err);
    CHECK(r.status == 2);
    CHECK(contains(r.err, "See 'sandlet " + args[0] + " --help'."));
  }
  expect_nothing_left(h);
}

TEST_CASE("cli: create prints an id; ps, ps -q and ps --json list it; --label filters; rm removes it",
          "[cli][commands]") {
  Harness h;
  const std::string a = expect_id(cli(h, {"create", "--layer", SANDLET_TEST_ROOTFS, "--label", "task=t1", "--label", "k=v"}));
  const std::string b = expect_id(cli(h, {"create", "--layer", SANDLET_TEST_ROOTFS, "--label", "task=t2"}));
  CHECK(a != b);

  CliResult r = cli(h, {"ps"});
  CHECK(r.status == 0);
  CHECK(r.out.rfind("ID ", 0) == 0);
  bool row_a = false;
  for (const auto& l : lines(r.out))
    if (l.rfind(a + " ", 0) == 0) row_a = contains(l, "running") && contains(l, "task=t1") && contains(l, "k=v");
  CHECK(row_a);
  CHECK(lines(cli(h, {"ps", "-q"}).out) == std::set<std::string>{a, b});

  r = cli(h, {"ps", "--json"});
  CHECK(r.status == 0);
  const boost::json::value all = parse_json(r.out);
  REQUIRE(all.is_array());
  REQUIRE(all.get_array().size() == 2);
  bool found_a = false;
  for (const boost::json::value& rec : all.get_array()) {
    REQUIRE(rec.is_object());
    if (str(rec, "id") != a) continue;
    found_a = true;
    CHECK(str(rec, "state") == "running");
    const boost::json::value* spec = rec.get_object().if_contains("spec");
    REQUIRE(spec != nullptr);
    const boost::json::value* labels = spec->is_object() ? spec->get_object().if_contains("labels") : nullptr;
    REQUIRE(labels != nullptr);
    CHECK(str(*labels, "task") == "t1");
    CHECK(str(*labels, "k") == "v");
    CHECK(str(*spec, "lifetime") == "detached");
  }
  CHECK(found_a);

  // --label filters every form of the listing.
  const boost::json::value only_a = parse_json(cli(h, {"ps", "--json", "--label", "task=t1"}).out);
  REQUIRE(only_a.is_array());
  REQUIRE(only_a.get_array().size() == 1);
  CHECK(str(only_a.get_array()[0], "id") == a);
  CHECK(cli(h, {"ps", "-q", "--label", "task=t2"}).out == b + "\n");
  r = cli(h, {"ps", "--json", "--label", "task=none"});
  CHECK(r.status == 0);
  const boost::json::value none = parse_json(r.out);
  CHECK(none.is_array());
  CHECK(none.as_array().empty());

  r = cli(h, {"rm", a});
  CHECK(r.status == 0);
  CHECK(r.out == a + "\n");
  CHECK(cli(h, {"ps", "-q"}).out == b + "\n");
  // The removed id: exec and rm fail with status 1 and a message naming it.
  r = cli(h, {"exec", a, "--", "true"});
  CHECK(r.status == 1);
  CHECK(contains(r.err, a));
  r = cli(h, {"rm", a, b});  // each operand on its own: b is removed all the same
  CHECK(r.status == 1);
  CHECK(contains(r.err, "rm " + a));
  CHECK(r.out == b + "\n");
  const boost::json::value after_rm = parse_json(cli(h, {"ps", "--json"}).out);
  CHECK((after_rm.is_array() && after_rm.get_array().empty()));

  r = cli(h, {"gc"});
  CHECK(r.status == 0);
  CHECK(r.out == "0\n");  // nothing crashed or expired
  expect_nothing_left(h, {a, b});
}

TEST_CASE("cli: exec runs in a created sandbox: status, streams, options, timeout, state kept", "[cli][commands]") {
  Harness h;
  const std::string id = expect_id(cli(h, {"create", "--layer", SANDLET_TEST_ROOTFS}));
  auto exec = [&](std::vector<std::string> args, Input input = {}) {
    args.insert(args.begin(), "exec");
    return cli(h, args, std::move(input));
  };
  CliResult r = exec({id, "--", "sh", "-c", "echo to-out; echo to-err >&2; exit 3"});
  CHECK(r.status == 3);
  CHECK(r.out == "to-out\n");
  CHECK(r.err == "to-err\n");
  CHECK(exec({id, "/bin/echo", "no", "dashes"}).out == "no dashes\n");

  r = exec({"--env", "A=1", "-e", "B=two", "--workdir", "/tmp", id, "--", "sh", "-c", "echo \"$A $B $(pwd)\""});
  CHECK(r.status == 0);
  CHECK(r.out == "1 two /tmp\n");
  // exec's bare --env K copies K from the CLI's environment (its --help says so).
  r = exec({"-e", "FROM_HOST", id, "--", "sh", "-c", "echo \"[$FROM_HOST]\""}, {"", true, {"FROM_HOST=copied"}});
  CHECK(r.out == "[copied]\n");
  CHECK(exec({"--user", "1000", id, "--", "id", "-u"}).out == "1000\n");
  CHECK(exec({"-i", id, "--", "cat"}, {"to stdin"}).out == "to stdin");
  r = exec({id, "--", "cat"}, {"host data\n", /*close=*/false});
  CHECK(r.status == 0);
  CHECK(r.out.empty());

  CHECK(exec({id, "--", "sh", "-c", "kill -TERM $$"}).status == 128 + SIGTERM);
  CHECK(exec({id, "--", "no-such-command"}).status == 127);
  CHECK(exec({id, "--", "/etc/passwd"}).status == 126);

  // The sandbox keeps its state between execs.
  CHECK(exec({id, "--", "sh", "-c", "echo kept > /root/state"}).status == 0);
  CHECK(exec({id, "--", "cat", "/root/state"}).out == "kept\n");

  // --timeout: 124, quickly, and the command's whole tree is killed.
  const std::string secs = unique_seconds(2);
  r = exec({"--timeout", "0.5", id, "--", "sh", "-c", "sleep " + secs + " & exec sleep " + secs});
  CHECK(r.status == 124);
  CHECK(r.seconds < 5);
  CHECK(contains(r.err, "timed out"));
  CHECK(wait_until([&] { return host_pids({"sleep", secs}).empty(); }, 5));

  // What a command leaves running dies with it, unless --keep-background.
  const std::string bg = unique_seconds(3);
  CHECK(exec({id, "--", "sh", "-c", "sleep " + bg + " &"}).status == 0);
  CHECK(wait_until([&] { return host_pids({"sleep", bg}).empty(); }, 5));
  CHECK(exec({"--keep-background", id, "--", "sh", "-c", "sleep " + bg + " &"}).status == 0);
  // (The shell may exit before its background child has exec'd sleep: wait for it to show.)
  CHECK(wait_until([&] { return host_pids({"sleep", bg}).size() == 1; }, 5));

  CHECK(cli(h, {"rm", id}).status == 0);
  CHECK(wait_until([&] { return host_pids({"sleep", bg}).empty(); }, 5));  // rm killed it
  expect_nothing_left(h, {id});
}

TEST_CASE("cli: exec ended by Ctrl-C dies by SIGINT and its command is killed", "[cli][commands]") {
  Harness h;
  const std::string id = expect_id(cli(h, {"create", "--layer", SANDLET_TEST_ROOTFS}));
  const std::string secs = unique_seconds(4);
  CliProcess p(h, {"exec", id, "--", "sleep", secs});
  REQUIRE(wait_until([&] { return !host_pids({"sleep", secs}).empty(); }, 10));
  ::kill(p.pid(), SIGINT);
  const CliResult r = p.wait(10);
  CHECK(r.signal == SIGINT);
  CHECK(wait_until([&] { return host_pids({"sleep", secs}).empty(); }, 5));
  // The sandbox itself lives on.
  CHECK(cli(h, {"exec", id, "--", "echo", "alive"}).out == "alive\n");
  CHECK(cli(h, {"rm", id}).status == 0);
  expect_nothing_left(h, {id});
}

TEST_CASE("cli: cp copies a file into a sandbox and back out byte for byte", "[cli][commands]") {
  Harness h;
  const std::string id = expect_id(cli(h, {"create", "--layer", SANDLET_TEST_ROOTFS}));
  std::string data(200000, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 31 + i / 1000);
  const std::string in = h.root() + "/cp-in.bin", out = h.root() + "/cp-out.bin";
  std::ofstream(in, std::ios::binary) << data;
  fs::permissions(in, fs::perms(0750));

  CliResult r = cli(h, {"cp", in, id + ":/tmp/copied.bin"});
  CHECK(r.status == 0);
  CHECK(r.err.empty());
  // Inside: the same size and mode ("its mode is kept").
  CHECK(cli(h, {"exec", id, "--", "stat", "-c", "%s %a", "/tmp/copied.bin"}).out == "200000 750\n");
  r = cli(h, {"cp", id + ":/tmp/copied.bin", out});
  CHECK(r.status == 0);
  CHECK(slurp(out) == data);

  // A destination ending in '/' keeps the file's name; '-' is stdin or stdout.
  CHECK(cli(h, {"cp", in, id + ":/root/"}).status == 0);
  CHECK(cli(h, {"exec", id, "--", "cmp", "/root/cp-in.bin", "/tmp/copied.bin"}).status == 0);
  CHECK(cli(h, {"cp", "-", id + ":/tmp/from-stdin"}, {"piped bytes"}).status == 0);
  CHECK(cli(h, {"cp", id + ":/tmp/from-stdin", "-"}).out == "piped bytes");

  // A file that is not there: status 1, named.
  r = cli(h, {"cp", id + ":/tmp/not-there", out});
  CHECK(r.status == 1);
  CHECK(contains(r.err, "/tmp/not-there"));

  CHECK(cli(h, {"rm", id}).status == 0);
  fs::remove(in);
  fs::remove(out);
  expect_nothing_left(h, {id});
}

TEST_CASE("cli: pause freezes a sandbox (ps says paused), resume and exec let it run on", "[cli][commands]") {
  Harness h;
  const std::string id = expect_id(cli(h, {"create", "--layer", SANDLET_TEST_ROOTFS}));
  CliResult r = cli(h, {"pause", id});
  CHECK(r.status == 0);
  CHECK(r.out == id + "\n");
  bool paused = false;
  for (const auto& l : lines(cli(h, {"ps"}).out))
    if (l.rfind(id + " ", 0) == 0) paused = contains(l, "paused");
  CHECK(paused);
  CHECK(cli(h, {"resume", id}).status == 0);
  CHECK(str(parse_json(cli(h, {"ps", "--json"}).out).get_array().at(0), "state") == "running");
  // An exec resumes a paused sandbox first.
  CHECK(cli(h, {"pause", id}).status == 0);
  r = cli(h, {"exec", id, "--", "echo", "awake"});
  CHECK(r.status == 0);
  CHECK(r.out == "awake\n");
  // An unknown id is reported, exit 1; no id at all is a usage error.
  r = cli(h, {"pause", "0123456789ab"});
  CHECK(r.status == 1);
  CHECK(contains(r.err, "pause 0123456789ab"));
  CHECK(cli(h, {"resume"}).status == 2);
  CHECK(cli(h, {"rm", id}).status == 0);
  expect_nothing_left(h, {id});
}
