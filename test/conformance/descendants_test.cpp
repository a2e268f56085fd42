// Ending a command ends everything it started: timeouts, cancels, the command's own exit, destroy and the
// sandbox's lifetime. Checked inside the sandbox and on the host.
#include <csignal>
#include <future>
#include <thread>

#include "conformance/conformance.hpp"

using namespace conformance;

namespace {

// A command that leaves descendants of every kind: background children, an orphan reparented to init,
// one in its own session, and the main process waiting.
std::string family(const Sleeper& s) {
  return s.cmd() + " & " + s.cmd() + " & (" + s.cmd() + " &) ; setsid " + s.cmd() + " & " + s.cmd();
}

void check_all_gone(sandlet::Sandbox& sb, const Sleeper& s) {
  CHECK(wait_until([&] { return s.inside(sb) == 0; }, 10));
  CHECK(wait_until([&] { return s.on_host() == 0; }, 10));
}

}  // namespace

TEST_CASE("a timeout kills every descendant of the command", "[conformance][kill]") {
  Fixture f;
  auto sb = f.create();
  Sleeper s;
  const auto start = std::chrono::steady_clock::now();
  auto r = sh(sb, family(s), 1.0);
  CHECK(r.timed_out);
  CHECK(r.exit_code == -1);
  CHECK(r.signal == SIGKILL);
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(10));
  check_all_gone(sb, s);
  CHECK(out(sb, "echo alive") == "alive\n");  // the sandbox itself lives on
  f.check_no_leaks();
}

TEST_CASE("a cancel kills every descendant and reports CANCELLED", "[conformance][kill]") {
  Fixture f;
  auto sb = f.create();
  Sleeper s;
  std::promise<sandlet_code_t> done;
  sandlet::ExecOptions o({"sh", "-c", family(s)});
  auto control = sb.exec_start(o, [&](const sandlet::Error* err, sandlet::ExecResult) {
    done.set_value(err != nullptr ? err->code() : SANDLET_OK);
  });
  REQUIRE(wait_until([&] { return s.inside(sb) == 5; }, 10));
  if (backend() == "container") CHECK(s.on_host() == 5);  // (a VM's processes are not the host's)
  control.cancel();
  auto fut = done.get_future();
  REQUIRE(fut.wait_for(std::chrono::seconds(10)) == std::future_status::ready);
  CHECK(fut.get() == SANDLET_CANCELLED);
  check_all_gone(sb, s);
  f.check_no_leaks();
}

TEST_CASE("a signal reaches the command; what it leaves is killed when it exits", "[conformance][kill]") {
  Fixture f;
  auto sb = f.create();
  Sleeper s;
  std::promise<sandlet::ExecResult> done;
  sandlet::ExecOptions o({"sh", "-c", s.cmd() + " & exec " + s.cmd()});
  auto control = sb.exec_start(o, [&](const sandlet::Error*, sandlet::ExecResult r) { done.set_value(r); });
  REQUIRE(wait_until([&] { return s.inside(sb) == 2; }, 10));
  control.signal(SIGTERM);
  auto fut = done.get_future();
  REQUIRE(fut.wait_for(std::chrono::seconds(10)) == std::future_status::ready);
  CHECK(fut.get().signal == SIGTERM);
  check_all_gone(sb, s);
  // A command's own exit ends what it left in the background too (unless keep_background).
  Sleeper t;
  CHECK(sh(sb, t.cmd() + " >/dev/null 2>&1 &").exit_code == 0);
  check_all_gone(sb, t);
  f.check_no_leaks();
}

TEST_CASE("keep_background lets a server outlive its command; destroy ends it", "[conformance][kill]") {
  Fixture f;
  auto sb = f.create();
  Sleeper s;
  sandlet::ExecOptions o({"sh", "-c", s.cmd() + " >/dev/null 2>&1 &"});
  o.keep_background = true;
  CHECK(sb.exec(o).exit_code == 0);
  CHECK(wait_until([&] { return s.inside(sb) == 1; }, 10));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  CHECK(s.inside(sb) == 1);  // still there after its command is long gone
  sb.destroy();
  CHECK(wait_until([&] { return s.on_host() == 0; }, 10));
  auto e = error_of([&] { sb.exec({"true"}); });
  CHECK(e.code() == SANDLET_FAILED_PRECONDITION);
  f.check_no_leaks();
}

TEST_CASE("a sandbox past its max lifetime is gone with all its processes", "[conformance][kill][lifetime]") {
  Fixture f;
  auto sb = f.create(Fixture::spec().max_lifetime(2).lifetime("detached"));
  Sleeper s;
  sandlet::ExecOptions o({"sh", "-c", s.cmd() + " >/dev/null 2>&1 &"});
  o.keep_background = true;
  sb.exec(o);
  CHECK(wait_until([&] { return s.inside(sb) == 1; }, 10));
  CHECK(wait_until(
      [&] {
        try {
          sb.exec({"true"});
          return false;
        } catch (const sandlet::Error&) {
          return true;
        }
      },
      15));
  CHECK(wait_until([&] { return s.on_host() == 0; }, 10));
  sb.close();
  f.check_no_leaks();
}
