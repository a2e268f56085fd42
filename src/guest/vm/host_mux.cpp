// The host side of a microVM's channel: one process per VM, started by the library in the VM's jail, that
// starts QEMU as its child and carries every connection to the sandbox's agent socket as a stream of the
// virtio-serial channel (stream_mux.hpp). A client's first byte names the port (proto::vmchan::Port).
// It also keeps the guest's console, capped, in a file (the guest writes it: hostile, unbounded).
// It exits when QEMU does; SIGTERM kills QEMU first.
//
// Descriptors on entry: 2 = QEMU's diagnostics file, 3 = the agent's listening socket, 4 = the QMP listening
// socket (for QEMU), 5 = the console file. QEMU gets 3 = its end of the channel, 4 = the console's,
// 5 = the QMP listener, as its command line (backends/microvm/qemu_command.cpp) says, and keeps 6..63 (the
// files it opens as /dev/fd/N).
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <vector>

#include "guest/status.hpp"
#include "guest/vm/stream_mux.hpp"

namespace sandlet::guest::vm {

namespace {

constexpr int kListenFd = 3, kQmpFd = 4, kConsoleFd = 5, kLastPassedFd = 63;

pid_t start_qemu(char** argv, char** envp, int chan, int console) {
  const pid_t pid = static_cast<pid_t>(syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0));
  if (pid != 0) return pid;
  prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);  // QEMU never outlives its multiplexer
  // Into place without clobbering: everything up high first.
  // 6 .. kLastPassedFd are the files QEMU opens as /dev/fd/N (kernel, initramfs, disks): they stay.
  int c = fcntl(chan, F_DUPFD, kLastPassedFd + 1), k = fcntl(console, F_DUPFD, kLastPassedFd + 1),
      q = fcntl(kQmpFd, F_DUPFD, kLastPassedFd + 1);
  if (c < 0 || k < 0 || q < 0 || dup2(c, 3) < 0 || dup2(k, 4) < 0 || dup2(q, 5) < 0) _exit(126);
  syscall(SYS_close_range, kLastPassedFd + 1, ~0u, 0);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  execve(argv[0], argv, envp);
  log_line("exec %s: errno %d", argv[0], errno);
  _exit(127);
}

struct Pending {
  int fd;
};

}  // namespace

int host_mux_main(int argc, char** argv, char** envp) {
  // host-mux CONSOLE_MAX -- QEMU ARGS...
  if (argc < 5 || std::strcmp(argv[3], "--") != 0) {
    log_line("usage: host-mux CONSOLE_MAX -- QEMU ARGS...");
    return 2;
  }
  unsigned long console_max = 0;
  for (const char* p = argv[2]; *p >= '0' && *p <= '9'; ++p) console_max = console_max * 10 + static_cast<unsigned long>(*p - '0');
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGCHLD);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGHUP);
  sigprocmask(SIG_BLOCK, &set, nullptr);
  signal(SIGPIPE, SIG_IGN);
  // QEMU's files are 6 up to the first free descriptor: everything made from here on is above them.
  const int first_own = fcntl(0, F_DUPFD_CLOEXEC, kConsoleFd + 1);
  if (first_own >= 0) close(first_own);
  const int sigfd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
  int chan[2], con[2];
  if (sigfd < 0 || syscall(SYS_socketpair, AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, chan) != 0 ||
      syscall(SYS_socketpair, AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, con) != 0) {
    log_line("host-mux: set-up failed: errno %d", errno);
    return 1;
  }
  const pid_t qemu = start_qemu(argv + 4, envp, chan[1], con[1]);
  if (qemu < 0) {
    log_line("host-mux: could not start QEMU: errno %d", errno);
    return 1;
  }
  close(chan[1]);
  close(con[1]);
  close(kQmpFd);
  if (first_own > kConsoleFd + 1) syscall(SYS_close_range, kConsoleFd + 1, first_own - 1, 0);  // QEMU's now
  fcntl(chan[0], F_SETFL, O_NONBLOCK);
  fcntl(con[0], F_SETFL, O_NONBLOCK);
  fcntl(kListenFd, F_SETFL, O_NONBLOCK);

  StreamMux mux(chan[0], true, nullptr, nullptr);
  mux.hello();
  std::vector<Pending> pending;  // accepted, port byte not read yet
  unsigned long console_written = 0;
  int console_in = con[0];
  std::vector<pollfd> fds;
  bool running = true;
  while (running) {
    fds.clear();
    fds.push_back({sigfd, POLLIN, 0});
    fds.push_back({kListenFd, POLLIN, 0});
    fds.push_back({console_in, POLLIN, 0});
    for (const Pending& p : pending) fds.push_back({p.fd, POLLIN, 0});
    const size_t extra = fds.size();
    if (!mux.poll_once(fds, extra, -1)) break;  // QEMU closed the channel: it is going away
    if (fds[0].revents & POLLIN) {
      struct signalfd_siginfo si;
      while (read(sigfd, &si, sizeof si) > 0) {
        if (si.ssi_signo != SIGCHLD) {
          kill(qemu, SIGKILL);
        }
      }
      int status;
      if (waitpid(qemu, &status, WNOHANG) == qemu) running = false;
    }
    if (fds[1].revents & POLLIN) {
      for (;;) {
        int fd = accept4(kListenFd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) break;
        pending.push_back({fd});
      }
    }
    if (console_in >= 0 && (fds[2].revents & (POLLIN | POLLHUP))) {
      char buf[4096];
      ssize_t n = read(console_in, buf, sizeof buf);
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
        close(console_in);
        console_in = -1;  // poll() ignores a negative fd
      } else if (n > 0 && console_written < console_max) {
        size_t take = static_cast<size_t>(n);
        if (take > console_max - console_written) take = console_max - console_written;
        if (write(kConsoleFd, buf, take) > 0) console_written += take;
      }
    }
    // Pending clients are polled in this round's order: the ones still pending keep their place.
    std::vector<Pending> still;
    for (size_t i = 0; i < pending.size(); ++i) {
      const short re = fds[3 + i].revents;
      if (!re) {
        still.push_back(pending[i]);
        continue;
      }
      uint8_t port = 0;
      ssize_t n = read(pending[i].fd, &port, 1);
      if (n == 1 && port <= proto::vmchan::kBootPort) mux.open(pending[i].fd, port);
      else if (n < 0 && errno == EAGAIN) still.push_back(pending[i]);
      else close(pending[i].fd);
    }
    pending.swap(still);
  }
  kill(qemu, SIGKILL);
  int status;
  waitpid(qemu, &status, 0);
  return 0;
}

}  // namespace sandlet::guest::vm
