#include "backends/host/sandbox_cgroup.hpp"

#include <fcntl.h>
#include <sched.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cmath>
#include <cstring>

#include "common/error.hpp"
#include "sys/fs_util.hpp"

namespace sandlet::host {

SandboxCgroup SandboxCgroup::create(const sys::CgroupSystem& sys, const std::string& id, uid_t owner_uid,
                                    const Limits* known) {
  SandboxCgroup cg;
  cg.sys_ = &sys;
  cg.id_ = id;
  cg.paths_.v2 = sys::CgroupSystem::group_path(sys.v2_root, id);
  sys.make_group(cg.paths_.v2);
  try {
    cg.v2_fd_.reset(::open(cg.paths_.v2.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!cg.v2_fd_) throw_errno("open cgroup " + cg.paths_.v2);
    // Delegate: the agent (root inside = owner_uid) creates per-exec child groups and moves processes.
    // Bounded (the files stay the host's): a tree nested past PATH_MAX could not be removed by path, and
    // every group costs kernel memory.
    sys::write_existing_at(cg.v2_fd_.get(), "cgroup.max.depth", std::to_string(kMaxDepth));
    sys::write_existing_at(cg.v2_fd_.get(), "cgroup.max.descendants", std::to_string(kMaxDescendants));
    for (const char* f : {".", "cgroup.procs"})
      if (::fchownat(cg.v2_fd_.get(), f, owner_uid, owner_uid, 0) < 0) throw_errno("chown cgroup " + cg.paths_.v2 + "/" + f);
    if (!sys.unified) {
      // Every v1 group the sandbox may need, made now (a few tens of microseconds each): its first
      // process joins them itself before it runs anything, and a CPU limit set later (a pooled sandbox)
      // is a write, not a migration of a running process.
      const std::pair<const std::string&, bool> controllers[] = {
          {sys.memory_v1, !known || known->memory != 0},
          {sys.pids_v1, !known || known->pids != 0},
          {sys.cpu_v1, !known || known->cpus > 0},
      };
      for (const auto& [root, needed] : controllers) {
        if (root.empty() || !needed) continue;
        std::string p = sys::CgroupSystem::group_path(root, id);
        sys.make_group(p);
        cg.paths_.v1.push_back(p);
        sys::UniqueFd tasks(::open((p + "/tasks").c_str(), O_WRONLY | O_CLOEXEC));
        if (!tasks) throw_errno("open " + p + "/tasks");
        cg.v1_join_.push_back(std::move(tasks));
      }
    }
  } catch (...) {
    sys::kill_and_remove_cgroups(cg.paths_);
    cg.paths_ = {};
    throw;
  }
  return cg;
}

void SandboxCgroup::apply_limits(const Limits& limits) {
  const sys::CgroupSystem& sys = *sys_;
  auto quota = static_cast<uint64_t>(std::llround(limits.cpus * 100000));
  if (sys.unified) {
    // On cgroup v2 a limit file exists only where its controller is enabled: say which one is missing.
    const std::string parent = sys::CgroupSystem::group_path(sys.v2_root, "");
    auto write_limit = [&](const char* file, const std::string& value, const char* field, const char* controller) {
      try {
        sys::write_existing_at(v2_fd_.get(), file, value);
      } catch (const Error& e) {
        if (e.err_no() != ENOENT) throw;
        throw Error(Code::kUnimplemented,
                    std::string(field) + ": the " + controller + " cgroup controller is not available under " + parent +
                        " (sandlet enables it there when " + sys.v2_root +
                        "/cgroup.controllers lists it; on a delegated subtree, the delegating manager must)");
      }
    };
    if (limits.memory) {
      write_limit("memory.max", std::to_string(limits.memory), "limits.memory", "memory");
      // (Missing without swap accounting: a create is refused unless it accepts "memory_swap" when the
      // host had swap at this process's first probe; swap turned on later is not noticed.)
      try {
        sys::write_existing_at(v2_fd_.get(), "memory.swap.max", "0");
      } catch (const Error& e) {
        if (e.err_no() != ENOENT) throw;
      }
    }
    if (limits.pids) write_limit("pids.max", std::to_string(limits.pids), "limits.pids", "pids");
    if (limits.cpus > 0) write_limit("cpu.max", std::to_string(quota) + " 100000", "limits.cpus", "cpu");
    return;
  }
  auto v1 = [&](const std::string& root) { return sys::CgroupSystem::group_path(root, id_); };
  if (limits.memory) {
    if (sys.memory_v1.empty()) throw Error(Code::kUnimplemented, "limits.memory: no memory cgroup controller on this host");
    sys::write_existing(v1(sys.memory_v1) + "/memory.limit_in_bytes", std::to_string(limits.memory));
    // RAM + swap at the same bound: no swap. (Missing without swap accounting: refused earlier unless the
    // spec accepts "memory_swap", see kernel_support.)
    try {
      sys::write_existing(v1(sys.memory_v1) + "/memory.memsw.limit_in_bytes", std::to_string(limits.memory));
    } catch (const Error& e) {
      if (e.err_no() != ENOENT) throw;
    }
  }
  if (limits.pids) {
    if (sys.pids_v1.empty()) throw Error(Code::kUnimplemented, "limits.pids: no pids cgroup controller on this host");
    sys::write_existing(v1(sys.pids_v1) + "/pids.max", std::to_string(limits.pids));
  }
  if (limits.cpus > 0) {
    if (sys.cpu_v1.empty()) throw Error(Code::kUnimplemented, "limits.cpus: no cpu cgroup controller on this host");
    std::string cpu = v1(sys.cpu_v1);
    sys::write_existing(cpu + "/cpu.cfs_period_us", "100000");
    sys::write_existing(cpu + "/cpu.cfs_quota_us", std::to_string(quota));
  }
}

namespace {

// Writes `value` to `dir/file`; a refusal names the field. `required`: a missing file is UNIMPLEMENTED
// (the limit cannot be set), else it is skipped (nothing to undo).
void write_running(const std::string& dir, const char* file, const std::string& value, const char* field, bool required) {
  const int err = sys::try_write_existing(dir + "/" + file, value);
  if (err == 0) return;
  if (err == ENOENT && !required) return;
  if (err == ENOENT)
    throw Error(Code::kUnimplemented, std::string(field) + ": this sandbox has no " + file + " (on a hybrid-cgroup host a "
                                          "sandbox created without this limit has no group for it)");
  throw Error(Code::kInvalidArgument, std::string("invalid field '") + field + "': the kernel refused " + value +
                                          " for " + file + " (" + std::strerror(err) + ")");
}

}  // namespace

void set_running_limits(const sys::CgroupSystem& sys, const sys::CgroupPaths& paths, const Limits& limits) {
  const std::string quota = std::to_string(static_cast<uint64_t>(std::llround(limits.cpus * 100000)));
  if (sys.unified) {
    write_running(paths.v2, "memory.max", limits.memory ? std::to_string(limits.memory) : "max", "limits.memory", limits.memory != 0);
    // As at create: no swap under a memory limit (the bound would otherwise be RAM + swap).
    write_running(paths.v2, "memory.swap.max", limits.memory ? "0" : "max", "limits.memory", false);
    write_running(paths.v2, "pids.max", limits.pids ? std::to_string(limits.pids) : "max", "limits.pids", limits.pids != 0);
    write_running(paths.v2, "cpu.max", (limits.cpus > 0 ? quota : std::string("max")) + " 100000", "limits.cpus", limits.cpus > 0);
    return;
  }
  auto group_under = [&](const std::string& root) -> std::string {
    if (root.empty()) return {};
    for (const auto& p : paths.v1)
      if (p.compare(0, root.size() + 1, root + "/") == 0) return p;
    return {};
  };
  auto need = [](const std::string& group, bool wanted, const char* field) {
    if (group.empty() && wanted)
      throw Error(Code::kUnimplemented, std::string(field) + ": this sandbox has no group of that controller (on a "
                                            "hybrid-cgroup host a sandbox created without this limit has none)");
    return !group.empty();
  };
  if (const std::string mem = group_under(sys.memory_v1); need(mem, limits.memory != 0, "limits.memory")) {
    // RAM + swap is kept at the RAM bound (no swap), and may never be below it: lift it first.
    write_running(mem, "memory.memsw.limit_in_bytes", "-1", "limits.memory", false);
    write_running(mem, "memory.limit_in_bytes", limits.memory ? std::to_string(limits.memory) : "-1", "limits.memory", true);
    if (limits.memory)
      write_running(mem, "memory.memsw.limit_in_bytes", std::to_string(limits.memory), "limits.memory", false);
  }
  if (const std::string pids = group_under(sys.pids_v1); need(pids, limits.pids != 0, "limits.pids"))
    write_running(pids, "pids.max", limits.pids ? std::to_string(limits.pids) : "max", "limits.pids", true);
  if (const std::string cpu = group_under(sys.cpu_v1); need(cpu, limits.cpus > 0, "limits.cpus")) {
    write_running(cpu, "cpu.cfs_period_us", "100000", "limits.cpus", true);
    write_running(cpu, "cpu.cfs_quota_us", limits.cpus > 0 ? quota : std::string("-1"), "limits.cpus", true);
  }
}

void SandboxCgroup::apply_cpu_class(bool batch, pid_t init_pid) {
  if (!batch) return;
  const sys::CgroupSystem& sys = *sys_;
  // SCHED_IDLE holds without any controller, and root inside cannot leave it: switching away needs
  // CAP_SYS_NICE in the host's user namespace or an RLIMIT_NICE above 0, whose hard limit (0) it cannot raise.
  sched_param param{};
  if (::sched_setscheduler(init_pid, SCHED_IDLE, &param) < 0) throw_errno("sandbox " + id_ + ": SCHED_IDLE for its init");
  // Core scheduling where the CPU runs SMT: a core cookie of its own (inherited by everything the init
  // starts), so that no thread of it runs on a sibling of a latency-sensitive thread's core at the same
  // time (the sibling idles instead). Root inside can only make itself another cookie, never none. A CPU
  // without SMT (ENODEV) or a kernel without CONFIG_SCHED_CORE (EINVAL) refuses: the class is then the
  // scheduling policy and the weight.
  ::prctl(PR_SCHED_CORE, PR_SCHED_CORE_CREATE, init_pid, PR_SCHED_CORE_SCOPE_THREAD_GROUP, 0);
  if (sys.unified) {
    // cpu.idle exists only where the cpu controller is enabled; without it SCHED_IDLE is the whole class.
    try {
      sys::write_existing_at(v2_fd_.get(), "cpu.idle", "1");
    } catch (const Error& e) {
      if (e.err_no() != ENOENT) throw;
    }
    return;
  }
  if (sys.cpu_v1.empty()) return;
  const std::string cpu = sys::CgroupSystem::group_path(sys.cpu_v1, id_);
  bool made = false;
  for (const auto& p : paths_.v1) made = made || p == cpu;
  if (!made) {
    sys.make_group(cpu);
    paths_.v1.push_back(cpu);  // removed with the others from here on
    // The init has not started anything yet: moving it moves the whole sandbox (a migration of a
    // running process: one RCU grace period, paid only by batch creates without a CPU limit).
    sys::write_existing(cpu + "/tasks", std::to_string(init_pid));
  }
  sys::write_existing(cpu + "/cpu.shares", "2");
}

SandboxCgroup::~SandboxCgroup() {
  if (!released_ && !paths_.v2.empty()) {
    v2_fd_.reset();
    sys::kill_and_remove_cgroups(paths_);
  }
}

std::vector<int> SandboxCgroup::v1_join_fds() const {
  std::vector<int> fds;
  for (const auto& fd : v1_join_) fds.push_back(fd.get());
  return fds;
}

}  // namespace sandlet::host
