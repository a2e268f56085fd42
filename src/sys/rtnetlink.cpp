#include "sys/rtnetlink.hpp"

#include <ifaddrs.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/socket.h>

#include <cstring>
#include <exception>
#include <functional>
#include <string>
#include <thread>

#include "common/error.hpp"
#include "sys/fd.hpp"

namespace sandlet::sys {
namespace {

// Runs `fn` on a thread inside `netns_fd` (-1: here); its exception is rethrown in the caller.
void in_netns(int netns_fd, const std::function<void()>& fn) {
  if (netns_fd < 0) return fn();
  std::exception_ptr error;
  std::thread t([&] {
    try {
      if (::setns(netns_fd, CLONE_NEWNET) != 0) throw_errno("enter the sandbox's network namespace");
      fn();
    } catch (...) {
      error = std::current_exception();
    }
  });
  t.join();
  if (error) std::rethrow_exception(error);
}

void add_attr(std::string& msg, uint16_t type, const void* data, size_t len) {
  rtattr a{};
  a.rta_len = static_cast<unsigned short>(RTA_LENGTH(len));
  a.rta_type = type;
  msg.append(reinterpret_cast<const char*>(&a), sizeof a);
  msg.append(static_cast<const char*>(data), len);
  msg.append(RTA_ALIGN(len) - len, '\0');
}

// One request with NLM_F_ACK; throws with the kernel's errno.
void request(int sock, const std::string& body, uint16_t type, uint16_t flags, const std::string& what) {
  nlmsghdr h{};
  h.nlmsg_len = static_cast<uint32_t>(NLMSG_HDRLEN + body.size());
  h.nlmsg_type = type;
  h.nlmsg_flags = static_cast<uint16_t>(NLM_F_REQUEST | NLM_F_ACK | flags);
  h.nlmsg_seq = 1;
  std::string msg(reinterpret_cast<const char*>(&h), sizeof h);
  msg.append(NLMSG_HDRLEN - sizeof h, '\0');
  msg += body;
  sockaddr_nl kernel{};
  kernel.nl_family = AF_NETLINK;
  if (::sendto(sock, msg.data(), msg.size(), 0, reinterpret_cast<sockaddr*>(&kernel), sizeof kernel) < 0)
    throw_errno(what + ": netlink send");
  alignas(nlmsghdr) char reply[4096];
  const ssize_t n = ::recv(sock, reply, sizeof reply, 0);
  if (n < 0) throw_errno(what + ": netlink receive");
  auto* r = reinterpret_cast<nlmsghdr*>(reply);
  if (n < static_cast<ssize_t>(NLMSG_HDRLEN + sizeof(nlmsgerr)) || r->nlmsg_type != NLMSG_ERROR)
    throw Error(Code::kInternal, what + ": unexpected netlink reply");
  const int err = -reinterpret_cast<nlmsgerr*>(NLMSG_DATA(r))->error;
  if (err != 0) throw_errno(what, err);
}

void add_address(int sock, int family, int lo, const uint8_t* addr) {
  ifaddrmsg ifa{};
  ifa.ifa_family = static_cast<unsigned char>(family);
  ifa.ifa_prefixlen = family == AF_INET ? 32 : 128;
  ifa.ifa_flags = family == AF_INET6 ? IFA_F_NODAD : 0;
  ifa.ifa_scope = RT_SCOPE_UNIVERSE;
  ifa.ifa_index = static_cast<unsigned>(lo);
  std::string body(reinterpret_cast<const char*>(&ifa), sizeof ifa);
  const size_t len = family == AF_INET ? 4 : 16;
  add_attr(body, IFA_LOCAL, addr, len);
  add_attr(body, IFA_ADDRESS, addr, len);
  request(sock, body, RTM_NEWADDR, NLM_F_CREATE | NLM_F_REPLACE,
          family == AF_INET ? "add the sandbox's own IPv4 address on lo" : "add the sandbox's own IPv6 address on lo");
}

void add_local_default(int sock, int family, int lo, const uint8_t* source) {
  rtmsg rt{};
  rt.rtm_family = static_cast<unsigned char>(family);
  rt.rtm_dst_len = 0;
  rt.rtm_table = RT_TABLE_MAIN;  // below any more specific route (an interface a test or an operator adds)
  rt.rtm_protocol = RTPROT_STATIC;
  rt.rtm_scope = RT_SCOPE_HOST;
  rt.rtm_type = RTN_LOCAL;
  std::string body(reinterpret_cast<const char*>(&rt), sizeof rt);
  const uint32_t table = RT_TABLE_MAIN, oif = static_cast<uint32_t>(lo);
  add_attr(body, RTA_TABLE, &table, sizeof table);
  add_attr(body, RTA_OIF, &oif, sizeof oif);
  add_attr(body, RTA_PREFSRC, source, family == AF_INET ? 4 : 16);
  request(sock, body, RTM_NEWROUTE, NLM_F_CREATE | NLM_F_REPLACE,
          family == AF_INET ? "add route local 0.0.0.0/0 dev lo" : "add route local ::/0 dev lo");
}

}  // namespace

void add_anyip_routes(int netns_fd, const uint8_t* source4, const uint8_t* source6) {
  in_netns(netns_fd, [&] {
    UniqueFd sock(::socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE));
    if (!sock) throw_errno("netlink socket");
    const unsigned lo = ::if_nametoindex("lo");
    if (lo == 0) throw_errno("find lo in the sandbox's network namespace");
    add_address(sock.get(), AF_INET, static_cast<int>(lo), source4);
    add_address(sock.get(), AF_INET6, static_cast<int>(lo), source6);
    add_local_default(sock.get(), AF_INET, static_cast<int>(lo), source4);
    add_local_default(sock.get(), AF_INET6, static_cast<int>(lo), source6);
  });
}

