// Asking one upstream resolver over UDP. The query goes out with a random id from a fresh socket (a random
// source port); only a reply from the upstream's own address and port, with the same id and the same
// question, is taken — anything else (a spoofed or late datagram) is read and dropped. UpstreamTry is one
// such exchange on a non-blocking socket, for a caller's poller (the gateway's event loop); ask_upstream
// is the same, blocking until a deadline.
#pragma once
#include <array>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "network/dns/dns_message.hpp"
#include "sys/fd.hpp"

namespace sandlet::net {

struct DnsUpstream {
  int family = 4;                  // 4 or 6
  std::array<uint8_t, 16> addr{};  // network order
  uint16_t port = 53;
};

// "10.0.0.53", "fd00::53" (port 53) or "127.0.0.1:5353", "[::1]:5353"; nothing when `text` is neither.
std::optional<DnsUpstream> dns_upstream_of(const std::string& text);
std::string dns_upstream_text(const DnsUpstream& u);

// kPending: nothing usable has come yet (UpstreamTry::read only).
enum class UpstreamOutcome { kReply, kTimeout, kUnreachable, kPending };

struct UpstreamResult {
  UpstreamOutcome outcome = UpstreamOutcome::kTimeout;
  DnsMessage reply;   // kReply: a well-formed response to the question
  std::string why;    // kUnreachable: the socket error
};

// One try: a fresh non-blocking UDP socket connected to the upstream, the query (build_dns_query: our own
// random id and flags, the name in lower case, our EDNS0) sent at construction. Holds that one descriptor
// until destroyed. Never throws but for allocation.
class UpstreamTry final {
 public:
  UpstreamTry(const DnsUpstream& upstream, const DnsQuestion& q);
  // The socket to wait on (readable); -1 when the try failed at once (error() says why).
  int fd() const { return fd_.get(); }
  const std::string& error() const { return error_; }
  // Reads what is waiting, never blocks: kReply with the answer, kUnreachable when the socket reports an
  // error (an ICMP port unreachable, ...), kPending while nothing usable has come.
  UpstreamResult read();

 private:
  DnsUpstream upstream_;
  DnsQuestion q_;
  uint16_t id_ = 0;
  sys::UniqueFd fd_;
  std::string error_;
};

// Sends `q` to `upstream` and waits until `deadline` for the matching reply. Never throws.
UpstreamResult ask_upstream(const DnsUpstream& upstream, const DnsQuestion& q,
                            std::chrono::steady_clock::time_point deadline);

}  // namespace sandlet::net
