#include "sys/unix_socket.hpp"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>

#include "common/error.hpp"

namespace sandlet::sys {
namespace {

// Fills `addr` for `path`; when too long, opens its directory into `dir_holder` and uses /proc/self/fd.
socklen_t make_addr(const std::string& path, sockaddr_un& addr, UniqueFd& dir_holder) {
  std::memset(&addr, 0, sizeof addr);
  addr.sun_family = AF_UNIX;
  std::string target = path;
  if (path.size() >= sizeof addr.sun_path) {
    size_t slash = path.rfind('/');
    std::string dir = path.substr(0, slash), name = path.substr(slash + 1);
    dir_holder.reset(::open(dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    if (!dir_holder) throw_errno("open socket directory " + dir);
    target = "/proc/self/fd/" + std::to_string(dir_holder.get()) + "/" + name;
    if (target.size() >= sizeof addr.sun_path) throw Error(Code::kInvalidArgument, "socket name too long: " + path);
  }
  std::memcpy(addr.sun_path, target.c_str(), target.size() + 1);
  return static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + target.size() + 1);
}

}  // namespace

UniqueFd listen_unix(const std::string& path, int backlog) {
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) throw_errno("socket");
  sockaddr_un addr;
  UniqueFd holder;
  socklen_t len = make_addr(path, addr, holder);
  ::unlink(path.c_str());
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), len) < 0) throw_errno("bind " + path);
  if (::listen(fd.get(), backlog) < 0) throw_errno("listen " + path);
  return fd;
}

UniqueFd connect_unix(const std::string& path) {
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd) throw_errno("socket");
  sockaddr_un addr;
  UniqueFd holder;
  socklen_t len = make_addr(path, addr, holder);
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), len) < 0) {
    int e = errno;
    if (e == ECONNREFUSED || e == ENOENT)
      throw Error(Code::kUnavailable, "sandbox agent not reachable at " + path + ": " + std::strerror(e), e);
    if (e == EAGAIN) throw Error(Code::kUnavailable, "sandbox agent busy (accept backlog full): " + path, e);
    throw_errno("connect " + path, e);
  }
  return fd;
}

void send_with_fds(int sock, const std::string& bytes, const std::vector<int>& fds) {
  size_t off = 0;
  bool first = true;
  while (off < bytes.size()) {
    iovec iov{const_cast<char*>(bytes.data()) + off, bytes.size() - off};
    msghdr msg = {};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    std::vector<char> control;
    if (first && !fds.empty()) {
      control.resize(CMSG_SPACE(sizeof(int) * fds.size()));
      msg.msg_control = control.data();
      msg.msg_controllen = control.size();
      cmsghdr* c = CMSG_FIRSTHDR(&msg);
      c->cmsg_level = SOL_SOCKET;
      c->cmsg_type = SCM_RIGHTS;
      c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
      std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
    }
    ssize_t n = ::sendmsg(sock, &msg, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw_errno("send to sandbox init");
    }
    first = false;
    off += static_cast<size_t>(n);
  }
}

void socket_pair(UniqueFd& a, UniqueFd& b) {
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) throw_errno("socketpair");
  a.reset(sv[0]);
  b.reset(sv[1]);
}

}  // namespace sandlet::sys
