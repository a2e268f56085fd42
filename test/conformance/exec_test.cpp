// Exec semantics every backend must give: exit codes, signals, stdin, env, cwd, users, start errors.
#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>

#include "conformance/conformance.hpp"

using namespace conformance;

TEST_CASE("exit codes are the command's", "[conformance][exec]") {
  Fixture f;
  auto sb = f.create();
  CHECK(sb.exec({"true"}).exit_code == 0);
  CHECK(sb.exec({"false"}).exit_code == 1);
  for (int code : {2, 3, 42, 126, 127, 255}) {
    auto r = sh(sb, "exit " + std::to_string(code));
    CHECK(r.exit_code == code);
    CHECK(r.signal == 0);
    CHECK_FALSE(r.timed_out);
  }
  f.check_no_leaks();
}

TEST_CASE("a death by signal is reported as the signal; a shell inside sees 128+N", "[conformance][exec]") {
  Fixture f;
  auto sb = f.create();
  for (int sig : {SIGKILL, SIGTERM, SIGHUP, SIGUSR1}) {
    INFO("signal " << sig);
    auto r = sh(sb, "kill -" + std::to_string(sig) + " $$");
    CHECK(r.exit_code == -1);  // the API's way: no exit code, the signal
    CHECK(r.signal == sig);
    CHECK_FALSE(r.timed_out);
    // What harnesses that run commands through a shell get: the shell's 128+N.
    CHECK(out(sb, "sh -c 'kill -" + std::to_string(sig) + " $$'; echo $?") == std::to_string(128 + sig) + "\n");
  }
  f.check_no_leaks();
}

TEST_CASE("stdin is fed, then EOF; without stdin the command reads EOF at once", "[conformance][exec]") {
  Fixture f;
  auto sb = f.create();
  sandlet::ExecOptions o({"cat"});
  o.stdin_data = std::string("line one\nline two\0with a NUL\n", 29);
  auto r = sb.exec(o);
  CHECK(r.exit_code == 0);
  CHECK(r.stdout_data == o.stdin_data);
  // More than any pipe buffer: the agent must stream it.
  sandlet::ExecOptions big({"wc", "-c"});
  big.stdin_data.assign(3u << 20, 'x');
  CHECK(sb.exec(big).stdout_data.find("3145728") != std::string::npos);
  sandlet::ExecOptions none({"cat"});
  none.timeout_s = 10;
  r = sb.exec(none);
  CHECK(r.exit_code == 0);
  CHECK_FALSE(r.timed_out);
  CHECK(r.stdout_data.empty());
  f.check_no_leaks();
}

TEST_CASE("stdout and stderr are separate and binary-safe", "[conformance][exec]") {
  Fixture f;
  auto sb = f.create();
  auto r = sh(sb, "printf 'out\\000put'; printf 'err' >&2");
  CHECK(r.stdout_data == std::string("out\0put", 7));
  CHECK(r.stderr_data == "err");
  sandlet::ExecOptions o({"sh", "-c", "head -c 1048576 /dev/zero"});
  o.output_limit = 4096;
  r = sb.exec(o);
  CHECK(r.stdout_data.size() == 4096);
  CHECK(r.stdout_truncated);
  CHECK_FALSE(r.stderr_truncated);
  f.check_no_leaks();
}

TEST_CASE("env: the spec's, then the exec's on top", "[conformance][exec]") {
  Fixture f;
  auto sb = f.create(Fixture::spec().env("FROM_SPEC", "spec").env("BOTH", "spec"));
  sandlet::ExecOptions o({"sh", "-c", "echo \"$FROM_SPEC|$BOTH|$FROM_EXEC|$EQ\""});
  o.env = {"BOTH=exec", "FROM_EXEC=exec", "EQ=a=b"};
  CHECK(sb.exec(o).stdout_data == "spec|exec|exec|a=b\n");
  CHECK(out(sb, "echo \"$FROM_SPEC|$BOTH\"") == "spec|spec\n");
  sandlet::ExecOptions bad({"true"});
  bad.env = {"NO_EQUALS_SIGN"};
  auto e = error_of([&] { sb.exec(bad); });
  CHECK(e.code() == SANDLET_INVALID_ARGUMENT);
  CHECK(contains(e.what(), "env"));
  f.check_no_leaks();
}

