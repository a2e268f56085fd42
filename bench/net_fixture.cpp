#include "net_fixture.hpp"

#include "common.hpp"
#include "proc.hpp"

#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>

namespace bench {
namespace {

// In a child only: leaves with a distinct status on failure (the parent reports it).
void child_setup(int exit_code_on_failure) {
  if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || ::unshare(CLONE_NEWNET) != 0) ::_exit(exit_code_on_failure);
}

// Echoes whatever arrives on each connection until `quit_fd` is readable or closed.
[[noreturn]] void serve_echo(int quit_fd, int ready_fd) {
  const int lis = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  const int one = 1;
  ::setsockopt(lis, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(kEchoPort);
  if (lis < 0 || ::bind(lis, reinterpret_cast<sockaddr *>(&a), sizeof a) != 0 || ::listen(lis, 1024) != 0) ::_exit(11);
  const int ep = ::epoll_create1(EPOLL_CLOEXEC);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = lis;
  ::epoll_ctl(ep, EPOLL_CTL_ADD, lis, &ev);
  ev.data.fd = quit_fd;
  ::epoll_ctl(ep, EPOLL_CTL_ADD, quit_fd, &ev);
  const char r = 'r';
  if (::write(ready_fd, &r, 1) != 1) ::_exit(12);
  ::close(ready_fd);
  epoll_event events[64];
  char buf[16384];
  for (;;) {
    const int n = ::epoll_wait(ep, events, 64, -1);
    for (int i = 0; i < n; ++i) {
      const int fd = events[i].data.fd;
      if (fd == quit_fd) ::_exit(0);
      if (fd == lis) {
        for (int c; (c = ::accept4(lis, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0;) {
          ::setsockopt(c, IPPROTO_TCP, 1 /* TCP_NODELAY */, &one, sizeof one);
          epoll_event cev{};
          cev.events = EPOLLIN;
          cev.data.fd = c;
          ::epoll_ctl(ep, EPOLL_CTL_ADD, c, &cev);
        }
        continue;
      }
      const ssize_t got = ::read(fd, buf, sizeof buf);
      if (got > 0) {
        if (::write(fd, buf, static_cast<size_t>(got)) == got) continue;
      } else if (got < 0 && errno == EAGAIN) {
        continue;
      }
      ::close(fd);  // also leaves the epoll set
    }
  }
}

void run_or_throw(const std::string &cmd) {
  const int rc = std::system((cmd + " >/dev/null 2>&1").c_str());
  if (rc != 0) throw BenchError("net fixture: `" + cmd + "` failed (status " + std::to_string(rc) + ")");
}

void await_ready(int fd, pid_t &pid, const char *what) {
  char c = 0;
  const bool ok = ::read(fd, &c, 1) == 1;
  ::close(fd);
  if (!ok) {
    int st = 0;
    ::waitpid(pid, &st, 0);
    pid = -1;
    throw BenchError(std::string("net fixture: the ") + what + " namespace's process " + describe_status(st) +
                     " before it was ready (needs root and `ip`)");
  }
}

}  // namespace

std::string in_netns_command(const std::string &netns, const std::string &args) {
  return "nsenter --net=" + netns + " unshare --user --map-root-user " + args;
}

FakeInternet::FakeInternet(bool with_veth) {
  int quit[2], ready[2];
  if (::pipe2(quit, O_CLOEXEC) != 0 || ::pipe2(ready, O_CLOEXEC) != 0) throw BenchError("net fixture: pipe2 failed");
  quit_fd_ = quit[1];
  internet_ = ::fork();
  if (internet_ < 0) throw BenchError("net fixture: fork failed");
  if (internet_ == 0) {
    ::close(quit[1]);
    ::close(ready[0]);
    child_setup(10);
    if (std::system("ip link set lo up && ip addr add 198.18.0.1/32 dev lo") != 0) ::_exit(13);
    serve_echo(quit[0], ready[1]);
  }
  ::close(ready[1]);
  try {
    await_ready(ready[0], internet_, "internet");
    if (with_veth) start_veth(quit[0]);
  } catch (...) {
    ::close(quit[0]);
    stop();
    throw;
  }
  ::close(quit[0]);
}

void FakeInternet::start_veth(int quit_read) {
  int ready[2];
  {
    if (::pipe2(ready, O_CLOEXEC) != 0) throw BenchError("net fixture: pipe2 failed");
    veth_ = ::fork();
    if (veth_ < 0) throw BenchError("net fixture: fork failed");
    if (veth_ == 0) {
      ::close(quit_fd_);
      ::close(ready[0]);
      child_setup(10);
      const char r = 'r';
      if (::write(ready[1], &r, 1) != 1) ::_exit(12);
      char c;
      while (::read(quit_read, &c, 1) < 0 && errno == EINTR) {
      }
      ::_exit(0);
    }
    ::close(ready[1]);
  }
  await_ready(ready[0], veth_, "veth");
  const std::string in_i = "nsenter --net=" + internet_netns() + " ";
  const std::string in_v = "nsenter --net=" + veth_netns() + " ";
  run_or_throw(in_i + "ip link add sbench-i type veth peer name sbench-v netns " + std::to_string(veth_));
  run_or_throw(in_i + "ip addr add 10.199.0.1/30 dev sbench-i");
  run_or_throw(in_i + "ip link set sbench-i up");
  run_or_throw(in_v + "ip link set lo up");
  run_or_throw(in_v + "ip addr add 10.199.0.2/30 dev sbench-v");
  run_or_throw(in_v + "ip link set sbench-v up");
  run_or_throw(in_v + "ip route add 198.18.0.0/24 via 10.199.0.1");
}

FakeInternet::~FakeInternet() { stop(); }

void FakeInternet::stop() noexcept {
  if (quit_fd_ >= 0) ::close(quit_fd_);
  quit_fd_ = -1;
  for (pid_t *p : {&internet_, &veth_}) {
    if (*p <= 0) continue;
    ::kill(*p, SIGKILL);  // the echo server may be mid-loop; nothing of it needs an orderly end
    int st;
    while (::waitpid(*p, &st, 0) < 0 && errno == EINTR) {
    }
    *p = -1;
  }
}

}  // namespace bench
