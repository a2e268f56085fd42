#include "lazy/seqpacket.hpp"

#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>

#include "common/error.hpp"

namespace sandlet::lazy {
namespace {

sockaddr_un address(const std::string& path) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  if (path.size() >= sizeof a.sun_path) throw Error(Code::kInvalidArgument, "socket path too long: " + path);
  std::memcpy(a.sun_path, path.c_str(), path.size() + 1);
  return a;
}

}  // namespace

sys::UniqueFd seqpacket_listen(const std::string& path) {
  sys::UniqueFd fd(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd) throw_errno("socket(AF_UNIX, SOCK_SEQPACKET)");
  sockaddr_un a = address(path);
  ::unlink(path.c_str());
  mode_t old = ::umask(077);
  int rc = ::bind(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a);
  ::umask(old);
  if (rc != 0) throw_errno("bind " + path);
  if (::listen(fd.get(), 512) != 0) throw_errno("listen " + path);
  return fd;
}

sys::UniqueFd seqpacket_connect(const std::string& path) {
  sys::UniqueFd fd(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
  if (!fd) throw_errno("socket(AF_UNIX, SOCK_SEQPACKET)");
  sockaddr_un a = address(path);
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    int e = errno;
    throw Error(Code::kUnavailable, "connect " + path + ": " + std::strerror(e), e);
  }
  return fd;
}

void seqpacket_pair(sys::UniqueFd& a, sys::UniqueFd& b) {
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) throw_errno("socketpair(SOCK_SEQPACKET)");
  a.reset(sv[0]);
  b.reset(sv[1]);
}

std::string seqpacket_call(int fd, const std::string& request, size_t max_reply, int timeout_ms) {
  if (::send(fd, request.data(), request.size(), MSG_NOSIGNAL) < 0) throw_errno("send to the loader");
  pollfd p{fd, POLLIN, 0};
  int rc;
  do rc = ::poll(&p, 1, timeout_ms);
  while (rc < 0 && errno == EINTR);
  if (rc == 0) throw Error(Code::kDeadlineExceeded, "the loader did not answer within " + std::to_string(timeout_ms) + " ms");
  std::string reply(max_reply, '\0');
  ssize_t n = ::recv(fd, reply.data(), reply.size(), 0);
  if (n < 0) throw_errno("receive from the loader");
  if (n == 0) throw Error(Code::kUnavailable, "the loader closed the connection");
  reply.resize(static_cast<size_t>(n));
  return reply;
}

std::string seqpacket_recv(int fd, size_t max, std::vector<sys::UniqueFd>* fds, bool* eof) {
  std::string buf(max, '\0');
  iovec iov{buf.data(), buf.size()};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 8)];
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  *eof = false;
  ssize_t n = ::recvmsg(fd, &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
  if (n < 0) {
    if (errno == EAGAIN || errno == EINTR) return {};
    throw_errno("recvmsg");
  }
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count; ++i) {
      int f;
      std::memcpy(&f, CMSG_DATA(c) + i * sizeof(int), sizeof f);
      if (fds) fds->emplace_back(f);
      else ::close(f);
    }
  }
  if (n == 0) *eof = true;
  buf.resize(static_cast<size_t>(n));
  return buf;
}

}  // namespace sandlet::lazy
