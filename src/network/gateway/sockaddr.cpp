#include "network/gateway/sockaddr.hpp"

#include <arpa/inet.h>

#include <cstring>

#include "policy/net_sk_lookup.hpp"

namespace sandlet::netgw {

Endpoint endpoint_of(const sockaddr_storage& ss) {
  Endpoint e;
  if (ss.ss_family == AF_INET) {
    const auto& a = reinterpret_cast<const sockaddr_in&>(ss);
    e.family = 4;
    std::memcpy(e.addr.data(), &a.sin_addr, 4);
    e.port = ntohs(a.sin_port);
  } else {
    const auto& a = reinterpret_cast<const sockaddr_in6&>(ss);
    e.family = 6;
    std::memcpy(e.addr.data(), &a.sin6_addr, 16);
    e.port = ntohs(a.sin6_port);
  }
  return e;
}

socklen_t sockaddr_of(const Endpoint& e, sockaddr_storage& ss) {
  std::memset(&ss, 0, sizeof ss);
  if (e.family == 4) {
    auto& a = reinterpret_cast<sockaddr_in&>(ss);
    a.sin_family = AF_INET;
    std::memcpy(&a.sin_addr, e.addr.data(), 4);
    a.sin_port = htons(e.port);
    return sizeof a;
  }
  auto& a = reinterpret_cast<sockaddr_in6&>(ss);
  a.sin6_family = AF_INET6;
  std::memcpy(&a.sin6_addr, e.addr.data(), 16);
  a.sin6_port = htons(e.port);
  return sizeof a;
}

std::string to_string(const Endpoint& e) {
  char text[INET6_ADDRSTRLEN] = {};
  inet_ntop(e.family == 4 ? AF_INET : AF_INET6, e.addr.data(), text, sizeof text);
  return e.family == 4 ? std::string(text) + ":" + std::to_string(e.port)
                       : "[" + std::string(text) + "]:" + std::to_string(e.port);
}

bool parse_ip(const std::string& text, Endpoint& out) {
  out = Endpoint{};
  if (inet_pton(AF_INET, text.c_str(), out.addr.data()) == 1) return out.family = 4, true;
  if (inet_pton(AF_INET6, text.c_str(), out.addr.data()) == 1) return out.family = 6, true;
  return false;
}

bool is_resolver(const Endpoint& e) {
  if (e.port != policy::kResolverPort) return false;
  return e.family == 4 ? std::memcmp(e.addr.data(), policy::kResolver4, 4) == 0
                       : std::memcmp(e.addr.data(), policy::kResolver6, 16) == 0;
}

}  // namespace sandlet::netgw
