// The node's network gateway (docs/NETWORK.md, "Connectivity"): one process per runtime root that relays
// the TCP connections and UDP datagrams of every attached sandbox to the uplink namespace, after checking
// each destination again against the sandbox's allowlist (read live from its cgroup filter).
//
// Per sandbox (SandboxPort): four listening sockets made inside the sandbox's network namespace (a socket
// keeps the namespace it was made in), a sockmap holding them and the sk_lookup program that steers every
// non-loopback lookup of that namespace to them (policy/net_sk_lookup.hpp), linked to the namespace by a
// BPF link this process holds. The sandbox's init pidfd is watched: when the sandbox ends without a
// detach (its owner crashed), everything of it is dropped here too.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "network/dns/dns_upstream.hpp"
#include "network/gateway/dns_service.hpp"
#include "network/gateway/event_loop.hpp"
#include "network/gateway/fd_budget.hpp"
#include "network/gateway/rate_limit.hpp"
#include "network/gateway/sockaddr.hpp"
#include "policy/net_filter.hpp"
#include "proto/netgw_counters.hpp"
#include "sys/fd.hpp"
#include "sys/rtnetlink.hpp"

namespace sandlet::netgw {

class Gateway;
class Journal;
class SandboxPort;

struct Published {
  Endpoint host;          // address:host_port in the uplink namespace
  uint16_t inside = 0;    // 127.0.0.1:inside in the sandbox's namespace
};

struct AttachRequest {
  std::string id;
  sys::UniqueFd netns, pidfd, cgroup;
  std::vector<Endpoint> exact;  // addresses a rule names exactly (/32, /128): the only uplink ones allowed
  std::vector<Published> publish;
  uint64_t egress_rate = 0;     // bytes/s, 0 = unlimited
  // The resolver (a policy with `dns`: upstreams given): its rules by name, upstreams, and the DNS log
  // (may be invalid).
  std::vector<NetAllowRule> names;
  std::vector<net::DnsUpstream> upstreams;
  sys::UniqueFd dns_log;
  sys::UniqueFd counters;  // the sandbox's counters file (proto/netgw_counters.hpp; may be invalid)
  std::string request;     // the attach request as received: what a restarted gateway is given again
};

// The parts of an attach request that a `net update` may change.
struct PolicyUpdate {
  std::vector<Endpoint> exact;
  std::vector<NetAllowRule> names;
  std::vector<net::DnsUpstream> upstreams;
};

// One TCP connection to the sandbox's resolver address: length-prefixed queries, each decided by the
// name gate (DnsService) and answered in order, up to kDnsTcpQueries, closed when idle.
class DnsTcp final : public Handler {
 public:
  DnsTcp(SandboxPort& owner, uint64_t serial, sys::UniqueFd fd, int64_t now_ms);
  ~DnsTcp() override;
  void on_event(uint32_t events) override;
  void reply(std::vector<uint8_t> bytes);
  void tick(int64_t now_ms);

 private:
  void next();
  void flush();
  void watch();  // the epoll interest for the current state
  void finish();
  SandboxPort& owner_;
  EventLoop& loop_;  // (not through owner_: the destructor may run after the port's)
  uint64_t serial_;
  sys::UniqueFd fd_;
  std::string in_, out_;
  bool waiting_ = false, eof_ = false, done_ = false;
  size_t queries_ = 0;
  int64_t deadline_ms_;
};

// One relayed TCP connection: `inner` in the sandbox's namespace, `outer` towards the destination.
class TcpRelay final : public Handler {
 public:
  TcpRelay(SandboxPort& owner, sys::UniqueFd inner, sys::UniqueFd outer, bool inner_is_client);
  ~TcpRelay() override;
  void on_event(uint32_t) override {}
  void start();
  void on_inner(uint32_t events);
  void on_outer(uint32_t events);
  void tick(int64_t now_ms);  // connect deadline, rate-limit resume
  void close(bool reset);  // drops both sockets (the owner's destructor; otherwise finish())

