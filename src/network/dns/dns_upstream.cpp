#include "network/dns/dns_upstream.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/random.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>

#include "sys/fd.hpp"

namespace sandlet::net {
namespace {

// The UDP payload we ask upstreams for: large enough for any A/AAAA answer with a CNAME chain, small
// enough not to fragment on common paths (the 2020 DNS flag day's value).
constexpr uint16_t kAskedUdpSize = 1232;

socklen_t sockaddr_of(const DnsUpstream& u, sockaddr_storage& ss) {
  std::memset(&ss, 0, sizeof ss);
  if (u.family == 4) {
    auto* a = reinterpret_cast<sockaddr_in*>(&ss);
    a->sin_family = AF_INET;
    a->sin_port = htons(u.port);
    std::memcpy(&a->sin_addr, u.addr.data(), 4);
    return sizeof *a;
  }
  auto* a = reinterpret_cast<sockaddr_in6*>(&ss);
  a->sin6_family = AF_INET6;
  a->sin6_port = htons(u.port);
  std::memcpy(&a->sin6_addr, u.addr.data(), 16);
  return sizeof *a;
}

bool from_upstream(const DnsUpstream& u, const sockaddr_storage& from) {
  if (u.family == 4 && from.ss_family == AF_INET) {
    const auto* a = reinterpret_cast<const sockaddr_in*>(&from);
    return ntohs(a->sin_port) == u.port && std::memcmp(&a->sin_addr, u.addr.data(), 4) == 0;
  }
  if (u.family == 6 && from.ss_family == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&from);
    return ntohs(a->sin6_port) == u.port && std::memcmp(&a->sin6_addr, u.addr.data(), 16) == 0;
  }
  return false;
}

uint16_t random_id() {
  uint16_t id = 0;
  while (::getrandom(&id, sizeof id, 0) != static_cast<ssize_t>(sizeof id)) {
  }
  return id;
}

bool answers(const DnsMessage& m, uint16_t id, const DnsQuestion& q) {
  if (!m.header.response() || m.header.id != id || m.header.opcode() != 0 || m.questions.size() != 1) return false;
  const DnsQuestion& a = m.questions.front();
  return a.type == q.type && a.klass == q.klass && a.name == q.name;
}

}  // namespace

std::optional<DnsUpstream> dns_upstream_of(const std::string& text) {
  DnsUpstream u;
  std::string host = text;
  std::string port;
  if (!text.empty() && text.front() == '[') {
    const size_t close = text.find(']');
    if (close == std::string::npos || close + 1 >= text.size() || text[close + 1] != ':') return std::nullopt;
    host = text.substr(1, close - 1);
    port = text.substr(close + 2);
  } else if (std::count(text.begin(), text.end(), ':') == 1) {
    host = text.substr(0, text.find(':'));
    port = text.substr(text.find(':') + 1);
  }
  if (inet_pton(AF_INET, host.c_str(), u.addr.data()) == 1) {
    u.family = 4;
  } else if (inet_pton(AF_INET6, host.c_str(), u.addr.data()) == 1) {
    u.family = 6;
  } else {
    return std::nullopt;
  }
  if (!port.empty() || (text.find(':') != std::string::npos && u.family == 4)) {
    unsigned v = 0;
    const auto r = std::from_chars(port.data(), port.data() + port.size(), v);
    if (port.empty() || r.ec != std::errc() || r.ptr != port.data() + port.size() || v == 0 || v > 65535)
      return std::nullopt;
    u.port = static_cast<uint16_t>(v);
  }
  return u;
}

std::string dns_upstream_text(const DnsUpstream& u) {
  char buf[INET6_ADDRSTRLEN] = {};
  inet_ntop(u.family == 4 ? AF_INET : AF_INET6, u.addr.data(), buf, sizeof buf);
  const std::string host = u.family == 4 ? std::string(buf) : "[" + std::string(buf) + "]";
  return host + ":" + std::to_string(u.port);
}

UpstreamTry::UpstreamTry(const DnsUpstream& upstream, const DnsQuestion& q) : upstream_(upstream), q_(q) {
  sys::UniqueFd s(::socket(upstream.family == 4 ? AF_INET : AF_INET6, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!s) {
    error_ = std::string("socket: ") + std::strerror(errno);
    return;
  }
  sockaddr_storage to{};
  const socklen_t to_len = sockaddr_of(upstream, to);
  // Connected: the kernel reports ICMP errors (port unreachable) and drops datagrams from elsewhere.
  if (::connect(s.get(), reinterpret_cast<sockaddr*>(&to), to_len) != 0) {
    error_ = std::string("connect: ") + std::strerror(errno);
    return;
  }
  id_ = random_id();
  const std::vector<uint8_t> query = build_dns_query(id_, q, kAskedUdpSize);
  if (::send(s.get(), query.data(), query.size(), 0) != static_cast<ssize_t>(query.size())) {
    error_ = std::string("send: ") + std::strerror(errno);
    return;
  }
  fd_ = std::move(s);
}

UpstreamResult UpstreamTry::read() {
  UpstreamResult out;
  if (!fd_) {
    out.outcome = UpstreamOutcome::kUnreachable;
    out.why = error_;
    return out;
  }
  std::array<uint8_t, kDnsMaxUdp + 1> buf;
  // Bounded: a flood of foreign datagrams cannot keep the caller here (what is left waits for the next call).
  for (int i = 0; i < 64; ++i) {
    sockaddr_storage from{};
    socklen_t from_len = sizeof from;
    const ssize_t got = ::recvfrom(fd_.get(), buf.data(), buf.size(), MSG_DONTWAIT, reinterpret_cast<sockaddr*>(&from), &from_len);
    if (got < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      out.outcome = UpstreamOutcome::kUnreachable;
      out.why = std::string("receive: ") + std::strerror(errno);
      return out;
    }
    if (!from_upstream(upstream_, from)) continue;
    DnsParse parsed = parse_dns(std::span<const uint8_t>(buf.data(), static_cast<size_t>(got)));
    if (!parsed.ok() || !answers(parsed.message, id_, q_)) continue;
    out.outcome = UpstreamOutcome::kReply;
    out.reply = std::move(parsed.message);
    return out;
  }
  out.outcome = UpstreamOutcome::kPending;
  return out;
}

UpstreamResult ask_upstream(const DnsUpstream& upstream, const DnsQuestion& q,
                            std::chrono::steady_clock::time_point deadline) {
  try {
    UpstreamTry t(upstream, q);
    for (;;) {
      UpstreamResult r = t.read();
      if (r.outcome != UpstreamOutcome::kPending) return r;
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return UpstreamResult{};  // kTimeout
      pollfd p{t.fd(), POLLIN, 0};
      (void)::poll(&p, 1, static_cast<int>(std::min<int64_t>(left.count(), 60'000)));
    }
  } catch (const std::exception& e) {
    UpstreamResult out;
    out.outcome = UpstreamOutcome::kUnreachable;
    out.why = e.what();
    return out;
  }
}

}  // namespace sandlet::net
