// Limits every backend must enforce: memory, pids, disk. The sandbox survives hitting each.
#include <cerrno>
#include <csignal>

#include "conformance/conformance.hpp"

using namespace conformance;

TEST_CASE("memory: a process past the limit is killed, the sandbox lives on", "[conformance][limits]") {
  Fixture f;
  auto sb = f.create(Fixture::spec().memory(64ull << 20));
  // `tail -n 1` keeps a whole line: 256 MiB without a newline against 64 MiB.
  auto r = sh(sb, "head -c 268435456 /dev/zero | tail -n 1 >/dev/null; echo \"tail: $?\"", 60);
  INFO(r.stdout_data << r.stderr_data);
  // The OOM killer ends tail (SIGKILL: the shell sees 137); it may take the shell too before tail's memory
  // is reaped (seen under cgroup v2 in a slow VM), and then the exec itself dies by SIGKILL.
  CHECK((r.stdout_data == "tail: 137\n" || (r.exit_code == -1 && r.signal == SIGKILL)));
  // Below the limit the same works.
  CHECK(out(sb, "head -c 16777216 /dev/zero | tail -n 1 | wc -c") == "16777216\n");
  f.check_no_leaks();
}

TEST_CASE("pids: a fork bomb stops at the limit, the sandbox lives on", "[conformance][limits]") {
  Fixture f;
  auto sb = f.create(Fixture::spec().pids(32));
  Sleeper s;
  // ash gives up at the first failed fork: the bomb runs in a subshell; counting needs no fork (a glob).
  auto r = sh(sb, "(i=0; while [ $i -lt 100 ]; do " + s.cmd() + " & i=$((i+1)); done) 2>/dev/null; "
                  "set -- /proc/[0-9]*; echo $#", 30);
  INFO(r.stderr_data);
  REQUIRE_FALSE(r.stdout_data.empty());
  CHECK(std::stoi(r.stdout_data) <= 32);
  CHECK(std::stoi(r.stdout_data) >= 20);  // the bomb did run
  CHECK(wait_until([&] { return s.on_host() == 0; }, 10));
  CHECK(out(sb, "echo alive") == "alive\n");
  f.check_no_leaks();
}

TEST_CASE("disk: writes past the limit fail with ENOSPC, inside and through write_file", "[conformance][limits]") {
  Fixture f;
  auto sb = f.create(Fixture::spec().disk(16ull << 20));
  auto r = sh(sb, "dd if=/dev/zero of=/big bs=1048576 count=64 2>&1; echo \"dd: $?\"", 60);
  INFO(r.stdout_data);
  CHECK(contains(r.stdout_data, "No space left on device"));
  CHECK_FALSE(contains(r.stdout_data, "dd: 0"));
  out(sb, "rm -f /big");
  auto e = error_of([&] { sb.write_file("/big-file", std::string(32u << 20, 'x')); });
  CHECK(e.code() == SANDLET_RESOURCE_EXHAUSTED);
  CHECK(e.err_no() == ENOSPC);
  CHECK(contains(e.what(), "/big-file"));
  CHECK(out(sb, "ls -a / | grep -c sandlet || true") == "0\n");  // no temporary file left behind
  // Space freed is usable again.
  sb.write_file("/small", std::string(1u << 20, 'y'));
  CHECK(sb.read_file("/small").size() == (1u << 20));
  f.check_no_leaks();
}
