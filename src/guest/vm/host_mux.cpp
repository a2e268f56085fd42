// The host side of a microVM's channel: one process per VM, started by the library in the VM's jail, that
// starts QEMU as its child and carries every connection to the sandbox's agent socket as a stream of the
// virtio-serial channel (stream_mux.hpp). A client's first byte names the port (proto::vmchan::Port).
// It also keeps the guest's console, capped, in a file (the guest writes it: hostile, unbounded).
// It exits when QEMU does; SIGTERM, or the end of the VM's lifetime, kills QEMU first.
//
// Descriptors on entry: 2 = the file for QEMU's diagnostics (copied there capped), 3 = the agent's listening socket, 4 = the QMP listening
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
#include <time.h>
#include <unistd.h>

#include <cstring>
#include <vector>

#include "guest/status.hpp"
#include "guest/vm/stream_mux.hpp"

namespace sandlet::guest::vm {

namespace {

constexpr int kListenFd = 3, kQmpFd = 4, kConsoleFd = 5, kLastPassedFd = 63;

pid_t start_qemu(char** argv, char** envp, int chan, int console, int diagnostics) {
  const pid_t parent = getpid();
  const pid_t pid = static_cast<pid_t>(syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0));
  if (pid != 0) return pid;
  // QEMU never outlives its multiplexer (checked after: the parent may have died before the call).
  if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0 || static_cast<pid_t>(syscall(SYS_getppid)) != parent) _exit(126);
  // Into place without clobbering: everything up high first.
  // 6 .. kLastPassedFd are the files QEMU opens as /dev/fd/N (kernel, initramfs, disks): they stay.
  int c = fcntl(chan, F_DUPFD, kLastPassedFd + 1), k = fcntl(console, F_DUPFD, kLastPassedFd + 1),
      q = fcntl(kQmpFd, F_DUPFD, kLastPassedFd + 1);
  if (c < 0 || k < 0 || q < 0 || dup2(c, 3) < 0 || dup2(k, 4) < 0 || dup2(q, 5) < 0 || dup2(diagnostics, 2) < 0) _exit(126);
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

// Copies what QEMU or the guest writes (hostile, unbounded) into a file, up to `max` bytes; the rest is read
// and dropped.
struct CappedLog {
  int in = -1, out = -1;
  unsigned long written = 0, max = 0;
  void pump() {
    char buf[4096];
    ssize_t n = read(in, buf, sizeof buf);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
      close(in);
      in = -1;  // poll() ignores a negative fd
      return;
    }
    if (n <= 0 || written >= max) return;
    size_t take = static_cast<size_t>(n);
    if (take > max - written) take = max - written;
    ssize_t w = write(out, buf, take);
    if (w > 0) written += static_cast<unsigned long>(w);
  }
};

}  // namespace