TEST_CASE("cwd: the spec's workdir (made at create when missing), or the exec's (a missing one is NOT_FOUND naming it)",
          "[conformance][exec]") {
  Fixture f;
  auto sb = f.create(Fixture::spec().workdir("/tmp"));
  CHECK(out(sb, "pwd") == "/tmp\n");
  sandlet::ExecOptions o({"pwd"});
  o.cwd = "/etc";
  CHECK(sb.exec(o).stdout_data == "/etc\n");
  o.cwd = "/no/such/dir";
  auto e = error_of([&] { sb.exec(o); });
  CHECK(e.code() == SANDLET_NOT_FOUND);
  CHECK(e.err_no() == ENOENT);
  CHECK(contains(e.what(), "/no/such/dir"));
  // A workdir the image lacks is made at create, as `docker run -w` does: root's, mode 0755.
  auto missing = f.create(Fixture::spec().workdir("/no/such/workdir"));
  CHECK(out(missing, "pwd; stat -c '%u:%g %a' /no/such/workdir") == "/no/such/workdir\n0:0 755\n");
  f.check_no_leaks();
}

TEST_CASE("users: by uid, by name, and a user added to /etc/passwd at run time", "[conformance][exec][users]") {
  Fixture f;
  auto sb = f.create();
  CHECK(out(sb, "id -u; id -g") == "0\n0\n");
  sandlet::ExecOptions o({"sh", "-c", "id -u; id -g; echo $HOME"});
  o.user = "1000:1000";
  CHECK(sb.exec(o).stdout_data.rfind("1000\n1000\n", 0) == 0);
  o.user = "sandbox";
  CHECK(sb.exec(o).stdout_data == "1000\n1000\n/home/sandbox\n");
  // A user the workload adds itself (as `useradd` would) is resolved at exec time.
  out(sb, "echo 'agent:x:4242:4343::/home/agent:/bin/sh' >> /etc/passwd && "
          "echo 'agents:x:4343:' >> /etc/group && mkdir -p /home/agent && chown 4242:4343 /home/agent");
  o.user = "agent";
  CHECK(sb.exec(o).stdout_data == "4242\n4343\n/home/agent\n");
  sandlet::ExecOptions w({"sh", "-c", "touch /home/agent/mine && stat -c %u:%g /home/agent/mine"});
  w.user = "agent";
  CHECK(sb.exec(w).stdout_data == "4242:4343\n");
  o.user = "nosuchuser";
  auto e = error_of([&] { sb.exec(o); });
  CHECK(e.code() == SANDLET_NOT_FOUND);
  CHECK(contains(e.what(), "nosuchuser"));
  // The spec's user is the default of every exec.
  auto as_sandbox = f.create(Fixture::spec().user("sandbox"));
  CHECK(out(as_sandbox, "id -u") == "1000\n");
  f.check_no_leaks();
}

TEST_CASE("a command that cannot start is an error with the kernel's errno, not a result", "[conformance][exec]") {
  Fixture f;
  auto sb = f.create();
  auto e = error_of([&] { sb.exec({"/no/such/command"}); });
  CHECK(e.code() == SANDLET_NOT_FOUND);
  CHECK(e.err_no() == ENOENT);
  CHECK(contains(e.what(), "/no/such/command"));
  e = error_of([&] { sb.exec({"no-such-command-in-path"}); });
  CHECK(e.code() == SANDLET_NOT_FOUND);
  CHECK(e.err_no() == ENOENT);
  sb.write_file("/tmp/not-executable", "#!/bin/sh\necho hi\n", 0644);
  e = error_of([&] { sb.exec({"/tmp/not-executable"}); });
  CHECK(e.code() == SANDLET_PERMISSION_DENIED);
  CHECK(e.err_no() == EACCES);
  sb.write_file("/tmp/script", "#!/bin/sh\necho ran \"$@\"\n", 0755);
  CHECK(sb.exec({"/tmp/script", "a", "b"}).stdout_data == "ran a b\n");
  f.check_no_leaks();
}

TEST_CASE("execs in one sandbox run concurrently", "[conformance][exec]") {
  Fixture f;
  auto sb = f.create();
  std::atomic<int> done{0}, ok{0};
  for (int i = 0; i < 8; ++i) {
    sandlet::ExecOptions o({"sh", "-c", "sleep 1; echo " + std::to_string(i)});
    o.timeout_s = 30;
    sb.exec_async(o, [&, i](const sandlet::Error* err, sandlet::ExecResult r) {
      if (err == nullptr && r.stdout_data == std::to_string(i) + "\n") ++ok;
      ++done;
    });
  }
  const auto start = std::chrono::steady_clock::now();
  REQUIRE(wait_until([&] { return done == 8; }, 30));
  CHECK(ok == 8);
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(6));  // not one after the other
  f.check_no_leaks();
}
