// Starts a sandbox's init as the first process of a fresh set of namespaces, paused until the host has
// finished the steps that need its pid (uid/gid maps). The child runs no library code:
// between clone3 and execveat it only makes system calls (the host may be multi-threaded).
#pragma once
#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "sys/fd.hpp"

namespace sandlet::container {

using sys::UniqueFd;

struct InitSpawnParams {
  int exec_fd = -1;         // the init binary (a memfd), run with execveat(AT_EMPTY_PATH)
  int setup_fd = -1;        // becomes the init's fd 3
  int cgroup_fd = -1;       // cgroup2 directory for CLONE_INTO_CGROUP
  // v1 `tasks` files (hybrid hosts), opened for writing by the host: the child writes "0" to each to
  // join those groups itself. A process moving only its own thread is the one migration that does not
  // take the kernel's global threadgroup lock, which otherwise waits for an RCU grace period whenever no
  // other migration happened just before (docs/ARCHITECTURE.md, kernel facts).
  std::vector<int> join_v1_fds;
  bool die_with_parent = false;  // SIGKILL the init when the creating thread dies (owned sandboxes)
  bool new_netns = true;         // false: inherit the calling thread's network namespace (a pooled one)
};

class PausedInit final {
 public:
  struct ChildBlock;  // the child's arguments and stack (it shares our memory until it execs)

  static PausedInit spawn(const InitSpawnParams& params);
  PausedInit(PausedInit&& o) noexcept;
  PausedInit& operator=(PausedInit&&) = delete;
  // Kills and reaps the child unless release() was called.
  ~PausedInit();

  pid_t pid() const { return pid_; }
  int pidfd() const { return pidfd_.get(); }
  // Writes uid_map and gid_map: ids 0..count-1 inside map to base.. outside.
  void map_ids(uid_t base, uint32_t count) const;
  // Lets the child switch to root inside and exec the init.
  void resume();
  // Call once the init has answered (so it has exec'd): ownership of the process passes to the caller.
  UniqueFd release();

 private:
  PausedInit();
  pid_t pid_ = -1;
  UniqueFd pidfd_;
  UniqueFd go_fd_;
  std::unique_ptr<ChildBlock> block_;
  bool released_ = false;
};

}  // namespace sandlet::container
