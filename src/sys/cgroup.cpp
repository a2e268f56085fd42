#include "sys/cgroup.hpp"

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <cmath>
#include <thread>

#include "common/error.hpp"
#include "sys/fs_util.hpp"

namespace sandlet::sys {
namespace {

constexpr const char* kParent = "sandlet";

bool is_cgroup2(const std::string& path) {
  struct statfs st;
  return ::statfs(path.c_str(), &st) == 0 && st.f_type == CGROUP2_SUPER_MAGIC;
}
bool is_cgroup1(const std::string& path) {
  struct statfs st;
  return ::statfs(path.c_str(), &st) == 0 && st.f_type == CGROUP_SUPER_MAGIC;
}
bool exists(const std::string& path) { return ::access(path.c_str(), F_OK) == 0; }

void mkdir_ignore_exists(const std::string& path) {
  if (::mkdir(path.c_str(), 0755) < 0 && errno != EEXIST) throw_errno("mkdir cgroup " + path);
}

// Removes a cgroup directory after its children; retries while the kernel still tears tasks down.
bool rmdir_cgroup_tree(const std::string& path) {
  // Most groups are leaves by the time they are removed: try that before listing the directory.
  if (::rmdir(path.c_str()) == 0 || errno == ENOENT) return true;
  if (errno != EBUSY && errno != ENOTEMPTY) return false;
  // A cgroup directory holds dozens of control files: find child groups by d_type, not a stat each.
  for (const auto& name : list_subdirs(path)) rmdir_cgroup_tree(path + "/" + name);
  for (int attempt = 0; attempt < 400; ++attempt) {
    if (::rmdir(path.c_str()) == 0 || errno == ENOENT) return true;
    if (errno != EBUSY) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(attempt < 50 ? 100 : 5000));
  }
  return false;
}

}  // namespace

CgroupSystem CgroupSystem::detect() {
  CgroupSystem s;
  if (is_cgroup2("/sys/fs/cgroup")) {
    s.unified = true;
    s.v2_root = "/sys/fs/cgroup";
    return s;
  }
  if (!is_cgroup2("/sys/fs/cgroup/unified"))
    throw Error(Code::kUnimplemented,
                "no cgroup2 hierarchy at /sys/fs/cgroup or /sys/fs/cgroup/unified (sandlet needs cgroup2 for "
                "cgroup.kill and CLONE_INTO_CGROUP)");
  s.v2_root = "/sys/fs/cgroup/unified";
  auto pick = [](std::initializer_list<const char*> names) -> std::string {
    for (const char* n : names) {
      std::string p = std::string("/sys/fs/cgroup/") + n;
      if (is_cgroup1(p)) return p;
    }
    return {};
  };
  s.memory_v1 = pick({"memory"});
  s.pids_v1 = pick({"pids"});
  s.cpu_v1 = pick({"cpu", "cpu,cpuacct"});
  return s;
}

void CgroupSystem::prepare() const {
  mkdir_ignore_exists(v2_root + "/" + kParent);
  if (unified) {
    // Controllers must be enabled top-down: the root, then our parent group.
    for (const std::string& dir : {v2_root, v2_root + "/" + kParent}) {
      std::string avail = read_file(dir + "/cgroup.controllers");
      std::string enable;
      for (const char* c : {"cpu", "memory", "pids"})
        if (avail.find(c) != std::string::npos) enable += std::string(enable.empty() ? "+" : " +") + c;
      if (!enable.empty()) {
        try {
          write_existing(dir + "/cgroup.subtree_control", enable);
        } catch (const Error&) {
          // Already enabled or refused by a parent policy; limits then fail loudly at create.
        }
      }
    }
    return;
  }
  for (const std::string& root : {memory_v1, pids_v1, cpu_v1})
    if (!root.empty()) mkdir_ignore_exists(root + "/" + kParent);
}

void CgroupSystem::release() const {
  if (v2_root.empty()) return;
  for (const std::string& root : {v2_root, memory_v1, pids_v1, cpu_v1})
    if (!root.empty()) ::rmdir((root + "/" + kParent).c_str());  // EBUSY while sandboxes exist: fine
}

// mkdir of a sandbox group; re-creates the parent if another runtime released it meanwhile.
static void mkdir_group(const CgroupSystem& sys, const std::string& path, bool exist_ok = false) {
  for (int attempt = 0;; ++attempt) {
    if (::mkdir(path.c_str(), 0755) == 0 || (exist_ok && errno == EEXIST)) return;
    if (errno != ENOENT || attempt == 3) throw_errno("mkdir cgroup " + path);
    sys.prepare();
  }
}

std::string CgroupSystem::describe() const {
  return unified ? "cgroup v2 at " + v2_root : "hybrid: cgroup2 at " + v2_root + " + v1 controllers";
}

