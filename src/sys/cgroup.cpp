#include "sys/cgroup.hpp"

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

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

void CgroupSystem::make_group(const std::string& path) const {
  for (int attempt = 0;; ++attempt) {
    if (::mkdir(path.c_str(), 0755) == 0) return;
    if (errno != ENOENT || attempt == 3) throw_errno("mkdir cgroup " + path);
    prepare();
  }
}

std::string CgroupSystem::group_path(const std::string& hierarchy, const std::string& id) {
  return hierarchy.empty() ? std::string() : hierarchy + "/" + kParent + "/" + id;
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
