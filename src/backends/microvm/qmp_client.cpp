#include "backends/microvm/qmp_client.hpp"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/json.hpp>

#include "common/error.hpp"
#include "sys/fs_util.hpp"
#include "sys/unix_socket.hpp"

namespace json = boost::json;

namespace sandlet::microvm {
namespace {

class Qmp {
 public:
  Qmp(const std::string& path, int timeout_ms)
      : fd_(sys::connect_unix(path)), deadline_(sys::now_monotonic_ns() + static_cast<uint64_t>(timeout_ms) * 1000000ull) {}

  // The next message that is not an asynchronous event.
  json::object next() {
    for (;;) {
      size_t nl;
      while ((nl = buf_.find('\n')) == std::string::npos) fill();
      std::string line = buf_.substr(0, nl);
      buf_.erase(0, nl + 1);
      boost::system::error_code ec;
      json::value v = json::parse(line, ec);
      if (ec || !v.is_object()) throw Error(Code::kInternal, "QEMU's monitor sent something that is not JSON");
      if (v.as_object().contains("event")) continue;
      return v.as_object();
    }
  }
  void send(const std::string& command) {
    const std::string line = "{\"execute\":\"" + command + "\"}\n";
    if (::send(fd_.get(), line.data(), line.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(line.size()))
      throw Error(Code::kUnavailable, "QEMU's monitor went away");
  }

 private:
  void fill() {
    const uint64_t now = sys::now_monotonic_ns();
    if (now >= deadline_) throw Error(Code::kUnavailable, "QEMU's monitor did not answer in time");
    if (buf_.size() > (1u << 20)) throw Error(Code::kInternal, "QEMU's monitor sent an over-long line");
    struct pollfd p = {fd_.get(), POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>((deadline_ - now) / 1000000 + 1)) < 0 && errno != EINTR) throw_errno("poll");
    char tmp[4096];
    ssize_t n = ::read(fd_.get(), tmp, sizeof tmp);
    if (n == 0) throw Error(Code::kUnavailable, "QEMU's monitor went away");
    if (n > 0) buf_.append(tmp, static_cast<size_t>(n));
  }
  sys::UniqueFd fd_;
  uint64_t deadline_;
  std::string buf_;
};

void check(const json::object& reply, const std::string& command) {
  if (reply.contains("return")) return;
  std::string why = "no answer";
  if (auto* e = reply.if_contains("error"); e && e->is_object())
    if (auto* d = e->as_object().if_contains("desc"); d && d->is_string()) why = std::string(d->as_string());
  throw Error(Code::kInternal, "QEMU refused \"" + command + "\": " + why);
}

}  // namespace

void qmp_command(const std::string& socket_path, const std::string& command, int timeout_ms) {
  Qmp q(socket_path, timeout_ms);
  json::object greeting = q.next();
  if (!greeting.contains("QMP")) throw Error(Code::kInternal, "QEMU's monitor did not greet");
  q.send("qmp_capabilities");
  check(q.next(), "qmp_capabilities");
  q.send(command);
  check(q.next(), command);
}

}  // namespace sandlet::microvm
