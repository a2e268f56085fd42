#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

#include "common/error.hpp"
#include "network/gateway/gateway.hpp"
#include "network/gateway/limits.hpp"
#include "policy/net_protect.hpp"
#include "policy/net_sk_lookup.hpp"
#include "sys/bpf.hpp"

namespace sandlet::netgw {
namespace {

void set_int(int fd, int level, int opt, int v) { (void)::setsockopt(fd, level, opt, &v, sizeof v); }

bool is_loopback(const Endpoint& e) {
  if (e.family == 4) return e.addr[0] == 127;
  static const uint8_t one[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
  return std::memcmp(e.addr.data(), one, 16) == 0;
}

// Unspecified, multicast, broadcast and IPv4-mapped forms: nothing the gateway should connect to.
bool is_unroutable(const Endpoint& e) {
  static const uint8_t zero[16] = {};
  if (e.family == 4)
    return std::memcmp(e.addr.data(), zero, 4) == 0 || e.addr[0] >= 224;
  static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  return std::memcmp(e.addr.data(), zero, 16) == 0 || e.addr[0] == 0xff || std::memcmp(e.addr.data(), mapped, 12) == 0;
}

}  // namespace

SandboxPort::SandboxPort(Gateway& gw, AttachRequest req)
    : gw_(gw), id_(std::move(req.id)), netns_(std::move(req.netns)), pidfd_(std::move(req.pidfd)),
      cgroup_(std::move(req.cgroup)), exact_(std::move(req.exact)), publish_(std::move(req.publish)),
      rate_(req.egress_rate), counters_fd_(std::move(req.counters)), request_(std::move(req.request)) {
  filter_ = policy::NetFilter::open_attached(cgroup_.get());
  if (!filter_) throw Error(Code::kFailedPrecondition, "netgw attach " + id_ + ": the sandbox has no allowlist filter");
  // The node's protected ranges before anything of the sandbox runs (its filter was made with the fixed
  // ones only), kept current from here on (Gateway::relist_uplink).
  protect(gw_.protected_ranges());
  // A gateway started after another died carries on from what that one counted.
  proto::NetgwCounters kept{};
  if (counters_fd_ && ::pread(counters_fd_.get(), &kept, sizeof kept, 0) == static_cast<ssize_t>(sizeof kept) &&
      kept.magic == proto::kNetgwCountersMagic && kept.version == proto::kNetgwCountersVersion)
    for (uint32_t i = 0; i < proto::kGwRestarts; ++i) counters_[i] = kept.v[i];
  counters_dirty_ = true;
  if (!req.upstreams.empty()) {
    sys::UniqueFd group(::fcntl(cgroup_.get(), F_DUPFD_CLOEXEC, 3));
    if (!group) throw_errno("netgw attach " + id_ + ": dup the cgroup fd");
    dns_ = std::make_shared<DnsContext>(id_, std::move(group), std::move(req.dns_log));
    set_resolver(std::move(req.names), std::move(req.upstreams));
  }
  // Published ports first: a host port in use fails the attach before anything is steered.
  for (size_t i = 0; i < publish_.size(); ++i) {
    const Published& p = publish_[i];
    sys::UniqueFd s(::socket(p.host.family == 4 ? AF_INET : AF_INET6, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (!s) throw_errno("netgw publish socket");
    set_int(s.get(), SOL_SOCKET, SO_REUSEADDR, 1);
    if (p.host.family == 6) set_int(s.get(), IPPROTO_IPV6, IPV6_V6ONLY, 1);
    sockaddr_storage ss;
    const socklen_t len = sockaddr_of(p.host, ss);
    if (::bind(s.get(), reinterpret_cast<sockaddr*>(&ss), len) != 0) {
      const int e = errno;
      throw Error(e == EADDRINUSE ? Code::kAlreadyExists : code_from_errno(e),
                  "invalid spec field 'network.publish[" + std::to_string(i) + "].host_port': " + to_string(p.host) +
                      (e == EADDRINUSE ? " is in use on the host" : std::string(": ") + std::strerror(e)));
    }
    if (::listen(s.get(), 128) != 0) throw_errno("netgw publish listen " + to_string(p.host));
    add_listener(2, std::move(s), i);
  }
  // The steering: listeners inside the sandbox's namespace, in a sockmap its sk_lookup program reads.
  sys::BpfMapSpec ms;
  ms.type = BPF_MAP_TYPE_SOCKMAP;
  ms.key_size = 4;
  ms.value_size = 8;
  ms.max_entries = policy::kGwSlotCount;
  ms.name = "sl_netgw_socks";
  sockmap_ = sys::bpf_map_create(ms);
  const struct {
    uint32_t slot;
    int family, type;
  } socks[] = {{policy::kGwTcp4, AF_INET, SOCK_STREAM}, {policy::kGwTcp6, AF_INET6, SOCK_STREAM},
               {policy::kGwUdp4, AF_INET, SOCK_DGRAM}, {policy::kGwUdp6, AF_INET6, SOCK_DGRAM}};
  for (const auto& k : socks) {
    sys::UniqueFd s = socket_inside(k.family, k.type);
    sockaddr_storage ss{};
    socklen_t len;
    if (k.family == AF_INET) {
      auto& a = reinterpret_cast<sockaddr_in&>(ss);
      a.sin_family = AF_INET;
      a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      len = sizeof a;
      if (k.type == SOCK_DGRAM) set_int(s.get(), IPPROTO_IP, IP_RECVORIGDSTADDR, 1);
    } else {
      auto& a = reinterpret_cast<sockaddr_in6&>(ss);
      a.sin6_family = AF_INET6;
      a.sin6_addr = in6addr_loopback;
      len = sizeof a;
      set_int(s.get(), IPPROTO_IPV6, IPV6_V6ONLY, 1);
      if (k.type == SOCK_DGRAM) set_int(s.get(), IPPROTO_IPV6, IPV6_RECVORIGDSTADDR, 1);
    }
    // Bound to the sandbox's loopback on an ephemeral port: reachable there too, where the destination
    // check refuses loopback destinations.
    if (::bind(s.get(), reinterpret_cast<sockaddr*>(&ss), len) != 0) throw_errno("netgw bind inside " + id_);
    if (k.type == SOCK_STREAM && ::listen(s.get(), 1024) != 0) throw_errno("netgw listen inside " + id_);
    const uint64_t fd = static_cast<uint64_t>(s.get());
    sys::bpf_map_update(sockmap_.get(), &k.slot, &fd);
    add_listener(k.type == SOCK_STREAM ? 0 : 1, std::move(s));
  }
  prog_ = sys::bpf_prog_load(BPF_PROG_TYPE_SK_LOOKUP, BPF_SK_LOOKUP, policy::gateway_sk_lookup_program(sockmap_.get()),
                             "sl_netgw_steer");
  link_ = sys::bpf_link_create(prog_.get(), netns_.get(), BPF_SK_LOOKUP);
  // The link holds the program and the program the sockmap; the denial ring is the library's to read; the
  // cgroup served the look-up (the resolver keeps a copy): what an attached sandbox holds stays at
  // kFdsPerSandbox (limits.hpp).
  prog_.reset();
  sockmap_.reset();
  cgroup_.reset();
  filter_->keep_lookups_only();
  gw_.loop().add(pidfd_.get(), EPOLLIN, this);
  std::fprintf(stderr, "sandlet-netgw: attached %s\n", id_.c_str());
}

SandboxPort::~SandboxPort() {
  release_accounting();
  gw_.dns_tcp_total -= dns_tcp_.size();
  dns_tcp_.clear();
  gw_.loop().remove(pidfd_.get());
  for (auto& l : listeners_) gw_.loop().remove(l->fd.get());
  for (auto& [k, f] : flows_) {
    gw_.loop().remove(f->outer.get());
    --gw_.udp_total;
  }
  for (auto& [p, r] : relays_) {
    r->close(true);
    --gw_.tcp_total;
  }
}

void SandboxPort::on_event(uint32_t) { gw_.detach(id_, "sandbox ended"); }

void SandboxPort::set_resolver(std::vector<NetAllowRule> names, std::vector<net::DnsUpstream> upstreams) {
  if (!dns_) return;  // attached without one: an update cannot add it (the sandbox has no resolv.conf for it)
  dns_->set_policy(upstreams.empty() ? nullptr : std::make_shared<const DnsPolicy>(std::move(names), std::move(upstreams)),
                   gw_.protected_ranges());
}

void SandboxPort::update(PolicyUpdate u) {
  exact_ = std::move(u.exact);
  set_resolver(std::move(u.names), std::move(u.upstreams));
}

void SandboxPort::add_listener(int kind, sys::UniqueFd fd, size_t index) {
  auto l = std::make_unique<Listener>();
  l->port = this;
  l->kind = kind;
  l->index = index;
  l->fd = std::move(fd);
  gw_.loop().add(l->fd.get(), EPOLLIN, l.get());
  listeners_.push_back(std::move(l));
}

sys::UniqueFd SandboxPort::socket_inside(int family, int type) {
  if (::setns(netns_.get(), CLONE_NEWNET) != 0) throw_errno("netgw: enter the namespace of " + id_);
  sys::UniqueFd s(::socket(family, type | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  const int e = errno;
  // Back home before anything else: every other socket of the gateway belongs to the uplink.
  if (::setns(gw_.uplink_netns(), CLONE_NEWNET) != 0) {
    std::fprintf(stderr, "sandlet-netgw: cannot return to the uplink namespace: %s\n", std::strerror(errno));
    std::abort();  // the gateway's own process: staying in a sandbox's namespace would send its traffic there
  }
  if (!s) throw_errno("netgw socket inside " + id_, e);
  return s;
}

bool SandboxPort::protect(const std::vector<policy::NetProtectedRange>& ranges) { return filter_->set_protected(ranges); }

bool SandboxPort::protect_change(const std::vector<policy::NetProtectedRange>& add,
                                 const std::vector<policy::NetProtectedRange>& remove) {
  return filter_->change_protected(add, remove);
}

std::string SandboxPort::refuse(const Endpoint& dst, uint8_t proto) const {
  if (is_loopback(dst)) return "a loopback destination";
  if (is_unroutable(dst)) return "an unroutable destination";
  // A protected range (the uplink's own, link-local, metadata): only a rule naming the address exactly. The
  // kernel's protected ranges, which allows() reads, say so; a filter made by an older version has none, so
  // the gateway's own list decides for it.
  bool exact_only = false;
  if (!filter_->holds_protect()) {
    std::array<uint8_t, 16> a{};
    std::memcpy(a.data(), dst.addr.data(), dst.family == 4 ? 4 : 16);
    const policy::NetTrieKey key = policy::net_key_of(dst.family, a, dst.family == 4 ? 32 : 128);
    for (const policy::NetProtectedRange& r : gw_.protected_ranges())
      exact_only |= policy::net_key_contains(policy::net_key_of(r.family, r.addr, r.prefix), key);
  }
  if (exact_only) {
    bool named = false;
    for (const Endpoint& e : exact_) named |= e.family == dst.family && e.addr == dst.addr;
    if (!named) return "a protected address (the uplink's own, link-local or a metadata endpoint)";
  }
  try {
    if (!filter_->allows(dst.family, dst.addr.data(), proto, dst.port)) return "not allowed by the sandbox's rules";
  } catch (const std::exception& e) {
    return std::string("the allowlist could not be read: ") + e.what();  // e.g. out of descriptors: refuse
  }
  return "";
}

void SandboxPort::refused_for(proto::NetgwCounter kind, const char* proto, const Endpoint& dst, const std::string& why) {
  count(kind);
  // The log is the node's: a sandbox that keeps trying gets its first refusals logged, then counted only.
  if (++logged_ <= 32)
    std::fprintf(stderr, "sandlet-netgw: %s: refused %s %s: %s\n", id_.c_str(), proto, to_string(dst).c_str(), why.c_str());
}

bool SandboxPort::admit(size_t fds, const Endpoint& dst, const char* proto) {
  switch (gw_.admits(*this, fds)) {
    case FdVerdict::kAdmit: return true;
    case FdVerdict::kOverSandbox:
      refused_for(proto::kGwRefusedBudget, proto, dst, "over the sandbox's descriptor budget");
      return false;
    case FdVerdict::kNodeFull:
      refused_for(proto::kGwRefusedNode, proto, dst, "the gateway's descriptors are in use");
      return false;
  }
  return false;
}

void SandboxPort::release_accounting() {
  if (released_) return;
  released_ = true;
  gw_.fixed_fds -= fixed_fds();
  gw_.floors_used -= floor_accounted_;
  floor_accounted_ = 0;
}

void SandboxPort::sync_floor() {
  if (released_) return;  // detached: the node no longer counts it
  const size_t now = std::min(connection_fds(), gw_.floor());
  gw_.floors_used += now;
  gw_.floors_used -= floor_accounted_;
  floor_accounted_ = now;
}

void SandboxPort::count(proto::NetgwCounter c, uint64_t n) {
  counters_[c] += n;
  counters_dirty_ = true;
  gw_.count(c, n);
}

void SandboxPort::flush_counters() {
  counters_dirty_ = false;
  next_flush_ms_ = Gateway::now_ms() + kCountersFlushMs;
  if (!counters_fd_) return;
  proto::NetgwCounters c{};
  c.magic = proto::kNetgwCountersMagic;
  c.version = proto::kNetgwCountersVersion;
  for (uint32_t i = 0; i < proto::kGwRestarts; ++i) c.v[i] = counters_[i];
  (void)!::pwrite(counters_fd_.get(), &c, sizeof c, 0);
}

void SandboxPort::on_listener(Listener& l) {
  if (retired) return;  // detached earlier in this batch: nothing new for it
  if (l.kind == 0) accept_egress(l);
  else if (l.kind == 1) on_datagram(l);
  else accept_published(l);
}

void SandboxPort::accept_egress(Listener& l) {
  for (int i = 0; i < 64; ++i) {
    sys::UniqueFd in(::accept4(l.fd.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
    if (!in) {
      if (errno == EMFILE || errno == ENFILE) {
        refused_for(proto::kGwRefusedNode, "tcp", Endpoint{}, "the gateway process is out of descriptors");
        gw_.shed(l.fd.get());
        continue;
      }
      return;
    }
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    if (::getsockname(in.get(), reinterpret_cast<sockaddr*>(&ss), &len) != 0) continue;
    const Endpoint dst = endpoint_of(ss);  // the original destination: sk_lookup kept it
    if (is_resolver(dst)) {
      accept_dns_tcp(std::move(in));
      continue;
    }
    auto reset = [&] {
      const linger lg{1, 0};
      (void)::setsockopt(in.get(), SOL_SOCKET, SO_LINGER, &lg, sizeof lg);  // the sandbox sees a reset
    };
    if (const std::string why = refuse(dst, kNetTcp); !why.empty()) {
      refused_for(proto::kGwRefusedPolicy, "tcp", dst, why);
      reset();
      continue;
    }
    if (relays_.size() >= kTcpPerSandbox) {
      refused_for(proto::kGwRefusedBudget, "tcp", dst, "too many connections of this sandbox");
      reset();
      continue;
    }
    if (gw_.tcp_total >= kTcpPerNode && connection_fds() + 2 > gw_.floor()) {  // (a floor is kept even here)
      refused_for(proto::kGwRefusedNode, "tcp", dst, "too many connections on the node");
      reset();
      continue;
    }
    if (!admit(2, dst, "tcp")) {
      reset();
      continue;
    }
    sys::UniqueFd out(::socket(dst.family == 4 ? AF_INET : AF_INET6, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    const socklen_t dl = sockaddr_of(dst, ss);
    if (!out || (::connect(out.get(), reinterpret_cast<sockaddr*>(&ss), dl) != 0 && errno != EINPROGRESS)) {
      refused_for(proto::kGwRefusedError, "tcp", dst, std::string("connect out: ") + std::strerror(errno));
      reset();
      continue;
    }
    auto r = std::make_unique<TcpRelay>(*this, std::move(in), std::move(out), true);
    TcpRelay* p = r.get();
    relays_[p] = std::move(r);
    ++gw_.tcp_total;
    sync_floor();
    count(proto::kGwTcpAccepted);
    try {
      p->start();
    } catch (const std::exception& e) {
      refused_for(proto::kGwRefusedError, "tcp", dst, e.what());
      relay_done(p);  // closes both sockets: the sandbox sees its connection end
    }
  }
}

void SandboxPort::accept_published(Listener& l) {
  for (int i = 0; i < 64; ++i) {
    sys::UniqueFd out(::accept4(l.fd.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
    if (!out) {
      if (errno == EMFILE || errno == ENFILE) {
        refused_for(proto::kGwRefusedNode, "published tcp", publish_[l.index].host, "the gateway process is out of descriptors");
        gw_.shed(l.fd.get());
        continue;
      }
      return;
    }
    const Endpoint host = publish_[l.index].host;  // (what a refusal is logged with)
    if (relays_.size() >= kTcpPerSandbox) {
      refused_for(proto::kGwRefusedBudget, "published tcp", host, "too many connections of this sandbox");
      continue;
    }
    if (!admit(2, host, "published tcp")) continue;
    sys::UniqueFd in;
    try {
      in = socket_inside(AF_INET, SOCK_STREAM);
    } catch (const Error& e) {
      refused_for(proto::kGwRefusedError, "published tcp", host, e.what());
      continue;
    }
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(publish_[l.index].inside);
    if (::connect(in.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 && errno != EINPROGRESS) {
      refused_for(proto::kGwRefusedError, "published tcp", host, std::string("connect inside: ") + std::strerror(errno));
      continue;
    }
    // Here the connecting side is the inner one: its connect() completes in the sandbox's namespace.
    auto r = std::make_unique<TcpRelay>(*this, std::move(in), std::move(out), false);
    TcpRelay* p = r.get();
    relays_[p] = std::move(r);
    ++gw_.tcp_total;
    sync_floor();
    try {
      p->start();
    } catch (const std::exception&) {
      relay_done(p);
    }
  }
}

void SandboxPort::relay_done(TcpRelay* r) {
  auto it = relays_.find(r);
  if (it == relays_.end()) return;
  --gw_.tcp_total;
  gw_.loop().retire(std::move(it->second));
  relays_.erase(it);
  sync_floor();
}

void SandboxPort::tick(int64_t now) {
  std::vector<TcpRelay*> rs;
  for (auto& [p, r] : relays_) rs.push_back(p);
  for (TcpRelay* r : rs) r->tick(now);
  std::vector<UdpFlow*> idle;
  for (auto& [k, f] : flows_)
    if (now - f->last_ms > kUdpIdleMs) idle.push_back(f.get());
  for (UdpFlow* f : idle) drop_flow(f);
  std::vector<DnsTcp*> sessions;
  for (auto& [serial, d] : dns_tcp_) sessions.push_back(d.get());
  for (DnsTcp* d : sessions) d->tick(now);
  if (dns_ && now >= next_prune_ms_) {
    if (next_prune_ms_ != 0) gw_.dns().prune(dns_);
    next_prune_ms_ = now + kDnsPruneMs;
  }
  if (counters_dirty_ && now >= next_flush_ms_) flush_counters();
  if (protect_stale && now >= next_protect_retry_ms_) {
    try {
      protect(gw_.protected_ranges());
      protect_stale = false;
    } catch (const std::exception& e) {
      next_protect_retry_ms_ = now + 1000;  // once a second until it takes
      if (++logged_ <= 32) std::fprintf(stderr, "sandlet-netgw: %s: protected ranges: %s\n", id_.c_str(), e.what());
    }
  }
}

}  // namespace sandlet::netgw
