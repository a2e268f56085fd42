#include "sys/spawn_init.hpp"

#include <fcntl.h>
#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

#include "common/error.hpp"
#include "sys/fs_util.hpp"

namespace sandlet::sys {
namespace {

constexpr uint64_t kNamespaces = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS |
                                 CLONE_NEWCGROUP;

// Raw syscalls only from here on in the child: no allocation, no locks, no errno-based logic that could
// race with the parent's threads (each child has its own copy of memory, but glibc locks may be held).
[[noreturn]] void child_main(const InitSpawnParams& p, int go_read, int go_write) {
  // Our copy of the write end must go, or a parent that dies before "go" would leave us waiting forever.
  ::close(go_write);
  // Own session: job-control signals to the creator's process group (Ctrl-C) must not reach the sandbox.
  ::syscall(SYS_setsid);
  char go = 0;
  ssize_t n;
  do n = ::read(go_read, &go, 1); while (n < 0 && errno == EINTR);
  if (n != 1) ::_exit(120);
  // Raw system calls, not glibc's setresuid() & co: in a child of a multi-threaded parent those try to
  // synchronise the credentials of threads that no longer exist here, and wait for them forever.
  if (::syscall(SYS_setresgid, 0, 0, 0) < 0 || ::syscall(SYS_setgroups, 0, nullptr) < 0 ||
      ::syscall(SYS_setresuid, 0, 0, 0) < 0)
    ::_exit(121);
  // After the id switch: changing credentials clears the parent-death signal.
  if (p.die_with_parent) ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  int null = ::open("/dev/null", O_RDWR);
  if (null < 0) ::_exit(122);
  // Park the two fds we keep above any target number, then place them: setup socket at 3, binary at 4.
  int setup = ::fcntl(p.setup_fd, F_DUPFD, 100);
  int exe = ::fcntl(p.exec_fd, F_DUPFD, 100);
  if (setup < 0 || exe < 0) ::_exit(123);
  if (::dup2(null, 0) < 0 || ::dup2(null, 1) < 0 || ::dup2(null, 2) < 0) ::_exit(124);
  if (::dup2(setup, 3) < 0 || ::dup2(exe, 4) < 0) ::_exit(125);
  ::fcntl(4, F_SETFD, FD_CLOEXEC);
  ::syscall(SYS_close_range, 5, ~0U, 0);
  char arg0[] = "sandlet-init";
  char* argv[] = {arg0, nullptr};
  char* envp[] = {nullptr};
  ::syscall(SYS_execveat, 4, "", argv, envp, AT_EMPTY_PATH);
  ::_exit(126);
}

}  // namespace

PausedInit PausedInit::spawn(const InitSpawnParams& params) {
  int go[2];
  if (::pipe2(go, O_CLOEXEC) < 0) throw_errno("pipe for init start");
  UniqueFd go_read(go[0]), go_write(go[1]);

  int pidfd = -1;
  struct clone_args args = {};
  args.flags = kNamespaces | CLONE_PIDFD | CLONE_INTO_CGROUP | (params.new_netns ? CLONE_NEWNET : 0);
  args.pidfd = reinterpret_cast<uint64_t>(&pidfd);
  args.exit_signal = 0;  // no SIGCHLD into the host application; we reap through the pidfd (__WALL)
  args.cgroup = static_cast<uint64_t>(params.cgroup_fd);
  long pid = ::syscall(SYS_clone3, &args, sizeof args);
  if (pid < 0) throw_errno("clone3 sandbox init (namespaces + CLONE_INTO_CGROUP)");
  if (pid == 0) child_main(params, go_read.get(), go_write.get());

  PausedInit init;
  init.pid_ = static_cast<pid_t>(pid);
  init.pidfd_.reset(pidfd);
  init.go_fd_ = std::move(go_write);
  return init;
}

PausedInit::~PausedInit() {
  if (released_ || pid_ <= 0) return;
  ::syscall(SYS_pidfd_send_signal, pidfd_.get(), SIGKILL, nullptr, 0);
  siginfo_t info;
  while (::waitid(P_PIDFD, static_cast<id_t>(pidfd_.get()), &info, WEXITED | __WALL) < 0 && errno == EINTR) {
  }
}

void PausedInit::map_ids(uid_t base, uint32_t count) const {
  char path[64];
  std::string map = "0 " + std::to_string(base) + " " + std::to_string(count) + "\n";
  std::snprintf(path, sizeof path, "/proc/%d/uid_map", pid_);
  write_existing(path, map);
  std::snprintf(path, sizeof path, "/proc/%d/gid_map", pid_);
  write_existing(path, map);
}

void PausedInit::resume() {
  char go = 1;
  if (::write(go_fd_.get(), &go, 1) != 1) throw_errno("start sandbox init");
  go_fd_.reset();
}

UniqueFd PausedInit::release() {
  released_ = true;
  return std::move(pidfd_);
}

}  // namespace sandlet::sys
