// Host-side process and /proc helpers: spawning peers, walking process trees, reading memory figures.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <functional>
#include <set>
#include <string>
#include <vector>

namespace bench {

// A command line prepared once, spawned many times without allocating.
class Command final {
 public:
  explicit Command(std::vector<std::string> args);
  // posix_spawn with stdin and stdout on /dev/null, stderr inherited (diagnostics stay visible).
  pid_t spawn() const;
  // spawn + wait; throws BenchError unless it exits 0. Returns the wall time in ns.
  std::uint64_t run_ok() const;
  std::string str() const;  // for reports, shell-like
  const std::vector<std::string> &args() const { return args_; }

 private:
  std::vector<std::string> args_;
  std::vector<char *> argv_;
};

// Waits for our child `pid` (retrying on EINTR) and returns its wait status. Throws if it is not our
// child any more (someone else reaped it: a waitpid(-1) elsewhere in the process would do that).
int wait_child(pid_t pid);
std::string describe_status(int status);

// Every live descendant of `pid` (not `pid` itself), via /proc/PID/task/*/children.
std::vector<pid_t> descendants(pid_t pid);
// SIGKILLs pid and all its descendants, then reaps pid (our child). Never throws.
void kill_tree(pid_t pid) noexcept;

std::string proc_comm(pid_t pid);              // "" if gone
std::uint64_t proc_pss_kib(pid_t pid);         // Pss from smaps_rollup, 0 if gone/unreadable

// /proc/meminfo in kB, e.g. ["MemAvailable"].
std::map<std::string, std::uint64_t> meminfo();

// Cgroup directories (all hierarchies under /sys/fs/cgroup) whose name contains one of `ids`.
// Cgroup directories (anywhere under /sys/fs/cgroup) whose name matches; not descending below a match.
std::vector<std::string> cgroup_dirs_where(const std::function<bool(const std::string &name)> &match);
std::vector<std::string> cgroups_matching(const std::set<std::string> &ids);
// Pids listed in cgroup.procs of those directories and their subdirectories.
std::set<pid_t> cgroup_pids(const std::vector<std::string> &dirs);

// Mount points in /proc/self/mountinfo at or under `path`.
std::vector<std::string> mounts_under(const std::string &path);

// Output of a short command (for versions); "" on failure.
std::string capture_output(const std::string &shell_command);

}  // namespace bench
