// DNS messages written byte by byte for the tests (independent of the builder under test), and a small
// DNS server on loopback answering from a table, for the name gate's tests.
#pragma once
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <array>
#include <functional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "network/dns/dns_message.hpp"

namespace dns_test {

using Bytes = std::vector<uint8_t>;

inline void u16(Bytes& b, uint16_t v) {
  b.push_back(static_cast<uint8_t>(v >> 8));
  b.push_back(static_cast<uint8_t>(v));
}
inline void u32(Bytes& b, uint32_t v) {
  u16(b, static_cast<uint16_t>(v >> 16));
  u16(b, static_cast<uint16_t>(v));
}
// "a.b" -> 1 'a' 1 'b' 0
inline Bytes wire(const std::string& name) {
  Bytes b;
  size_t start = 0;
  while (start < name.size()) {
    size_t dot = name.find('.', start);
    if (dot == std::string::npos) dot = name.size();
    b.push_back(static_cast<uint8_t>(dot - start));
    b.insert(b.end(), name.begin() + static_cast<long>(start), name.begin() + static_cast<long>(dot));
    start = dot + 1;
  }
  b.push_back(0);
  return b;
}
inline Bytes header(uint16_t id, uint16_t flags, uint16_t qd, uint16_t an, uint16_t ns = 0, uint16_t ar = 0) {
  Bytes b;
  for (uint16_t v : {id, flags, qd, an, ns, ar}) u16(b, v);
  return b;
}
inline void append(Bytes& b, const Bytes& more) { b.insert(b.end(), more.begin(), more.end()); }
inline void question(Bytes& b, const std::string& name, uint16_t type, uint16_t klass = 1) {
  append(b, wire(name));
  u16(b, type);
  u16(b, klass);
}
inline Bytes query(uint16_t id, const std::string& name, uint16_t type) {
  Bytes b = header(id, 0x0100, 1, 0);
  question(b, name, type);
  return b;
}
// A resource record with an owner given as wire bytes (a name or a pointer).
inline void rr(Bytes& b, const Bytes& owner, uint16_t type, uint32_t ttl, const Bytes& rdata, uint16_t klass = 1) {
  append(b, owner);
  u16(b, type);
  u16(b, klass);
  u32(b, ttl);
  u16(b, static_cast<uint16_t>(rdata.size()));
  append(b, rdata);
}
inline Bytes ptr(uint16_t offset) { return {static_cast<uint8_t>(0xC0 | offset >> 8), static_cast<uint8_t>(offset)}; }
inline Bytes v4(const char* text) {
  Bytes b(4);
  inet_pton(AF_INET, text, b.data());
  return b;
}
inline Bytes v6(const char* text) {
  Bytes b(16);
  inet_pton(AF_INET6, text, b.data());
  return b;
}
inline std::string text_of(int family, const std::array<uint8_t, 16>& a) {
  char buf[INET6_ADDRSTRLEN] = {};
  inet_ntop(family == 4 ? AF_INET : AF_INET6, a.data(), buf, sizeof buf);
  return buf;
}

// The question name of a query, as text with the case it was sent in ("" when it has none).
inline std::string name_of(const Bytes& q) {
  size_t p = 12;
  std::string name;
  while (p < q.size() && q[p] != 0 && p + 1 + q[p] <= q.size()) {
    if (!name.empty()) name += '.';
    name.append(q.begin() + static_cast<long>(p + 1), q.begin() + static_cast<long>(p + 1 + q[p]));
    p += 1 + q[p];
  }
  return name;
}

// A query for `name` that carries everything a sandbox could hide data in: every flag a client may set
// (RD, Z, AD, CD), an answer, an authority and an additional record, and an OPT with the DO bit, a cookie
// and a client subnet.
inline Bytes hostile_query(uint16_t id, const std::string& name) {
  Bytes q = header(id, 0x0170, 1, 1, 1, 2);
  question(q, name, 1 /* A */);
  rr(q, wire("secret-answer.leak"), 1, 7, v4("10.9.8.7"));
  rr(q, wire("secret-authority.leak"), 2, 7, wire("ns.secret.leak"));
  rr(q, wire("secret-additional.leak"), 1, 7, v4("10.9.8.6"));
  Bytes options;
  u16(options, 10);  // COOKIE
  u16(options, 8);
  append(options, Bytes{'S', 'E', 'C', 'R', 'E', 'T', 'C', 'K'});
  u16(options, 8);  // CLIENT-SUBNET 10.1.2.0/24
  u16(options, 7);
  append(options, Bytes{0, 1, 24, 0, 10, 1, 2});
  rr(q, {0}, 41 /* OPT */, 0x00008000, options, 4096);
  return q;
}

// A UDP DNS server on 127.0.0.1 (a port of the kernel's choosing), run on its own thread until destroyed.
// `answer` gets each query's bytes and returns the datagrams to send back (none: stay silent).
class FakeDns {
 public:
  using Answer = std::function<std::vector<Bytes>(const Bytes& query)>;
  explicit FakeDns(Answer answer) : FakeDns(std::move(answer), "", "127.0.0.1", 0) {}
  // On `address`:`port` (0: the kernel's choice) in the network namespace `netns` ("" = this thread's):
  // the socket is made there and keeps it.
  FakeDns(Answer answer, const std::string& netns, const char* address, uint16_t port) : answer_(std::move(answer)) {
    std::thread maker([&] {
      if (!netns.empty()) {
        const int ns = ::open(netns.c_str(), O_RDONLY | O_CLOEXEC);
        if (ns < 0 || ::setns(ns, CLONE_NEWNET) != 0) return;
        ::close(ns);
      }
      fd_ = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    });
    maker.join();
    if (fd_ < 0) throw std::runtime_error("FakeDns: socket in " + netns);
    const int one = 1;
    ::setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    inet_pton(AF_INET, address, &a.sin_addr);
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) throw std::runtime_error("bind");
    socklen_t len = sizeof a;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { run(); });
  }
  ~FakeDns() {
    stop_ = true;
    thread_.join();
    ::close(fd_);
  }
  uint16_t port() const { return port_; }
  int queries() const { return queries_; }

 private:
  void run() {
    while (!stop_) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      Bytes buf(65536);
      sockaddr_in from{};
      socklen_t fl = sizeof from;
      const ssize_t n = ::recvfrom(fd_, buf.data(), buf.size(), 0, reinterpret_cast<sockaddr*>(&from), &fl);
      if (n <= 0) continue;
      buf.resize(static_cast<size_t>(n));
      ++queries_;
      for (const Bytes& out : answer_(buf))
        ::sendto(fd_, out.data(), out.size(), 0, reinterpret_cast<sockaddr*>(&from), fl);
    }
  }
  Answer answer_;
  int fd_ = -1;
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> queries_{0};
  std::thread thread_;
};

}  // namespace dns_test
