// A sandbox's own cgroups, set up for the container backend: the cgroup2 directory the init is cloned
// into (delegated to the sandbox's root, which makes per-exec child groups), and on hybrid hosts the v1
// groups its limits need, joined by the init itself.
#pragma once
#include <sys/types.h>

#include <string>
#include <utility>
#include <vector>

#include "spec/spec.hpp"
#include "sys/cgroup.hpp"
#include "sys/fd.hpp"

namespace sandlet::host {

// A running sandbox's limits changed in place (BackendSandbox::set_limits): what `limits` sets is written,
// what it leaves 0 goes back to unlimited. On a hybrid host a limit needs the v1 group its create made
// (a pooled sandbox has them all; a cold create only those its spec limited): UNIMPLEMENTED otherwise.
// A value the kernel refuses (e.g. memory below what is in use) is INVALID_ARGUMENT naming the field.
void set_running_limits(const sys::CgroupSystem& sys, const sys::CgroupPaths& paths, const Limits& limits);

class SandboxCgroup final {
 public:
  // Creates the groups for sandbox `id` (no limits yet) and delegates the v2 directory to `owner_uid`
  // (the sandbox's root) so the agent can create per-exec child groups. On failure nothing remains.
  // `known` (may be null): the limits apply_limits will get, when known now (a create that is not
  // pooled). On the hybrid layout a v1 group is then made only for a controller they set: each costs a
  // mkdir and an rmdir of tens of microseconds, and nothing but a limit uses them.
  static SandboxCgroup create(const sys::CgroupSystem& sys, const std::string& id, uid_t owner_uid,
                              const Limits* known = nullptr);
  // How far below its own group a sandbox may nest cgroups, and how many it may have there.
  static constexpr int kMaxDepth = 8;
  static constexpr int kMaxDescendants = 4096;
  // Applies the limits (to the v2 controllers, or to the v1 groups made at create).
  void apply_limits(const Limits& limits);
  // Makes the sandbox best-effort (`batch`; latency-sensitive is the default and needs nothing): its init,
  // and so everything it starts, under SCHED_IDLE, and the lowest CPU weight for its group where the cpu
  // controller is there (v2 cpu.idle, v1 cpu.shares; on v1 the cpu group is made now if the create did
  // not, and the init moved into it). Before anything of the sandbox runs but the waiting init.
  void apply_cpu_class(bool batch, pid_t init_pid);
  SandboxCgroup(SandboxCgroup&& o) noexcept
      : sys_(o.sys_), id_(std::move(o.id_)), paths_(std::move(o.paths_)), v2_fd_(std::move(o.v2_fd_)),
        v1_join_(std::move(o.v1_join_)), released_(std::exchange(o.released_, true)) {}
  SandboxCgroup& operator=(SandboxCgroup&&) = delete;
  ~SandboxCgroup();

  int v2_fd() const { return v2_fd_.get(); }
  const sys::CgroupPaths& paths() const { return paths_; }
  // v1 membership is not set by CLONE_INTO_CGROUP: these `tasks` files (open for writing) are for the
  // sandbox's first process to join by itself (see InitSpawnParams::join_v1_fds). Empty on pure v2.
  std::vector<int> v1_join_fds() const;
  // Once that process has joined (or died): the files are no longer needed.
  void close_v1_join_fds() { v1_join_.clear(); }
  // Keep the groups when this object goes away (the sandbox was created).
  void release() { released_ = true; }

 private:
  SandboxCgroup() = default;
  const sys::CgroupSystem* sys_ = nullptr;
  std::string id_;
  sys::CgroupPaths paths_;
  sys::UniqueFd v2_fd_;
  std::vector<sys::UniqueFd> v1_join_;
  bool released_ = false;
};

}  // namespace sandlet::host
