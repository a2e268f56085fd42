#include "sys/pidfd.hpp"

#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

#include "sys/fs_util.hpp"

namespace sandlet::sys {

UniqueFd open_pidfd_checked(pid_t pid, uint64_t start) noexcept {
  if (pid <= 0) return UniqueFd();
  UniqueFd fd(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
  if (!fd) return fd;
  // Checked after the open: if the start time still matches now, the descriptor names that process.
  try {
    if (process_start_time(pid) != std::optional<uint64_t>(start)) fd.reset();
  } catch (...) {
    fd.reset();
  }
  return fd;
}

bool pidfd_signal(int pidfd, int signo) noexcept {
  return pidfd >= 0 && ::syscall(SYS_pidfd_send_signal, pidfd, signo, nullptr, 0) == 0;
}

bool pidfd_wait_exit(int pidfd, int timeout_ms) noexcept {
  if (pidfd < 0) return true;
  pollfd p{pidfd, POLLIN, 0};
  for (;;) {
    int r = ::poll(&p, 1, timeout_ms);
    if (r < 0 && errno == EINTR) continue;
    return r > 0;
  }
}

bool pidfd_reap_if_exited(int pidfd) noexcept {
  siginfo_t info = {};
  int rc = ::waitid(P_PIDFD, static_cast<id_t>(pidfd), &info, WEXITED | WNOHANG | __WALL);
  if (rc < 0) return errno == ECHILD;  // reaped already (by another thread)
  return info.si_pid != 0;
}

}  // namespace sandlet::sys
