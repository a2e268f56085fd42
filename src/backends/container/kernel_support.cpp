#include "backends/container/kernel_support.hpp"

#include <unistd.h>

#include <algorithm>
#include <map>
#include <mutex>

#include "common/error.hpp"
#include "sys/fs_util.hpp"
#include "sys/kernel_features.hpp"

namespace sandlet::container {
namespace {

bool exists(const std::string& path) { return ::access(path.c_str(), F_OK) == 0; }

// A cgroup2 group that is not the root one (the root has no cgroup.kill): our parent group once a runtime
// prepared it, else this process's own group.
std::string non_root_group(const sys::CgroupSystem& cg) {
  std::string parent = sys::CgroupSystem::group_path(cg.v2_root, "");
  if (!parent.empty() && parent.back() == '/') parent.pop_back();
  if (!parent.empty() && exists(parent)) return parent;
  auto self = sys::read_file_if_exists("/proc/self/cgroup", 1 << 16);
  if (!self) return "";
  size_t at = self->find("0::/");
  if (at == std::string::npos) return "";
  std::string rel = self->substr(at + 3, self->find('\n', at) - at - 3);
  return rel == "/" ? "" : cg.v2_root + rel;
}

HostGuarantees probe(const sys::CgroupSystem& cg) {
  HostGuarantees h;
  const std::string group = cg.v2_root.empty() ? "" : non_root_group(cg);
  if (group.empty()) {
    h.cgroup_kill_answer = "not probed: no cgroup2 group other than the root to look in";
  } else {
    h.cgroup_kill = exists(group + "/cgroup.kill");
    h.cgroup_kill_answer = group + "/cgroup.kill " + (h.cgroup_kill ? "exists" : "is missing");
  }
  // /proc/swaps: a header line, then one line per active swap area.
  auto swaps = sys::read_file_if_exists("/proc/swaps", 1 << 16);
  h.swap_on = swaps && std::count(swaps->begin(), swaps->end(), '\n') > 1;
  std::string file;
  if (cg.unified) {
    file = group.empty() ? "" : group + "/memory.swap.max";
  } else if (!cg.memory_v1.empty()) {
    file = cg.memory_v1 + "/memory.memsw.limit_in_bytes";
  }
  h.swap_accounted = !file.empty() && exists(file);
  h.swap_answer = std::string(h.swap_on ? "swap is on" : "no swap space") + "; " +
                  (file.empty() ? "no memory cgroup to look in" : file + (h.swap_accounted ? " exists" : " is missing"));
  return h;
}

}  // namespace

std::string kernel_unsupported() {
  const sys::KernelFeatures& f = sys::kernel_features();
  const std::pair<const char*, bool> needed[] = {
      {"clone3", f.clone3},           {"clone_into_cgroup", f.clone_into_cgroup},
      {"pidfd", f.pidfd},             {"waitid_pidfd", f.waitid_pidfd},
      {"close_range", f.close_range}, {"openat2", f.openat2},
      {"mount_api", f.mount_api},     {"mount_setattr", f.mount_setattr},
      {"overlay", f.overlay},         {"seccomp_filter", f.seccomp_kill_process},
  };
  for (const auto& [name, present] : needed) {
    if (present) continue;
    for (const auto& p : f.probes)
      if (p.name == name) return "the kernel lacks " + p.name + " (" + p.answer + ")";
    return std::string("the kernel lacks ") + name;
  }
  return "";
}

const HostGuarantees& host_guarantees(const sys::CgroupSystem& cgroups) {
  static std::mutex mutex;
  static std::map<std::string, HostGuarantees> cache;  // by cgroup tree (tests may simulate another)
  std::lock_guard lock(mutex);
  const std::string key = cgroups.v2_root + (cgroups.unified ? " v2" : " hybrid");
  auto it = cache.find(key);
  if (it == cache.end()) it = cache.emplace(key, probe(cgroups)).first;
  return it->second;
}

std::vector<WeakerGuarantee> weaker_guarantees(const HostGuarantees& host, const Spec* spec) {
  std::vector<WeakerGuarantee> out;
  if (!host.cgroup_kill)
    out.push_back({"exec_kill_descendants",
                   "cgroup2 groups have no cgroup.kill (" + host.cgroup_kill_answer +
                       "): a timeout, cancel or kill of a command signals its process group only, so a "
                       "process that left it (setsid) lives on until the sandbox ends"});
  if (host.swap_on && !host.swap_accounted && (!spec || spec->limits.memory != 0))
    out.push_back({"memory_swap", "memory cgroups cannot bound swap here (" + host.swap_answer +
                                      "): limits.memory bounds RAM only, and a sandbox can push what exceeds it "
                                      "out to swap"});
  return out;
}

void require_accepted_guarantees(const HostGuarantees& host, const Spec& spec) {
  std::string refused;
  for (const auto& w : weaker_guarantees(host, &spec)) {
    if (std::find(spec.accept_weaker.begin(), spec.accept_weaker.end(), w.name) != spec.accept_weaker.end()) continue;
    refused += std::string(refused.empty() ? "" : "; ") + w.name + ": " + w.why;
  }
  if (!refused.empty())
    throw Error(Code::kUnimplemented,
                "this host gives weaker guarantees than the sandbox needs (" + refused +
                    "); list the names in the spec's accept_weaker to create it anyway");
}

}  // namespace sandlet::container
