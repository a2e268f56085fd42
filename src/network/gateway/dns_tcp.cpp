// The sandbox's resolver over TCP (a resolver library falls back to it when a UDP answer was truncated):
// the gateway accepts connections to the resolver address on the sandbox's steered TCP listener, reads
// length-prefixed queries one at a time, and writes each answer before reading the next.
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

#include "network/gateway/gateway.hpp"
#include "network/gateway/limits.hpp"

namespace sandlet::netgw {

void SandboxPort::accept_dns_tcp(sys::UniqueFd in) {
  if (!dns_ || dns_tcp_.size() >= kDnsTcpPerSandbox || !admit(1, Endpoint{}, "dns tcp")) {
    const linger lg{1, 0};
    (void)::setsockopt(in.get(), SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    return;
  }
  const uint64_t serial = ++dns_tcp_serial_;
  auto session = std::make_unique<DnsTcp>(*this, serial, std::move(in), Gateway::now_ms());  // may throw: nothing kept
  dns_tcp_[serial] = std::move(session);
  ++gw_.dns_tcp_total;
  sync_floor();
}

void SandboxPort::dns_tcp_reply(uint64_t serial, std::vector<uint8_t> reply) {
  auto it = dns_tcp_.find(serial);
  if (it != dns_tcp_.end()) it->second->reply(std::move(reply));
}

void SandboxPort::dns_tcp_done(uint64_t serial) {
  auto it = dns_tcp_.find(serial);
  if (it == dns_tcp_.end()) return;
  gw_.loop().retire(std::move(it->second));
  dns_tcp_.erase(it);
  --gw_.dns_tcp_total;
  sync_floor();
}

DnsTcp::DnsTcp(SandboxPort& owner, uint64_t serial, sys::UniqueFd fd, int64_t now_ms)
    : owner_(owner), loop_(owner.gateway().loop()), serial_(serial), fd_(std::move(fd)), deadline_ms_(now_ms + kDnsTcpIdleMs) {
  loop_.add(fd_.get(), EPOLLIN | EPOLLRDHUP, this);
}

DnsTcp::~DnsTcp() {
  if (fd_) loop_.remove(fd_.get());
}

void DnsTcp::on_event(uint32_t events) {
  if (done_) return;
  if (events & (EPOLLERR | EPOLLHUP)) return finish();
  if (events & EPOLLOUT) flush();
  if (done_ || !(events & (EPOLLIN | EPOLLRDHUP))) return;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::recv(fd_.get(), buf, sizeof buf, MSG_DONTWAIT);
    if (n > 0) {
      in_.append(buf, static_cast<size_t>(n));
      // One query's worth at most (the next is read only after its answer): a flood is cut off.
      if (in_.size() > 2 + net::kDnsMaxTcp) return finish();
      continue;
    }
    if (n == 0) eof_ = true;
    else if (errno != EAGAIN && errno != EINTR) return finish();
    break;
  }
  if (eof_) watch();  // a socket at its end stays readable: stop asking
  next();
}

void DnsTcp::watch() {
  const uint32_t events = (eof_ ? 0u : static_cast<uint32_t>(EPOLLIN | EPOLLRDHUP)) | (out_.empty() ? 0u : EPOLLOUT);
  owner_.gateway().loop().modify(fd_.get(), events, this);
}

void DnsTcp::next() {
  if (waiting_ || done_) return;
  if (in_.size() >= 2) {
    const size_t len = static_cast<size_t>(static_cast<uint8_t>(in_[0])) << 8 | static_cast<uint8_t>(in_[1]);
    if (in_.size() >= 2 + len) {
      if (++queries_ > kDnsTcpQueries) return finish();
      std::vector<uint8_t> query(in_.begin(), in_.begin() + static_cast<long>(2 + len));
      in_.erase(0, 2 + len);
      Gateway* gw = &owner_.gateway();
      const std::string id = owner_.id();
      const uint64_t serial = serial_;
      waiting_ = owner_.gateway().dns().submit(owner_.dns(), std::move(query), net::DnsTransport::kTcp,
                                               [gw, id, serial](std::vector<uint8_t> reply) {
                                                 if (SandboxPort* p = gw->find(id)) p->dns_tcp_reply(serial, std::move(reply));
                                               });
      if (!waiting_) return finish();
      return;
    }
  }
  if (eof_ && out_.empty()) finish();
}

void DnsTcp::reply(std::vector<uint8_t> bytes) {
  waiting_ = false;
  if (done_) return;
  if (bytes.empty()) return finish();  // the gate sends nothing back (a malformed query): so does TCP
  out_.append(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  deadline_ms_ = Gateway::now_ms() + kDnsTcpIdleMs;
  flush();
}

void DnsTcp::flush() {
  while (!out_.empty()) {
    const ssize_t n = ::send(fd_.get(), out_.data(), out_.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n > 0) {
      out_.erase(0, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return watch();
    return finish();
  }
  watch();
  next();
}

void DnsTcp::tick(int64_t now_ms) {
  if (!done_ && !waiting_ && now_ms >= deadline_ms_) finish();
}

void DnsTcp::finish() {
  if (done_) return;
  done_ = true;
  owner_.dns_tcp_done(serial_);  // retires this object: nothing of it is touched after
}

}  // namespace sandlet::netgw
