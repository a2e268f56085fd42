// Both directions of one relayed TCP connection through bounded buffers, on the gateway's epoll loop.
// Why copying through a buffer and not splice(): splice needs a pipe pair per connection (two more fds
// and a pipe's pages each) and still a buffer's worth of copying logic; at the gateway's connection
// counts the plain read/write loop is simpler to bound and to rate-limit by the byte.
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "network/gateway/gateway.hpp"
#include "network/gateway/limits.hpp"

namespace sandlet::netgw {

TcpRelay::TcpRelay(SandboxPort& owner, sys::UniqueFd inner, sys::UniqueFd outer, bool inner_is_client)
    : owner_(owner), inner_(std::move(inner)), outer_(std::move(outer)), connecting_inner_(!inner_is_client),
      deadline_ms_(Gateway::now_ms() + kConnectTimeoutMs) {
  inner_side_.relay = this, inner_side_.inner = true;
  outer_side_.relay = this, outer_side_.inner = false;
}

TcpRelay::~TcpRelay() { close(true); }

void TcpRelay::start() {
  EventLoop& loop = owner_.gateway().loop();
  loop.add(inner_.get(), 0, &inner_side_);
  loop.add(outer_.get(), 0, &outer_side_);
  update_interest();
}

void TcpRelay::on_inner(uint32_t events) { on_side(true, events); }
void TcpRelay::on_outer(uint32_t events) { on_side(false, events); }

void TcpRelay::on_side(bool inner, uint32_t events) {
  if (closed_) return;
  if (connecting_) {
    const bool is_connecting_side = inner == connecting_inner_;
    if (!is_connecting_side) {
      if (events & (EPOLLERR | EPOLLHUP)) return finish(true);  // gone before the other side answered
      return;
    }
    int err = 0;
    socklen_t len = sizeof err;
    (void)::getsockopt(inner ? inner_.get() : outer_.get(), SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0) return finish(true);  // the destination refused: the sandbox sees a reset
    connecting_ = false;
  }
  if (events & EPOLLERR) return finish(true);
  pump();
  // Both directions of that side are closed (epoll reports it whatever the interest): nothing more can
  // pass that way, and waiting would spin.
  if (!closed_ && (events & EPOLLHUP)) finish(false);
}

// Moves what it can from `from` into `buf` (up to `cap`), then from `buf` to `to`. False on a fatal error.
bool TcpRelay::move(int from, int to, std::string& buf, bool& from_eof, bool& to_shut, uint64_t cap, uint64_t& counter) {
  char chunk[16 * 1024];
  while (!from_eof && buf.size() < kRelayBuffer && cap > 0) {
    const size_t want = std::min<uint64_t>({sizeof chunk, kRelayBuffer - buf.size(), cap});
    const ssize_t n = ::recv(from, chunk, want, MSG_DONTWAIT);
    if (n > 0) {
      buf.append(chunk, static_cast<size_t>(n));
      cap -= static_cast<uint64_t>(n);
      continue;
    }
    if (n == 0) from_eof = true;
    else if (errno != EAGAIN && errno != EINTR) return false;
    break;
  }
  while (!buf.empty()) {
    const ssize_t n = ::send(to, buf.data(), buf.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n > 0) {
      counter += static_cast<uint64_t>(n);
      buf.erase(0, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) break;
    return false;
  }
  if (from_eof && buf.empty() && !to_shut) {
    (void)::shutdown(to, SHUT_WR);
    to_shut = true;
  }
  return true;
}

void TcpRelay::pump() {
  if (connecting_) return update_interest();
  RateLimit& rate = owner_.rate();
  const uint64_t tokens = rate.available();
  const size_t before = out_buf_.size();
  uint64_t sent_out = 0;
  bool ok = move(inner_.get(), outer_.get(), out_buf_, inner_eof_, outer_shut_, tokens, sent_out);
  // Tokens pay for what was read from the sandbox (what will go out), once.
  const uint64_t read_now = out_buf_.size() + sent_out - before;
  rate.spend(read_now);
  throttled_ = !rate.unlimited() && !inner_eof_ && rate.available() == 0;
  owner_.count(proto::kGwBytesOut, sent_out);
  uint64_t sent_in = 0;
  ok = ok && move(outer_.get(), inner_.get(), in_buf_, outer_eof_, inner_shut_, UINT64_MAX, sent_in);
  owner_.count(proto::kGwBytesIn, sent_in);
  if (!ok) return finish(true);
  if (inner_eof_ && outer_eof_ && out_buf_.empty() && in_buf_.empty()) return finish(false);
  update_interest();
}

void TcpRelay::update_interest() {
  EventLoop& loop = owner_.gateway().loop();
  uint32_t in_ev = 0, out_ev = 0;
  if (connecting_) {
    (connecting_inner_ ? in_ev : out_ev) = EPOLLOUT;
  } else {
    if (!inner_eof_ && out_buf_.size() < kRelayBuffer && !throttled_) in_ev |= EPOLLIN;
    if (!in_buf_.empty()) in_ev |= EPOLLOUT;
    if (!outer_eof_ && in_buf_.size() < kRelayBuffer) out_ev |= EPOLLIN;
    if (!out_buf_.empty()) out_ev |= EPOLLOUT;
  }
  try {
    loop.modify(inner_.get(), in_ev, &inner_side_);
    loop.modify(outer_.get(), out_ev, &outer_side_);
  } catch (const std::exception&) {
    finish(true);
  }
}

void TcpRelay::tick(int64_t now) {
  if (closed_) return;
  if (connecting_ && now > deadline_ms_) return finish(true);
  if (throttled_) {
    throttled_ = false;
    pump();
  }
}

void TcpRelay::close(bool reset) {
  if (closed_) return;
  closed_ = true;
  EventLoop& loop = owner_.gateway().loop();
  loop.remove(inner_.get());
  loop.remove(outer_.get());
  if (reset) {
    const linger lg{1, 0};
    (void)::setsockopt(inner_.get(), SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    (void)::setsockopt(outer_.get(), SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
  }
  inner_.reset();
  outer_.reset();
}

void TcpRelay::finish(bool reset) {
  close(reset);
  owner_.relay_done(this);
}

}  // namespace sandlet::netgw
