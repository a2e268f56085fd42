// CPU classes: a sandbox labelled "sandlet/priority" = "batch" runs under SCHED_IDLE with the lowest CPU
// weight its cgroup layout offers; the default (latency-sensitive) is untouched.
#include <sys/prctl.h>

#include <boost/json.hpp>
#include <cerrno>

#include <iostream>

#include "integration/harness.hpp"

namespace {

// The scheduling policy of a process inside, as the kernel reports it (/proc/PID/stat field 41).
constexpr const char* kPolicyOfChild = "cut -d' ' -f41 /proc/self/stat";

std::string cpu_v1_group(sandlet::Sandbox& sb) {
  auto o = boost::json::parse(sb.info_json()).as_object();
  for (const auto& p : o.at("backend_state").at("cgroup_v1").as_array()) {
    std::string path = boost::json::value_to<std::string>(p);
    if (path.find("/cpu") != std::string::npos && path.find("/cpuset") == std::string::npos) return path;
  }
  return "";
}

std::string v2_group(sandlet::Sandbox& sb) {
  auto o = boost::json::parse(sb.info_json()).as_object();
  return boost::json::value_to<std::string>(o.at("backend_state").at("cgroup_v2"));
}

}  // namespace

TEST_CASE("cpu class batch: SCHED_IDLE for every process, lowest v1 weight; latency untouched", "[qos]") {
  Harness h;
  auto batch = h.rt().create(Harness::spec().label("sandlet/priority", "batch"));
  auto latency = h.rt().create(Harness::spec());
  CHECK(run_out(batch, kPolicyOfChild) == "5\n");  // SCHED_IDLE
  CHECK(run_out(latency, kPolicyOfChild) == "0\n");  // SCHED_OTHER
  // Root inside cannot leave the class (no CAP_SYS_NICE in the host's namespace, RLIMIT_NICE 0).
  CHECK(run_out(batch, "chrt -o -p 0 $$ >/dev/null 2>&1; " + std::string(kPolicyOfChild)) == "5\n");
  if (fs::exists("/sys/fs/cgroup/cgroup.controllers")) {
    // Pure v2: the lowest weight is cpu.idle, where the cpu controller reaches the sandbox's group.
    if (!fs::exists(v2_group(batch) + "/cpu.idle")) {
      std::cout << "SANDLET-SKIP: cpu.idle needs cgroup v2's cpu controller enabled down to the sandbox" << std::endl;
    } else {
      CHECK(slurp(v2_group(batch) + "/cpu.idle") == "1\n");
      CHECK(slurp(v2_group(latency) + "/cpu.idle") == "0\n");
    }
  } else if (!fs::exists("/sys/fs/cgroup/cpu")) {
    std::cout << "SANDLET-SKIP: cpu.shares needs the hybrid layout's v1 cpu controller" << std::endl;
  } else {
    const std::string group = cpu_v1_group(batch);
    REQUIRE_FALSE(group.empty());
    CHECK(slurp(group + "/cpu.shares") == "2\n");
    // Every process of the sandbox is in that group (the init was moved there before anything ran).
    CHECK(run_out(batch, "grep -c cpu /proc/self/cgroup") != "0\n");
    CHECK(slurp(group + "/tasks").size() > 0);
  }
  // Core scheduling: a batch sandbox's processes carry a core cookie of their own where SMT runs.
  const pid_t batch_init = static_cast<pid_t>(
      boost::json::parse(batch.info_json()).as_object().at("backend_state").at("init_pid").to_number<int64_t>());
  unsigned long cookie = 0;
  std::string smt;
  std::ifstream("/sys/devices/system/cpu/smt/active") >> smt;
  if (smt != "1") {
    std::cout << "SANDLET-SKIP: core scheduling: this CPU runs no SMT (smt/active " << smt << ")" << std::endl;
  } else if (::prctl(PR_SCHED_CORE, PR_SCHED_CORE_GET, batch_init, PR_SCHED_CORE_SCOPE_THREAD, &cookie) != 0) {
    std::cout << "SANDLET-SKIP: core scheduling: this kernel has no CONFIG_SCHED_CORE (errno " << errno << ")" << std::endl;
  } else {
    CHECK(cookie != 0);
    const pid_t latency_init = static_cast<pid_t>(
        boost::json::parse(latency.info_json()).as_object().at("backend_state").at("init_pid").to_number<int64_t>());
    unsigned long none = 1;
    REQUIRE(::prctl(PR_SCHED_CORE, PR_SCHED_CORE_GET, latency_init, PR_SCHED_CORE_SCOPE_THREAD, &none) == 0);
    CHECK(none == 0);
  }
  batch.destroy();
  latency.destroy();
  h.check_no_leaks();
}

TEST_CASE("cpu class: an unknown value of the label fails the create, naming it", "[qos]") {
  Harness h;
  try {
    h.rt().create(Harness::spec().label("sandlet/priority", "urgent"));
    FAIL("created");
  } catch (const sandlet::Error& e) {
    CHECK(e.code() == SANDLET_INVALID_ARGUMENT);
    CHECK(std::string(e.what()).find("labels.sandlet/priority") != std::string::npos);
  }
  CHECK(h.rt().list().empty());
  h.check_no_leaks();
}
