// Per-sandbox cgroups on pure cgroup v2 and on the hybrid layout (v1 controllers + a controller-less
// cgroup2 tree). The cgroup2 directory is always used for CLONE_INTO_CGROUP, cgroup.kill and per-exec
// child groups; resource limits go to v2 controllers when present, else to the v1 hierarchies.
#pragma once
#include <sys/types.h>

#include <string>
#include <utility>
#include <vector>

#include "sys/fd.hpp"

namespace sandlet::sys {

struct CgroupSystem {
  bool unified = false;                 // pure v2 with controllers
  std::string v2_root;                  // mount point of the cgroup2 tree
  std::string memory_v1, pids_v1, cpu_v1;  // hybrid only: mount points of those v1 controllers

  // Probes /sys/fs/cgroup. Throws UNIMPLEMENTED when no cgroup2 tree exists.
  static CgroupSystem detect();
  // Creates the "sandlet" parent groups and enables controllers in them (idempotent).
  void prepare() const;
  // Removes the parent groups if no sandbox group is left in them. Called by an explicit gc only: they
  // outlive runtimes (a create that finds them gone prepares them again).
  void release() const;
  std::string describe() const;
  // The directory of sandbox `id`'s group under our parent in `hierarchy` (a mount point above; "" for
  // an absent hierarchy gives "").
  static std::string group_path(const std::string& hierarchy, const std::string& id);
  // mkdir of a sandbox group; re-creates the parent groups if another runtime released them meanwhile.
  void make_group(const std::string& path) const;
};

// The groups a sandbox `id` may have on this host (whether or not they exist): lets gc clean up after
// a crash that happened between creating the groups and recording them.
struct CgroupPaths;
CgroupPaths cgroup_paths_for(const CgroupSystem& sys, const std::string& id);

// Where one sandbox's groups live; persisted in the sandbox record so that any process can clean up.
struct CgroupPaths {
  std::string v2;               // cgroup2 directory
  std::vector<std::string> v1;  // v1 directories (hybrid only)
};

// Kills every process in the groups and removes them (nested groups first). Missing groups are fine.
// Returns false if a group could not be removed (still busy after the retry budget).
bool kill_and_remove_cgroups(const CgroupPaths& paths);

}  // namespace sandlet::sys
