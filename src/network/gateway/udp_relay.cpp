// UDP through the gateway (datagrams to the sandbox's resolver address go to the name gate instead): datagrams steered to the sandbox's UDP socket carry their original destination
// (IP_RECVORIGDSTADDR / IPV6_RECVORIGDSTADDR). Each (source, destination) pair is a flow with a connected
// socket in the uplink namespace and a reply socket bound to the destination inside the sandbox's
// namespace (the address is local there thanks to the AnyIP route), so replies come from the address and
// port the sandbox sent to, as a connected UDP socket expects.
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdio>
#include <cstring>

#include "common/error.hpp"
#include "network/gateway/gateway.hpp"
#include "network/gateway/limits.hpp"

namespace sandlet::netgw {

void SandboxPort::on_datagram(Listener& l) {
  static thread_local std::string buf(kMaxDatagram, '\0');
  for (int i = 0; i < 64; ++i) {
    sockaddr_storage from{};
    iovec iov{buf.data(), buf.size()};
    alignas(cmsghdr) char control[256];
    msghdr msg{};
    msg.msg_name = &from;
    msg.msg_namelen = sizeof from;
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    const ssize_t n = ::recvmsg(l.fd.get(), &msg, MSG_DONTWAIT);
    if (n < 0) return;
    std::optional<Endpoint> dst;
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
      if ((c->cmsg_level == SOL_IP && c->cmsg_type == IP_ORIGDSTADDR) ||
          (c->cmsg_level == SOL_IPV6 && c->cmsg_type == IPV6_ORIGDSTADDR)) {
        sockaddr_storage ss{};
        std::memcpy(&ss, CMSG_DATA(c), std::min<size_t>(c->cmsg_len - CMSG_LEN(0), sizeof ss));
        dst = endpoint_of(ss);
      }
    }
    if (!dst || (msg.msg_flags & MSG_TRUNC)) continue;
    const Endpoint client = endpoint_of(from);
    const std::string payload(buf.data(), static_cast<size_t>(n));
    const bool dns = is_resolver(*dst);
    auto key = std::make_pair(client, *dst);
    auto it = flows_.find(key);
    if (dns && !dns_) {
      refused_for(proto::kGwRefusedPolicy, "udp", *dst, "no resolver");
      continue;
    }
    if (!dns) {
      if (const std::string why = refuse(*dst, kNetUdp); !why.empty()) {
        refused_for(proto::kGwRefusedPolicy, "udp", *dst, why);
        continue;
      }
      if (rate_.available() < payload.size()) {
        count(proto::kGwRefusedBudget);  // over the egress rate: dropped as a link would (not logged)
        continue;
      }
    }
    if (it == flows_.end()) {
      if (flows_.size() >= kUdpFlowsPerSandbox) {
        refused_for(proto::kGwRefusedBudget, "udp", *dst, "too many UDP flows of this sandbox");
        continue;
      }
      if (gw_.udp_total >= kUdpFlowsPerNode && connection_fds() + 2 > gw_.floor()) {
        refused_for(proto::kGwRefusedNode, "udp", *dst, "too many UDP flows on the node");
        continue;
      }
      if (!admit(2, *dst, "udp")) continue;
    }
    if (dns) {
      // To the resolver before a flow is made: a query over its bounds (dropped and logged there) costs no
      // socket. The answer comes on a later turn of the loop, to the flow made below (none: it is lost, and
      // the sandbox's library asks again).
      Gateway* gw = &gw_;
      const std::string id = id_;
      if (!gw_.dns().submit(dns_, std::vector<uint8_t>(payload.begin(), payload.end()), net::DnsTransport::kUdp,
                            [gw, id, key](std::vector<uint8_t> reply) {
                              if (SandboxPort* p = gw->find(id)) p->dns_udp_reply(key, reply);
                            }))
        continue;
    }
    if (it == flows_.end()) {
      auto f = std::make_unique<UdpFlow>();
      f->port = this;
      f->client = client;
      f->dst = *dst;
      try {
        sockaddr_storage ss;
        socklen_t len = sockaddr_of(*dst, ss);
        f->reply = socket_inside(dst->family == 4 ? AF_INET : AF_INET6, SOCK_DGRAM);
        const int one = 1;
        (void)::setsockopt(f->reply.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        // IPv6 binds only to addresses assigned to an interface, not to those a local route makes local (as
        // IPv4 does): free-bind lets the reply socket take the destination's address all the same.
        if (dst->family == 6) {
          (void)::setsockopt(f->reply.get(), IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
          (void)::setsockopt(f->reply.get(), IPPROTO_IPV6, IPV6_FREEBIND, &one, sizeof one);
        }
        if (::bind(f->reply.get(), reinterpret_cast<sockaddr*>(&ss), len) != 0) throw_errno("bind the reply socket");
        if (!dns) {
          f->outer.reset(::socket(dst->family == 4 ? AF_INET : AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
          if (!f->outer || ::connect(f->outer.get(), reinterpret_cast<sockaddr*>(&ss), len) != 0) throw_errno("connect out");
          gw_.loop().add(f->outer.get(), EPOLLIN, f.get());
        }
      } catch (const std::exception& e) {
        refused_for(proto::kGwRefusedError, "udp", *dst, e.what());
        continue;
      }
      it = flows_.emplace(key, std::move(f)).first;  // (first: a failed emplace leaves the counts right)
      ++gw_.udp_total;
      count(proto::kGwUdpFlows);
      sync_floor();
    }
    UdpFlow& f = *it->second;
    f.last_ms = Gateway::now_ms();
    if (dns) {
      // The flow's reply socket (bound to the resolver address) sends the answer, so it comes from where
      // the sandbox sent the query; the flow goes with its last answer.
      ++f.dns_pending;
      continue;
    }
    if (::send(f.outer.get(), payload.data(), payload.size(), MSG_DONTWAIT) > 0) {
      rate_.spend(payload.size());
      count(proto::kGwBytesOut, payload.size());
    }
  }
}

void SandboxPort::dns_udp_reply(const std::pair<Endpoint, Endpoint>& key, const std::vector<uint8_t>& reply) {
  auto it = flows_.find(key);
  if (it == flows_.end()) return;
  UdpFlow& f = *it->second;
  if (!reply.empty()) {
    sockaddr_storage ss;
    const socklen_t len = sockaddr_of(f.client, ss);
    (void)::sendto(f.reply.get(), reply.data(), reply.size(), MSG_DONTWAIT, reinterpret_cast<sockaddr*>(&ss), len);
  }
  // Resolver libraries use a fresh port per lookup: a flow per query would fill the sandbox's flow table.
  if (--f.dns_pending <= 0) drop_flow(&f);
}

void SandboxPort::on_flow_reply(UdpFlow& f) {
  static thread_local std::string buf(kMaxDatagram, '\0');
  sockaddr_storage ss;
  const socklen_t len = sockaddr_of(f.client, ss);
  for (int i = 0; i < 64; ++i) {
    const ssize_t n = ::recv(f.outer.get(), buf.data(), buf.size(), MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EAGAIN || errno == EINTR) return;
      return drop_flow(&f);  // e.g. ECONNREFUSED from an ICMP port unreachable
    }
    f.last_ms = Gateway::now_ms();
    count(proto::kGwBytesIn, static_cast<uint64_t>(n));
    (void)::sendto(f.reply.get(), buf.data(), static_cast<size_t>(n), MSG_DONTWAIT, reinterpret_cast<sockaddr*>(&ss), len);
  }
}

void SandboxPort::drop_flow(UdpFlow* f) {
  auto it = flows_.find(std::make_pair(f->client, f->dst));
  if (it == flows_.end()) return;
  if (it->second->outer) gw_.loop().remove(it->second->outer.get());
  --gw_.udp_total;
  gw_.loop().retire(std::move(it->second));
  flows_.erase(it);
  sync_floor();
}

}  // namespace sandlet::netgw