UniqueFd address_events_socket() {
  UniqueFd s(::socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK, NETLINK_ROUTE));
  if (!s) throw_errno("rtnetlink socket for address events");
  sockaddr_nl a{};
  a.nl_family = AF_NETLINK;
  a.nl_groups = RTMGRP_IPV4_IFADDR | RTMGRP_IPV6_IFADDR | RTMGRP_IPV4_ROUTE | RTMGRP_IPV6_ROUTE;
  if (::bind(s.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) throw_errno("subscribe to address events");
  return s;
}

bool drain_address_events(int fd) {
  bool any = false;
  alignas(nlmsghdr) char buf[16384];
  for (;;) {
    const ssize_t n = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n > 0) {
      int left = static_cast<int>(n);
      for (auto* h = reinterpret_cast<nlmsghdr*>(buf); NLMSG_OK(h, left); h = NLMSG_NEXT(h, left)) {
        if (h->nlmsg_type == RTM_NEWADDR || h->nlmsg_type == RTM_DELADDR) any = true;
        if ((h->nlmsg_type == RTM_NEWROUTE || h->nlmsg_type == RTM_DELROUTE) && h->nlmsg_len >= NLMSG_LENGTH(sizeof(rtmsg))) {
          const unsigned char type = static_cast<const rtmsg*>(NLMSG_DATA(h))->rtm_type;
          any |= type == RTN_LOCAL || type == RTN_ANYCAST;
        }
      }
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == ENOBUFS) {
      any = true;  // events were lost: the caller relists anyway
      continue;
    }
    return any;
  }
}

