#include "guest/vm/guest_pid1.hpp"

#include <errno.h>
#include <fcntl.h>
#include <linux/reboot.h>
#include <sched.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include "guest/status.hpp"
#include "guest/vm/guest_boot.hpp"
#include "guest/vm/stream_mux.hpp"

namespace sandlet::guest::vm {

namespace {

[[noreturn]] void power_off() {
  syscall(SYS_sync);
  syscall(SYS_reboot, LINUX_REBOOT_MAGIC1, LINUX_REBOOT_MAGIC2, LINUX_REBOOT_CMD_POWER_OFF, 0);
  for (;;) pause();  // PID 1 must not return
}

[[noreturn]] void fail(const Status& s) {
  log_line("sandlet guest start-up failed: %s", s.message.c_str());
  power_off();
}

std::string read_line(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  char buf[256];
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return "";
  std::string s(buf, static_cast<size_t>(n));
  while (!s.empty() && s.back() == '\n') s.pop_back();
  return s;
}

// /dev/vportNpM of the port named kPortName (no udev here to make the by-name link; N is the virtio
// device's index among all virtio devices, so the directory is listed).
int open_port() {
  for (int tries = 0; tries < 3000; ++tries) {
    int dir = open("/sys/class/virtio-ports", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    char buf[4096];
    long n = dir >= 0 ? syscall(SYS_getdents64, dir, buf, sizeof buf) : -1;
    if (dir >= 0) close(dir);
    for (long off = 0; off < n;) {
      struct Entry {
        uint64_t ino;
        int64_t off;
        unsigned short reclen;
        unsigned char type;
        char name[];
      };
      const Entry* e = reinterpret_cast<const Entry*>(buf + off);
      off += e->reclen;
      if (std::strncmp(e->name, "vport", 5) != 0) continue;
      const std::string name = e->name;
      if (read_line("/sys/class/virtio-ports/" + name + "/name") != kPortName) continue;
      int fd = open(("/dev/" + name).c_str(), O_RDWR | O_NONBLOCK | O_CLOEXEC);
      if (fd >= 0) return fd;
    }
    struct timespec ts = {0, 1000 * 1000};
    syscall(SYS_nanosleep, &ts, nullptr);
  }
  return -1;
}

// A new stream: one end for the mux, the other sent to the agent with the port byte.
int hand_to_agent(void* ctx, uint8_t port) {
  const int ctl = *static_cast<int*>(ctx);
  int sv[2];
  if (syscall(SYS_socketpair, AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return -1;
  char cbuf[CMSG_SPACE(sizeof(int))] = {};
  struct iovec iov = {&port, 1};
  struct msghdr msg = {};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = cbuf;
  msg.msg_controllen = sizeof cbuf;
  struct cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(c), &sv[1], sizeof(int));
  long r = syscall(SYS_sendmsg, ctl, &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
  close(sv[1]);
  if (r != 1) {
    close(sv[0]);
    return -1;
  }
  fcntl(sv[0], F_SETFL, O_NONBLOCK);
  return sv[0];
}

}  // namespace

void run_pid1() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGCHLD);
  sigprocmask(SIG_BLOCK, &set, nullptr);
  signal(SIGPIPE, SIG_IGN);

  if (Status s = mount_kernel_filesystems(); !s.ok()) fail(s);
  if (Status s = load_modules(); !s.ok()) fail(s);
  if (Status s = mount_root(static_cast<int>(cmdline_number("sandlet.layers", 0))); !s.ok()) fail(s);
  // The benchmark's plain-QEMU peer (bench/scenarios_microvm.cpp) boots the same kernel, initramfs and
  // disks to this point and stops here: 1 = power off, 2 = stay idle.
  if (const long marker = cmdline_number("sandlet.marker", 0)) {
    const char line[] = "SANDLET-MARKER\n";
    (void)!write(2, line, sizeof line - 1);
    if (marker == 1) power_off();
    for (;;) pause();
  }
  const int port = open_port();
  if (port < 0) fail(make_status(SANDLET_INTERNAL, ENODEV, "no virtio-serial port named sandlet.0"));

  int ctl[2];
  if (syscall(SYS_socketpair, AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, ctl) != 0)
    fail(errno_status(errno, "socketpair"));
  const pid_t server = static_cast<pid_t>(syscall(SYS_clone, SIGCHLD | CLONE_NEWPID | CLONE_NEWNS, 0, 0, 0, 0));
  if (server < 0) fail(errno_status(errno, "start the agent"));
  if (server == 0) {
    close(port);
    close(ctl[0]);
    // The agent takes SIGCHLD, SIGTERM and SIGINT through its signalfd (as a container's init does).
    sigset_t agent;
    sigemptyset(&agent);
    sigaddset(&agent, SIGCHLD);
    sigaddset(&agent, SIGTERM);
    sigaddset(&agent, SIGINT);
    sigprocmask(SIG_SETMASK, &agent, nullptr);
    run_server(ctl[1]);
  }
  close(ctl[1]);

  const int sigfd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
  if (sigfd < 0) fail(errno_status(errno, "signalfd"));
  StreamMux mux(port, false, &hand_to_agent, &ctl[0]);
  std::vector<pollfd> fds;
  for (;;) {
    fds.clear();
    fds.push_back({sigfd, POLLIN, 0});
    if (!mux.poll_once(fds, 1, -1)) fail(make_status(SANDLET_INTERNAL, EIO, "the channel to the host failed"));
    if (!(fds[0].revents & POLLIN)) continue;
    struct signalfd_siginfo si;
    while (read(sigfd, &si, sizeof si) > 0) {}
    for (;;) {
      int status = 0;
      pid_t pid = waitpid(-1, &status, WNOHANG);
      if (pid <= 0) break;
      if (pid == server) power_off();  // the agent ended the sandbox (lifetime, idle, or a failure)
    }
  }
}

}  // namespace sandlet::guest::vm
