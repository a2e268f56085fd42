// The few rtnetlink operations the runtime needs on a network namespace, done from a short-lived thread
// that enters it (setns), so the caller's own namespace never changes. No `ip` binary.
#pragma once
#include <array>
#include <cstdint>
#include <vector>

#include "sys/fd.hpp"

namespace sandlet::sys {

// Routes of type local for 0.0.0.0/0 and ::/0 on `lo` in the namespace `netns_fd` ("AnyIP"): every
// destination is delivered inside that namespace, where a socket-lookup program can steer it. Their
// preferred sources, `source4` (4 bytes) and `source6` (16), are added to lo first: what the namespace's
// own sockets send from. Throws an Error naming what could not be added.
void add_anyip_routes(int netns_fd, const uint8_t* source4, const uint8_t* source6);

struct NetnsAddress {
  int family = 4;                  // 4 or 6
  std::array<uint8_t, 16> addr{};  // network order; IPv4 in the first 4 bytes
  int prefix = -1;                 // a range of that many bits; -1: the address alone
};
// Every address configured in the namespace `netns_fd` (-1: the caller's own), loopback included.
std::vector<NetnsAddress> netns_addresses(int netns_fd);
// Every destination the namespace delivers to itself: the routes of type local or anycast in its local
// table (each of its addresses, whole prefixes routed `local` — "AnyIP" —, an IPv6 router's anycast
// addresses), loopback included. Throws an Error when the listing fails.
std::vector<NetnsAddress> netns_local_routes(int netns_fd);

// A socket of the caller's network namespace that becomes readable whenever an address or a route is added
// there or removed (rtnetlink groups IFADDR and ROUTE, both families). Non-blocking, close-on-exec.
UniqueFd address_events_socket();
// Reads every pending message of such a socket. True when one was about an address or a local route, or
// when the kernel dropped some (ENOBUFS: the queue overflowed): either way the caller lists them again.
// Other routes' changes (a router's churn) are read and ignored.
bool drain_address_events(int fd);

}  // namespace sandlet::sys