std::vector<NetnsAddress> netns_local_routes(int netns_fd) {
  std::vector<NetnsAddress> out;
  in_netns(netns_fd, [&] {
    for (const int family : {AF_INET, AF_INET6}) {
      UniqueFd sock(::socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE));
      if (!sock) throw_errno("rtnetlink socket for the local routes");
      // Filtered by the kernel where it can (strict checking, 4.20+): a router's main table may be huge.
      const int one = 1;
      (void)::setsockopt(sock.get(), SOL_NETLINK, NETLINK_GET_STRICT_CHK, &one, sizeof one);
      const timeval limit{2, 0};  // the caller may be an event loop: a kernel that never answers must not hold it
      (void)::setsockopt(sock.get(), SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
      struct {
        nlmsghdr h;
        rtmsg r;
      } req{};
      req.h.nlmsg_len = NLMSG_LENGTH(sizeof req.r);
      req.h.nlmsg_type = RTM_GETROUTE;
      req.h.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
      req.h.nlmsg_seq = 1;
      req.r.rtm_family = static_cast<unsigned char>(family);
      req.r.rtm_table = RT_TABLE_LOCAL;
      if (::send(sock.get(), &req, req.h.nlmsg_len, 0) < 0) throw_errno("list the local routes");
      alignas(nlmsghdr) char buf[32768];
      for (bool done = false; !done;) {
        const ssize_t n = ::recv(sock.get(), buf, sizeof buf, 0);
        if (n < 0) {
          if (errno == EINTR) continue;
          throw_errno("read the local routes");
        }
        int left = static_cast<int>(n);
        if (left == 0) break;
        for (auto* h = reinterpret_cast<nlmsghdr*>(buf); NLMSG_OK(h, left); h = NLMSG_NEXT(h, left)) {
          if (h->nlmsg_type == NLMSG_ERROR && h->nlmsg_len >= NLMSG_LENGTH(sizeof(nlmsgerr))) {
            const int err = -static_cast<const nlmsgerr*>(NLMSG_DATA(h))->error;
            if (err != 0) throw_errno("list the local routes", err);
          }
          // A dump that fails in the kernel says so in its DONE message's payload.
          if (h->nlmsg_type == NLMSG_DONE && h->nlmsg_len >= NLMSG_LENGTH(sizeof(int))) {
            const int err = -*static_cast<const int*>(NLMSG_DATA(h));
            if (err > 0) throw_errno("list the local routes", err);
          }
          if (h->nlmsg_type == NLMSG_DONE || h->nlmsg_type == NLMSG_ERROR) {
            done = true;
            break;
          }
          if (h->nlmsg_type != RTM_NEWROUTE || h->nlmsg_len < NLMSG_LENGTH(sizeof(rtmsg))) continue;
          const auto* r = static_cast<const rtmsg*>(NLMSG_DATA(h));
          uint32_t table = r->rtm_table;
          NetnsAddress a;
          a.family = r->rtm_family == AF_INET ? 4 : 6;
          a.prefix = r->rtm_dst_len;
          bool has_dst = false;
          int attr_len = static_cast<int>(RTM_PAYLOAD(h));
          for (auto* at = RTM_RTA(r); RTA_OK(at, attr_len); at = RTA_NEXT(at, attr_len)) {
            if (at->rta_type == RTA_TABLE && RTA_PAYLOAD(at) >= 4) std::memcpy(&table, RTA_DATA(at), 4);
            if (at->rta_type == RTA_DST && RTA_PAYLOAD(at) == (a.family == 4 ? 4u : 16u)) {
              std::memcpy(a.addr.data(), RTA_DATA(at), RTA_PAYLOAD(at));
              has_dst = true;
            }
          }
          // Local and anycast routes: what the namespace delivers to itself (an IPv6 router's subnet-router
          // anycast address too). A dump interrupted by a change (NLM_F_DUMP_INTR) is not retried here: the
          // change is an event, which lists again.
          if ((r->rtm_type != RTN_LOCAL && r->rtm_type != RTN_ANYCAST) || table != RT_TABLE_LOCAL || r->rtm_family != family)
            continue;
          if (!has_dst && a.prefix != 0) continue;
          out.push_back(a);
        }
      }
    }
  });
  return out;
}

std::vector<NetnsAddress> netns_addresses(int netns_fd) {
  std::vector<NetnsAddress> out;
  in_netns(netns_fd, [&] {
    ifaddrs* list = nullptr;
    if (::getifaddrs(&list) != 0) throw_errno("list the uplink namespace's addresses");
    for (ifaddrs* i = list; i; i = i->ifa_next) {
      if (!i->ifa_addr) continue;
      NetnsAddress a;
      if (i->ifa_addr->sa_family == AF_INET) {
        a.family = 4;
        std::memcpy(a.addr.data(), &reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr, 4);
      } else if (i->ifa_addr->sa_family == AF_INET6) {
        a.family = 6;
        std::memcpy(a.addr.data(), &reinterpret_cast<sockaddr_in6*>(i->ifa_addr)->sin6_addr, 16);
      } else {
        continue;
      }
      out.push_back(a);
    }
    ::freeifaddrs(list);
  });
  return out;
}

}  // namespace sandlet::sys
