// Per-exec cgroups under the sandbox's delegated cgroup2 directory: each exec starts in its own child
// group x<N> so that "kill the command" kills every descendant (cgroup.kill), including daemonized ones.
//
// Groups are pooled to keep mkdir/rmdir off the exec path, but only groups that were never killed:
// the kernel (verified on 6.18) SIGKILLs any child created with CLONE_INTO_CGROUP into a group whose
// cgroup.kill was ever written (the fork path compares the kill sequence of the parent's group with the
// target's). So a group is killed only when something is still running in it, and a killed group is
// removed instead of reused.
#pragma once
#include <sys/types.h>

#include <cstdint>
#include <vector>

#include "guest/status.hpp"

namespace sandlet::guest {

struct CgroupSlot {
  int dirfd = -1;     // O_DIRECTORY fd of x<N> (the CLONE_INTO_CGROUP target)
  int eventsfd = -1;  // x<N>/cgroup.events, kept open: read at every exec end
  uint32_t id = 0;
  bool killed = false;  // cgroup.kill was written: never reuse (see above)
  bool valid() const { return dirfd >= 0; }
};

class ExecCgroups final {
 public:
  explicit ExecCgroups(int sandbox_dirfd) : root_(sandbox_dirfd) {}
  bool enabled() const { return root_ >= 0; }

  Status acquire(CgroupSlot* out);
  // Takes back a slot after its exec ended; pooled when clean, removed (now or later) when killed.
  void release(CgroupSlot* slot);

  // True when some process of the group is still alive (cgroup.events "populated 1").
  static bool populated(const CgroupSlot& slot);
  // SIGKILLs every process in the group (cgroup.kill). Returns false when the kernel refused
  // (e.g. no cgroup.kill before Linux 5.14): the caller falls back to the process group.
  static bool kill_all(CgroupSlot* slot);
  // Delivers sig to every process listed in cgroup.procs.
  static Status signal_all(const CgroupSlot& slot, int sig);

 private:
  static constexpr size_t kMaxIdle = 16;
  void close_slot(CgroupSlot* slot);
  void retry_removals();

  int root_;
  uint32_t next_id_ = 0;
  std::vector<CgroupSlot> idle_;
  std::vector<uint32_t> doomed_;  // killed groups whose dying processes kept rmdir busy
};

}  // namespace sandlet::guest
