#include "network/gateway/journal.hpp"

#include <fcntl.h>
#include <poll.h>

#include <boost/json.hpp>
#include <cstdio>

#include "common/error.hpp"
#include "lazy/seqpacket.hpp"
#include "sys/unix_socket.hpp"

namespace sandlet::netgw {

Journal::Journal(sys::UniqueFd sock) : sock_(std::move(sock)) {
  const int flags = ::fcntl(sock_.get(), F_GETFL);
  if (flags >= 0) (void)::fcntl(sock_.get(), F_SETFL, flags | O_NONBLOCK);
}

void Journal::send(const std::string& message, const std::vector<int>& fds) noexcept {
  try {
    flush();
    if (outbox_.empty()) {
      try {
        sys::send_with_fds(sock_.get(), message, fds);
        return;
      } catch (const Error& e) {
        if (e.err_no() != EAGAIN && e.err_no() != ENOBUFS) throw;
      }
    }
    // The supervisor is behind: keep it, with copies of the descriptors (their owner may close them), in
    // order behind what waits already.
    if (outbox_.size() >= kOutboxMax) {
      std::fprintf(stderr, "sandlet-netgw: the supervisor takes nothing: a message dropped\n");
      return;
    }
    Pending p{message, {}};
    for (int fd : fds) p.fds.emplace_back(::fcntl(fd, F_DUPFD_CLOEXEC, 3));
    outbox_.push_back(std::move(p));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sandlet-netgw: the supervisor did not take a message: %s\n", e.what());
  }
}

void Journal::flush() noexcept {
  while (!outbox_.empty()) {
    std::vector<int> raw;
    for (const sys::UniqueFd& f : outbox_.front().fds) raw.push_back(f.get());
    try {
      sys::send_with_fds(sock_.get(), outbox_.front().message, raw);
    } catch (const Error& e) {
      if (e.err_no() == EAGAIN || e.err_no() == ENOBUFS) return;  // later
      std::fprintf(stderr, "sandlet-netgw: the supervisor did not take a message: %s\n", e.what());
    } catch (const std::exception&) {
      return;
    }
    outbox_.pop_front();
  }
}

void Journal::remember(const std::string& id, const std::string& request, const std::vector<int>& fds) noexcept {
  try {
    send(boost::json::serialize(boost::json::object{{"op", "remember"}, {"id", id}, {"request", request}}), fds);
  } catch (const std::exception&) {
  }
}

void Journal::update(const std::string& id, const std::string& request) noexcept {
  try {
    send(boost::json::serialize(boost::json::object{{"op", "update"}, {"id", id}, {"request", request}}), {});
  } catch (const std::exception&) {
  }
}

void Journal::forget(const std::string& id) noexcept {
  try {
    send(boost::json::serialize(boost::json::object{{"op", "forget"}, {"id", id}}), {});
  } catch (const std::exception&) {
  }
}

void Journal::attaching(const std::string& id) noexcept {
  try {
    send(boost::json::serialize(boost::json::object{{"op", "attaching"}, {"id", id}}), {});
  } catch (const std::exception&) {
  }
}

void Journal::replayed() noexcept { send(R"({"op":"replayed"})", {}); }

std::vector<Replay> Journal::replay() {
  std::vector<Replay> out;
  for (;;) {
    pollfd p{sock_.get(), POLLIN, 0};
    int rc;
    do rc = ::poll(&p, 1, 30000);
    while (rc < 0 && errno == EINTR);
    if (rc <= 0) throw Error(Code::kDeadlineExceeded, "the supervisor's replay stalled");
    Replay r;
    bool eof = false;
    const std::string msg = lazy::seqpacket_recv(sock_.get(), 256 * 1024, &r.fds, &eof);
    if (eof) throw Error(Code::kUnavailable, "the supervisor went away during the replay");
    boost::system::error_code ec;
    const boost::json::value v = boost::json::parse(msg, ec);
    if (ec || !v.is_object()) continue;
    const boost::json::object& o = v.as_object();
    const auto* op = o.if_contains("op");
    if (!op || !op->is_string()) continue;
    if (op->as_string() == "end") return out;
    const auto* req = o.if_contains("request");
    if (op->as_string() != "replay" || !req || !req->is_string()) continue;
    r.request = std::string(req->as_string());
    out.push_back(std::move(r));
  }
}

}  // namespace sandlet::netgw