int host_mux_main(int argc, char** argv, char** envp) {
  // host-mux CONSOLE_MAX LIFETIME_MS -- QEMU ARGS...
  if (argc < 6 || std::strcmp(argv[4], "--") != 0) {
    log_line("usage: host-mux CONSOLE_MAX LIFETIME_MS -- QEMU ARGS...");
    return 2;
  }
  const auto number = [](const char* p) {
    unsigned long v = 0;
    for (; *p >= '0' && *p <= '9'; ++p) v = v * 10 + static_cast<unsigned long>(*p - '0');
    return v;
  };
  const unsigned long console_max = number(argv[2]);
  // The VM's lifetime as the host enforces it, whatever the guest does (0 = none): the agent inside ends
  // the VM at its own deadline; this is the backstop against a guest that stopped it.
  const unsigned long lifetime_ms = number(argv[3]);
  const auto now_ms = [] {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<unsigned long>(ts.tv_sec) * 1000ul + static_cast<unsigned long>(ts.tv_nsec / 1000000);
  };
  // Counted from the configuration (the host's first stream to the boot port), so that a VM booted ahead
  // for a warm pool gets its whole lifetime once it is handed out; until then the wait for it is bounded
  // by one lifetime too (a pooled VM whose runtime crashed does not stay).
  unsigned long deadline_ms = lifetime_ms ? now_ms() + lifetime_ms : 0;
  bool configured = false;
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
  int chan[2], con[2], diag[2];
  if (sigfd < 0 || syscall(SYS_socketpair, AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, chan) != 0 ||
      syscall(SYS_socketpair, AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, con) != 0 || pipe2(diag, O_CLOEXEC) != 0) {
    log_line("host-mux: set-up failed: errno %d", errno);
    return 1;
  }
  const pid_t qemu = start_qemu(argv + 5, envp, chan[1], con[1], diag[1]);
  if (qemu < 0) {
    log_line("host-mux: could not start QEMU: errno %d", errno);
    return 1;
  }
  close(chan[1]);
  close(con[1]);
  close(diag[1]);
  close(kQmpFd);
  if (first_own > kConsoleFd + 1) syscall(SYS_close_range, kConsoleFd + 1, first_own - 1, 0);  // QEMU's now
  fcntl(chan[0], F_SETFL, O_NONBLOCK);
  fcntl(con[0], F_SETFL, O_NONBLOCK);
  fcntl(diag[0], F_SETFL, O_NONBLOCK);
  fcntl(kListenFd, F_SETFL, O_NONBLOCK);

  StreamMux mux(chan[0], true, nullptr, nullptr);
  mux.hello();
  std::vector<Pending> pending;  // accepted, port byte not read yet
  CappedLog console{con[0], kConsoleFd, 0, console_max};
  CappedLog diagnostics{diag[0], 2, 0, console_max};
  bool accept_paused = false;
  std::vector<pollfd> fds;
  bool running = true;
  while (running) {
    fds.clear();
    fds.push_back({sigfd, POLLIN, 0});
    fds.push_back({accept_paused ? -1 : kListenFd, POLLIN, 0});
    fds.push_back({console.in, POLLIN, 0});
    fds.push_back({diagnostics.in, POLLIN, 0});
    const size_t polled_pending = pending.size();
    for (const Pending& p : pending) fds.push_back({p.fd, POLLIN, 0});
    const size_t extra = fds.size();
    // Out of descriptors: accepting waits a little instead of spinning on a readable listener.
    int timeout = accept_paused ? 100 : -1;
    if (deadline_ms) {
      const unsigned long now = now_ms();
      if (now >= deadline_ms) break;  // past the lifetime: QEMU is killed below
      const unsigned long left = deadline_ms - now;
      if (timeout < 0 || left < static_cast<unsigned long>(timeout)) timeout = left > 60000 ? 60000 : static_cast<int>(left);
    }
    if (!mux.poll_once(fds, extra, timeout)) break;  // QEMU closed the channel: it is going away
    accept_paused = false;
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
        if (fd < 0) {
          if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) accept_paused = true;
          break;
        }
        pending.push_back({fd});
      }
    }
    if (console.in >= 0 && (fds[2].revents & (POLLIN | POLLHUP))) console.pump();
    if (diagnostics.in >= 0 && (fds[3].revents & (POLLIN | POLLHUP))) diagnostics.pump();
    // Pending clients polled this round (those accepted just now wait for the next): the ones still
    // pending keep their place.
    std::vector<Pending> still;
    for (size_t i = 0; i < pending.size(); ++i) {
      if (i >= polled_pending) {
        still.push_back(pending[i]);
        continue;
      }
      const short re = fds[4 + i].revents;
      if (!re) {
        still.push_back(pending[i]);
        continue;
      }
      uint8_t port = 0;
      ssize_t n = read(pending[i].fd, &port, 1);
      if (n == 1 && port <= proto::vmchan::kBootPort) {
        if (port == proto::vmchan::kBootPort && !configured) {
          configured = true;
          if (lifetime_ms) deadline_ms = now_ms() + lifetime_ms;
        }
        mux.open(pending[i].fd, port);
      } else if (n < 0 && errno == EAGAIN) {
        still.push_back(pending[i]);
      } else {
        close(pending[i].fd);
      }
    }
    pending.swap(still);
  }
  kill(qemu, SIGKILL);
  int status;
  waitpid(qemu, &status, 0);
  return 0;
}

}  // namespace sandlet::guest::vm
