// Process creation for execs: a vfork-style clone (CLONE_VM|CLONE_VFORK) straight into the exec's cgroup
// (clone3 CLONE_INTO_CGROUP), so the spawn path copies no page tables and never writes cgroup.procs
// (that takes a global rwsem in write mode). The child only makes syscalls with data the parent prepared
// and reports a failure through shared memory before the parent resumes.
#pragma once
#include <sys/resource.h>
#include <sys/types.h>

#include <cstddef>

namespace sandlet::guest {

struct SpawnSpec {
  const char* const* argv = nullptr;   // NULL-terminated; argv[0] is searched in `path` unless it has a '/'
  const char* const* envp = nullptr;   // NULL-terminated, complete environment
  const char* path = nullptr;          // PATH value used for the search
  const char* cwd = nullptr;           // chdir target (after switching user), or nullptr
  uid_t uid = 0;
  gid_t gid = 0;
  const gid_t* groups = nullptr;
  size_t ngroups = 0;
  int stdin_fd = -1;   // -1: keep the agent's own fd (0, 1, 2: the sandbox's /dev/null)
  int stdout_fd = -1;
  int stderr_fd = -1;
  bool controlling_tty = false;  // stdin is a terminal the child's new session takes as its controlling one
  int cgroup_fd = -1;  // cgroup2 directory to start the child in, or -1
  const struct rlimit* nofile = nullptr;  // RLIMIT_NOFILE to restore in the child, or nullptr
  int exec_fd = -1;     // >= 0: execveat() this descriptor instead of searching argv[0] (toolkit execs)
  int program_fd = -1;  // >= 0 (with exec_fd): given to the command as fd 3 (what a loader opens)
};

enum class SpawnStep : int { kNone = 0, kClone, kCgroup, kSetsid, kCaps, kGroups, kSetgid, kSetuid, kChdir, kStdio, kExec };

struct SpawnError {
  SpawnStep step = SpawnStep::kNone;
  int err = 0;
  size_t exec_path_len = 0;  // kExec: the length of the path the failing execve was given
};

// Returns the child's pid, or -1 with *error filled. A child that failed after clone is left as a
// zombie for the SIGCHLD reaper.
pid_t spawn_process(const SpawnSpec& spec, SpawnError* error);

const char* spawn_step_name(SpawnStep step);

}  // namespace sandlet::guest
