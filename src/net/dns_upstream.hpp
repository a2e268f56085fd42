// Asking one upstream resolver over UDP, with a deadline. The query goes out with a random id from a
// fresh socket (a random source port); only a reply from the upstream's own address and port, with the same
// id and the same question, is taken — anything else (a spoofed or late datagram) is read and dropped.
#pragma once
#include <array>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "net/dns_message.hpp"

namespace sandlet::net {

struct DnsUpstream {
  int family = 4;                  // 4 or 6
  std::array<uint8_t, 16> addr{};  // network order
  uint16_t port = 53;
};

// "10.0.0.53", "fd00::53" (port 53) or "127.0.0.1:5353", "[::1]:5353"; nothing when `text` is neither.
std::optional<DnsUpstream> dns_upstream_of(const std::string& text);
std::string dns_upstream_text(const DnsUpstream& u);

enum class UpstreamOutcome { kReply, kTimeout, kUnreachable };

struct UpstreamResult {
  UpstreamOutcome outcome = UpstreamOutcome::kTimeout;
  DnsMessage reply;   // kReply: a well-formed response to the question
  std::string why;    // kUnreachable: the socket error
};

// Sends `q` to `upstream` and waits until `deadline` for the matching reply. Never throws.
UpstreamResult ask_upstream(const DnsUpstream& upstream, const DnsQuestion& q,
                            std::chrono::steady_clock::time_point deadline);

}  // namespace sandlet::net
