// gc after a kill -9 of the owner at each named step of a create (binary conformance-create-steps).
//
// Unlike the rest of the suite this binary links the library's core archive (and its C ABI sources), not
// libsandlet.so: the create steps are the library's fault points (common/fault_point.hpp), whose hook
// only a program linked with the core can set. The owner process (this binary, --owner create-die-at)
// sets a hook that SIGKILLs the process itself the first time a step is reached. The test learns the
// steps from a run that only records them, so a step added later is covered without editing this file.
// Two paths: a cold create (no warm pool) and one served from a full warm pool, which then refills.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <mutex>
#include <set>

#include "common/fault_point.hpp"
#include "conformance/conformance.hpp"
#include "support/sweep_root.hpp"

using namespace conformance;

namespace {

std::mutex g_mu;
std::set<std::string> g_seen;
std::string g_die_at;  // "-": only print every step, the first time

void on_point(const char* point) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (!g_seen.insert(point).second) return;
  if (g_die_at == "-") {
    const std::string line = std::string("step ") + point + "\n";
    (void)!::write(1, line.data(), line.size());
  } else if (g_die_at == point) {
    ::kill(::getpid(), SIGKILL);  // the owner dies here, as by `kill -9`
  }
}

const bool g_registered = [] {
  arm_fault_points = [](const std::string& point) {
    if (point.empty()) {
      sandlet::testing::set_fault_hook(nullptr);
      return;
    }
    std::lock_guard<std::mutex> lock(g_mu);
    g_die_at = point;
    g_seen.clear();
    sandlet::testing::set_fault_hook(&on_point);
  };
  return true;
}();

std::vector<std::string> record_steps(const std::string& path) {
  Fixture f;
  Owner owner({"create-die-at", f.root(), path, "-"});
  std::vector<std::string> steps;
  for (std::string line = owner.line(); !line.empty() && line != "done"; line = owner.line()) {
    INFO(line);
    REQUIRE(line.rfind("step ", 0) == 0);
    steps.push_back(line.substr(5));
  }
  CHECK(owner.wait() == 0);
  f.check_no_leaks();
  return steps;
}

void kill_at(const std::string& path, const std::string& step) {
  Fixture f;
  Owner owner({"create-die-at", f.root(), path, step});
  const std::string last = owner.line(120);  // "" once it died (its pipe closed); "done" if it did not
  const int status = owner.wait();
  INFO("the owner printed '" << last << "', wait status " << status);
  REQUIRE(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGKILL);
  // What it left: the leak check looks for all of it after gc.
  for (const auto& id : test_support::sandbox_ids_under(f.root())) f.track(id);
  f.rt().gc();
  for (const auto& info : f.rt().list()) FAIL_CHECK("listed after gc: " << info.id << " " << info.state);
  f.check_no_leaks();
  auto sb = f.create();  // and the root works as before
  CHECK(sb.exec({"true"}).exit_code == 0);
  sb.destroy();
  f.check_no_leaks();
}

}  // namespace

TEST_CASE("gc after a kill -9 of the owner at each step of a cold create leaves nothing", "[conformance][crash][gc][steps]") {
  static const std::vector<std::string> steps = record_steps("cold");  // (learnt once: one run per section)
  REQUIRE(steps.size() >= 5);  // the runtime's record, prepared, finished, running and the backend's own
  for (const auto& step : steps)
    DYNAMIC_SECTION("killed at " << step) { kill_at("cold", step); }
}

TEST_CASE("gc after a kill -9 of the owner at each step of a create from the warm pool and its refill", "[conformance][crash][gc][steps]") {
  static const std::vector<std::string> steps = record_steps("pooled");
  REQUIRE(steps.size() >= 3);
  for (const auto& step : steps)
    DYNAMIC_SECTION("killed at " << step) { kill_at("pooled", step); }
}
