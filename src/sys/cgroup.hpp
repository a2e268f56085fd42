// Per-sandbox cgroups on pure cgroup v2 and on the hybrid layout (v1 controllers + a controller-less
// cgroup2 tree). The cgroup2 directory is always used for CLONE_INTO_CGROUP, cgroup.kill and per-exec
// child groups; resource limits go to v2 controllers when present, else to the v1 hierarchies.
#pragma once
#include <sys/types.h>

#include <string>
#include <utility>
#include <vector>

#include "spec/spec.hpp"
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

class SandboxCgroup final {
 public:
  // Creates the groups for sandbox `id` (no limits yet) and delegates the v2 directory to `owner_uid`
  // (the sandbox's root) so the agent can create per-exec child groups. On failure nothing remains.
  // `known` (may be null): the limits apply_limits will get, when known now (a create that is not
  // pooled). On the hybrid layout a v1 group is then made only for a controller they set: each costs a
  // mkdir and an rmdir of tens of microseconds, and nothing but a limit uses them.
  static SandboxCgroup create(const CgroupSystem& sys, const std::string& id, uid_t owner_uid,
                              const Limits* known = nullptr);
  // Applies the limits (to the v2 controllers, or to the v1 groups made at create).
  void apply_limits(const Limits& limits);
  SandboxCgroup(SandboxCgroup&& o) noexcept
      : sys_(o.sys_), id_(std::move(o.id_)), paths_(std::move(o.paths_)), v2_fd_(std::move(o.v2_fd_)),
        v1_join_(std::move(o.v1_join_)), released_(std::exchange(o.released_, true)) {}
  SandboxCgroup& operator=(SandboxCgroup&&) = delete;
  ~SandboxCgroup();

  int v2_fd() const { return v2_fd_.get(); }
  const CgroupPaths& paths() const { return paths_; }
  // v1 membership is not set by CLONE_INTO_CGROUP: these `tasks` files (open for writing) are for the
  // sandbox's first process to join by itself (see InitSpawnParams::join_v1_fds). Empty on pure v2.
  std::vector<int> v1_join_fds() const;
  // Once that process has joined (or died): the files are no longer needed.
  void close_v1_join_fds() { v1_join_.clear(); }
  // Keep the groups when this object goes away (the sandbox was created).
  void release() { released_ = true; }

 private:
  SandboxCgroup() = default;
  const CgroupSystem* sys_ = nullptr;
  std::string id_;
  CgroupPaths paths_;
  UniqueFd v2_fd_;
  std::vector<UniqueFd> v1_join_;
  bool released_ = false;
};

// Kills every process in the groups and removes them (nested groups first). Missing groups are fine.
// Returns false if a group could not be removed (still busy after the retry budget).
bool kill_and_remove_cgroups(const CgroupPaths& paths);

}  // namespace sandlet::sys