 private:
  struct Side final : Handler {
    TcpRelay* relay;
    bool inner;
    void on_event(uint32_t e) override { inner ? relay->on_inner(e) : relay->on_outer(e); }
  };
  void on_side(bool inner, uint32_t events);
  bool move(int from, int to, std::string& buf, bool& from_eof, bool& to_shut, uint64_t cap, uint64_t& counter);
  void pump();
  void update_interest();
  void finish(bool reset);  // close, and the owner forgets this relay
  SandboxPort& owner_;
  sys::UniqueFd inner_, outer_;
  Side inner_side_, outer_side_;
  bool connecting_inner_;   // which side's non-blocking connect() is pending (the inner for published ports)
  bool connecting_ = true;
  int64_t deadline_ms_;
  std::string out_buf_, in_buf_;  // sandbox -> outside, outside -> sandbox
  bool inner_eof_ = false, outer_eof_ = false, inner_shut_ = false, outer_shut_ = false;
  bool throttled_ = false;
  bool closed_ = false;
};

class SandboxPort final : public Handler {
 public:
  SandboxPort(Gateway& gw, AttachRequest req);
  ~SandboxPort() override;
  void on_event(uint32_t events) override;  // the init's pidfd: the sandbox ended
  const std::string& id() const { return id_; }
  Gateway& gateway() { return gw_; }
  RateLimit& rate() { return rate_; }
  // Refusal reason for a destination, or "" when it may be relayed.
  std::string refuse(const Endpoint& dst, uint8_t proto) const;
  // Whether a new connection or flow (`fds` descriptors) may be opened now; counts and logs a refusal.
  bool admit(size_t fds, const Endpoint& dst, const char* proto);
  // Counts a refusal of `kind` (proto::NetgwCounter) and logs the sandbox's first ones.
  void refused_for(proto::NetgwCounter kind, const char* proto, const Endpoint& dst, const std::string& why);
  // Descriptors this sandbox's connections, flows and resolver sessions hold (its fixed ones excepted).
  size_t connection_fds() const { return 2 * relays_.size() + 2 * flows_.size() + dns_tcp_.size(); }
  // What it holds whatever it does (limits.hpp), published ports' listeners included.
  size_t fixed_fds() const { return kFdsPerSandbox + (dns_ ? kFdsPerResolver : 0) + publish_.size(); }
  // Brings the node's count of used floors up to date after a connection, flow or session came or went.
  void sync_floor();
  // Takes it out of the node's descriptor counts (at detach: its own destructor runs later, at the end of
  // the loop's batch); once only.
  void release_accounting();
  // Its protected ranges: the node's (at attach), then as the uplink's addresses change (false: a filter of
  // an older version).
  bool protect(const std::vector<policy::NetProtectedRange>& ranges);
  bool protect_change(const std::vector<policy::NetProtectedRange>& add, const std::vector<policy::NetProtectedRange>& remove);
  bool protect_stale = false;  // a change failed to reach its map: tick() writes the whole set again
  void count(proto::NetgwCounter c, uint64_t n = 1);  // the sandbox's and the node's
  void flush_counters();
  sys::UniqueFd socket_inside(int family, int type);  // made in the sandbox's namespace
  void relay_done(TcpRelay* r);
  void tick(int64_t now_ms);
  size_t connections() const { return relays_.size(); }
  size_t flows() const { return flows_.size(); }
  uint64_t counter(proto::NetgwCounter c) const { return counters_[c]; }
  const std::string& request() const { return request_; }
  void set_request(std::string r) { request_ = std::move(r); }
  // A `net update`: the exact rules and the resolver's policy (the kernel rules were swapped by the caller).
  void update(PolicyUpdate u);
  // From the DNS workers' completions (loop thread): a UDP reply to the flow `key`, a TCP one to session `serial`.
  void dns_udp_reply(const std::pair<Endpoint, Endpoint>& key, const std::vector<uint8_t>& reply);
  void dns_tcp_reply(uint64_t serial, std::vector<uint8_t> reply);
  void dns_tcp_done(uint64_t serial);
  const std::shared_ptr<DnsContext>& dns() const { return dns_; }

 private:
  struct Listener final : Handler {
    SandboxPort* port;
    int kind;  // 0 tcp (egress), 1 udp, 2 publish
    size_t index = 0;
    sys::UniqueFd fd;
    void on_event(uint32_t) override { port->on_listener(*this); }
  };
  struct UdpFlow final : Handler {
    SandboxPort* port;
    Endpoint client, dst;
    sys::UniqueFd outer;   // connected to dst from the uplink namespace
    sys::UniqueFd reply;   // bound to dst inside the sandbox's namespace: replies come from there
    int64_t last_ms = 0;
    int dns_pending = 0;  // a resolver flow: queries not answered yet (the flow goes with the last answer)
    void on_event(uint32_t) override { port->on_flow_reply(*this); }
  };
  void on_listener(Listener& l);
  void accept_egress(Listener& l);
  void accept_published(Listener& l);
  void on_datagram(Listener& l);
  void accept_dns_tcp(sys::UniqueFd in);
  void set_resolver(std::vector<NetAllowRule> names, std::vector<net::DnsUpstream> upstreams);
  void on_flow_reply(UdpFlow& f);
  void drop_flow(UdpFlow* f);
  void add_listener(int kind, sys::UniqueFd fd, size_t index = 0);