CgroupPaths cgroup_paths_for(const CgroupSystem& sys, const std::string& id) {
  CgroupPaths p;
  if (sys.v2_root.empty()) return p;
  p.v2 = sys.v2_root + "/" + kParent + "/" + id;
  if (!sys.unified)
    for (const std::string& root : {sys.memory_v1, sys.pids_v1, sys.cpu_v1})
      if (!root.empty()) p.v1.push_back(root + "/" + kParent + "/" + id);
  return p;
}

SandboxCgroup SandboxCgroup::create(const CgroupSystem& sys, const std::string& id, uid_t owner_uid,
                                    const Limits* known) {
  SandboxCgroup cg;
  cg.sys_ = &sys;
  cg.id_ = id;
  cg.paths_.v2 = sys.v2_root + "/" + kParent + "/" + id;
  mkdir_group(sys, cg.paths_.v2);
  try {
    cg.v2_fd_.reset(::open(cg.paths_.v2.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!cg.v2_fd_) throw_errno("open cgroup " + cg.paths_.v2);
    // Delegate: the agent (root inside = owner_uid) creates per-exec child groups and moves processes.
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
        std::string p = root + "/" + kParent + "/" + id;
        mkdir_group(sys, p);
        cg.paths_.v1.push_back(p);
        UniqueFd tasks(::open((p + "/tasks").c_str(), O_WRONLY | O_CLOEXEC));
        if (!tasks) throw_errno("open " + p + "/tasks");
        cg.v1_join_.push_back(std::move(tasks));
      }
    }
  } catch (...) {
    kill_and_remove_cgroups(cg.paths_);
    cg.paths_ = {};
    throw;
  }
  return cg;
}

void SandboxCgroup::apply_limits(const Limits& limits) {
  const CgroupSystem& sys = *sys_;
  auto quota = static_cast<uint64_t>(std::llround(limits.cpus * 100000));
  if (sys.unified) {
    // On cgroup v2 a limit file exists only where its controller is enabled: say which one is missing.
    const std::string parent = sys.v2_root + "/" + kParent;
    auto write_limit = [&](const char* file, const std::string& value, const char* field, const char* controller) {
      try {
        write_existing_at(v2_fd_.get(), file, value);
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
      write_limit("memory.swap.max", "0", "limits.memory", "memory");
    }
    if (limits.pids) write_limit("pids.max", std::to_string(limits.pids), "limits.pids", "pids");
    if (limits.cpus > 0) write_limit("cpu.max", std::to_string(quota) + " 100000", "limits.cpus", "cpu");
    return;
  }
  auto v1 = [&](const std::string& root) {
    return root.empty() ? std::string() : root + "/" + kParent + "/" + id_;
  };
  if (limits.memory) {
    if (sys.memory_v1.empty()) throw Error(Code::kUnimplemented, "limits.memory: no memory cgroup controller on this host");
    write_existing(v1(sys.memory_v1) + "/memory.limit_in_bytes", std::to_string(limits.memory));
  }
  if (limits.pids) {
    if (sys.pids_v1.empty()) throw Error(Code::kUnimplemented, "limits.pids: no pids cgroup controller on this host");
    write_existing(v1(sys.pids_v1) + "/pids.max", std::to_string(limits.pids));
  }
  if (limits.cpus > 0) {
    if (sys.cpu_v1.empty()) throw Error(Code::kUnimplemented, "limits.cpus: no cpu cgroup controller on this host");
    std::string cpu = v1(sys.cpu_v1);
    write_existing(cpu + "/cpu.cfs_period_us", "100000");
    write_existing(cpu + "/cpu.cfs_quota_us", std::to_string(quota));
  }
}

SandboxCgroup::~SandboxCgroup() {
  if (!released_ && !paths_.v2.empty()) {
    v2_fd_.reset();
    kill_and_remove_cgroups(paths_);
  }
}

std::vector<int> SandboxCgroup::v1_join_fds() const {
  std::vector<int> fds;
  for (const auto& fd : v1_join_) fds.push_back(fd.get());
  return fds;
}

bool kill_and_remove_cgroups(const CgroupPaths& paths) {
  bool ok = true;
  if (!paths.v2.empty() && exists(paths.v2)) {
    try {
      write_existing(paths.v2 + "/cgroup.kill", "1");
    } catch (const Error&) {
      // Kernel without cgroup.kill or group already gone: removal below still reports the truth.
    }
    ok = rmdir_cgroup_tree(paths.v2) && ok;
  }
  for (const auto& p : paths.v1) ok = rmdir_cgroup_tree(p) && ok;
  return ok;
}

}  // namespace sandlet::sys
