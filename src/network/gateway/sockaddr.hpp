// Socket addresses as the gateway handles them: IPv4 or IPv6 with a port, comparable, printable.
#pragma once
#include <netinet/in.h>
#include <sys/socket.h>

#include <array>
#include <cstdint>
#include <string>

namespace sandlet::netgw {

struct Endpoint {
  int family = 4;                  // 4 or 6
  std::array<uint8_t, 16> addr{};  // network order, IPv4 in the first 4 bytes
  uint16_t port = 0;               // host order
  bool operator<(const Endpoint& o) const {
    return family != o.family ? family < o.family : addr != o.addr ? addr < o.addr : port < o.port;
  }
  bool operator==(const Endpoint& o) const { return family == o.family && addr == o.addr && port == o.port; }
};

Endpoint endpoint_of(const sockaddr_storage& ss);
socklen_t sockaddr_of(const Endpoint& e, sockaddr_storage& ss);
std::string to_string(const Endpoint& e);
// Parses an IP literal (no port); false when it is not one.
bool parse_ip(const std::string& text, Endpoint& out);
// Whether `e` is the sandbox's resolver (policy::kResolver4/6, port 53): answered, never relayed.
bool is_resolver(const Endpoint& e);

}  // namespace sandlet::netgw