  Gateway& gw_;
  std::string id_;
  sys::UniqueFd netns_, pidfd_, cgroup_;
  std::optional<policy::NetFilter> filter_;
  std::vector<Endpoint> exact_;
  std::vector<Published> publish_;
  RateLimit rate_;
  sys::UniqueFd sockmap_, prog_, link_;
  std::vector<std::unique_ptr<Listener>> listeners_;
  std::map<TcpRelay*, std::unique_ptr<TcpRelay>> relays_;
  std::map<std::pair<Endpoint, Endpoint>, std::unique_ptr<UdpFlow>> flows_;
  std::shared_ptr<DnsContext> dns_;  // null: the sandbox has no resolver
  std::map<uint64_t, std::unique_ptr<DnsTcp>> dns_tcp_;
  uint64_t dns_tcp_serial_ = 0;
  int64_t next_prune_ms_ = 0;
  sys::UniqueFd counters_fd_;
  uint64_t counters_[proto::kGwCounterCount] = {};
  bool counters_dirty_ = false;
  int64_t next_flush_ms_ = 0;
  uint64_t logged_ = 0;  // refusals written to the node's log (the first few only)
  size_t floor_accounted_ = 0;  // this sandbox's share of Gateway::floors_used
  bool released_ = false;       // release_accounting() ran
  int64_t next_protect_retry_ms_ = 0;
  std::string request_;
};

struct GatewayOptions {
  std::string root;
  std::string uplink_netns;  // "" = the namespace the gateway starts in (the host's)
  int idle_exit_ms = 3000;   // no sandbox attached for this long: exit
  int control_fd = -1;       // the listening control socket (the supervisor's, kept across restarts)
  Journal* journal = nullptr;  // where attaches are remembered for a restart (null: unsupervised)
  uint64_t restarts = 0;     // how many gateways the supervisor started before this one
};

class Gateway final : public Handler {
 public:
  explicit Gateway(GatewayOptions o);
  // Attaches what the supervisor kept from the gateway before this one (replay.hpp), then serves until
  // idle; writes one byte to `ready_fd` once it serves.
  int run(int ready_fd);
  void on_event(uint32_t events) override;  // the control socket
  EventLoop& loop() { return loop_; }
  int uplink_netns() const { return uplink_.get(); }
  // The ranges only a rule inside them opens: the fixed ones and the uplink's own addresses.
  const std::vector<policy::NetProtectedRange>& protected_ranges() const { return protected_; }
  // Handles one control request (its descriptors taken from `fds`); throws Error with the reply's code.
  std::string handle(const std::string& request, std::vector<sys::UniqueFd>& fds, bool replay = false);
  // The descriptor budget's verdict for `want` more descriptors of `port`.
  FdVerdict admits(const SandboxPort& port, size_t want) const;
  // Accepts and resets one pending connection of `listen_fd` when the process is out of descriptors, with
  // the descriptor kept spare for this: the listener would otherwise stay readable and spin the loop.
  void shed(int listen_fd);
  void count(proto::NetgwCounter c, uint64_t n = 1) {
    node_[c] += n;
    node_dirty_ = true;
  }
  DnsService& dns() { return *dns_; }
  SandboxPort* find(const std::string& id);
  size_t tcp_total = 0, udp_total = 0, dns_tcp_total = 0;
  size_t fixed_fds = 0;    // the attached sandboxes' fixed descriptors
  size_t floors_used = 0;  // the sum over them of min(connection descriptors, floor)
  size_t floor() const { return budget_.floor; }
  void detach(const std::string& id, const char* why);
  static int64_t now_ms();

 private:
  struct Client final : Handler {
    Gateway* gw;
    sys::UniqueFd fd;
    void on_event(uint32_t e) override { gw->on_client(*this, e); }
  };
  struct AddressEvents final : Handler {
    Gateway* gw;
    void on_event(uint32_t) override { gw->on_address_events(); }
  };
  void on_client(Client& c, uint32_t events);
  void on_address_events();
  // Lists the uplink's addresses and local routes; when they changed, every sandbox's protected ranges follow.
  void relist_uplink(int64_t event_ns);
  static std::vector<sys::NetnsAddress> uplink_local();
  size_t node_fds() const;
  size_t unused_floors() const;
  void tick(int64_t now_ms);
  void flush_node_counters();

  GatewayOptions o_;
  EventLoop loop_;
  sys::UniqueFd uplink_;
  std::vector<policy::NetProtectedRange> protected_;
  sys::UniqueFd address_events_;
  AddressEvents address_handler_;
  int64_t next_relist_ms_ = 0;
  size_t fd_limit_ = 0;
  FdBudget budget_;
  sys::UniqueFd spare_;  // /dev/null, given up for a moment by shed()
  uint64_t node_[proto::kGwCounterCount] = {};
  bool node_dirty_ = true;
  int64_t next_node_flush_ms_ = 0;
  uint64_t dns_flushed_ = 0;  // the resolver's decisions at the last flush
  sys::UniqueFd node_counters_fd_;
  sys::UniqueFd control_;
  std::map<Client*, std::unique_ptr<Client>> clients_;
  std::map<std::string, std::unique_ptr<SandboxPort>> sandboxes_;
  std::unique_ptr<DnsService> dns_;  // destroyed first: its workers stop before what they use goes
  int64_t idle_since_ms_ = 0;
};

}  // namespace sandlet::netgw
