// The gateway's resolver (docs/NETWORK.md, "DNS by name"): queries a sandbox sends to its resolver address
// (policy::kResolver4/6, port 53, UDP or TCP) are decided by that sandbox's name gate (network/dns/name_gate.hpp),
// and the addresses an answer opens are in the sandbox's allowlist before the reply goes back (the sandbox
// connects as soon as it reads it). Every decision goes into the sandbox's DNS log.
//
// Scheduling, so that no sandbox waits on another's slow names:
// - On the event loop (never blocking): the gate's first step (parse, policy), and the exchanges with the
//   upstreams — each forwarded query is a net::GateExchange on its own non-blocking socket, watched by the
//   loop, its tries timed by a timer of this service. Waiting on an upstream holds no thread.
// - On worker threads: adding an answer's addresses to the sandbox's allowlist (a lock and a BPF map
//   rebuild). Each sandbox has its own queue; workers serve the sandboxes with work round-robin, one
//   worker per sandbox at a time, all of a sandbox's pending adds merged into one rebuild.
// - Bounds: kDnsPerSandbox queries in flight per sandbox, kDnsQueued per node (and, once half of those are
//   in use, no sandbox more than its share), kDnsAllowWaitMs waiting for the allowlist (then SERVFAIL). A
//   query over a bound is dropped; every such drop and failure is in the sandbox's DNS log.
#pragma once
#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "network/dns/name_gate.hpp"
#include "network/dns/dns_log_writer.hpp"
#include "network/gateway/event_loop.hpp"
#include "network/gateway/limits.hpp"
#include "policy/net_resolved.hpp"
#include "policy/net_rules.hpp"
#include "spec/network_spec.hpp"
#include "sys/fd.hpp"

namespace sandlet::netgw {

// What a sandbox's resolver answers: its rules by name and upstreams. Immutable; an update swaps in another.
struct DnsPolicy {
  DnsPolicy(std::vector<NetAllowRule> names, std::vector<net::DnsUpstream> upstreams);
  std::vector<NetAllowRule> names;
  net::NameGate gate;
};

// Addresses one answer opens, waiting for (or done by) a worker. query 0: a prune (nothing to add).
struct DnsAllowJob {
  uint64_t query = 0;
  std::vector<policy::NetResolved> records;
  // Set by the worker: records not placed (of the whole merged rebuild), the records in it, and why the
  // rebuild failed ("" when it did not).
  size_t lost = 0, batch = 0;
  bool failed = false;
  std::string error;
};

// One sandbox's side, shared by the queries it has in flight (they outlive a detach).
class DnsContext final {
 public:
  DnsContext(std::string id, sys::UniqueFd cgroup, sys::UniqueFd log);
  const std::string& id() const { return id_; }
  std::shared_ptr<const DnsPolicy> policy() const;
  void set_policy(std::shared_ptr<const DnsPolicy> p, std::vector<policy::NetProtectedRange> protect);
  std::vector<policy::NetProtectedRange> protect() const;
  int cgroup() const { return cgroup_.get(); }
  net::DnsLogWriter& log() { return log_; }
  std::atomic<int> inflight{0};  // queries accepted and not answered yet (loop thread)

  // Guarded by the DnsService's mutex: the allowlist adds waiting for a worker; whether the sandbox is in
  // the workers' round-robin ring, or being served by one.
  std::list<DnsAllowJob> allow_jobs;
  bool allow_listed = false, allow_busy = false;

 private:
  std::string id_;
  sys::UniqueFd cgroup_;
  net::DnsLogWriter log_;
  mutable std::mutex mu_;
  std::shared_ptr<const DnsPolicy> policy_;
  std::vector<policy::NetProtectedRange> protect_;
};

class DnsService final : public Handler {
 public:
  using Done = std::function<void(std::vector<uint8_t> reply)>;  // run on the loop thread; empty: send nothing
  explicit DnsService(EventLoop& loop);
  ~DnsService() override;
  // Starts deciding `query` (loop thread). `done` runs later on the loop thread (never from inside this
  // call), exactly once for an accepted query. False when over the bounds (the query is dropped and logged
  // as such; `done` is not called). Never throws.
  bool submit(const std::shared_ptr<DnsContext>& ctx, std::vector<uint8_t> query, net::DnsTransport transport, Done done);
  // Queues a pass that drops the sandbox's expired resolved addresses.
  void prune(const std::shared_ptr<DnsContext>& ctx);
  void on_event(uint32_t events) override;  // completions, on the loop thread

  // Descriptors this service holds now: its eventfd and timerfd, and one UDP socket per query waiting on an
  // upstream (at most kDnsQueued). Workers open a few more while they rebuild an allowlist (the cgroup
  // directory and its maps, briefly, kDnsWorkers at most at once). Loop thread.
  size_t descriptors() const { return 2 + upstream_sockets_; }
  size_t upstream_sockets() const { return upstream_sockets_; }
  size_t in_flight() const { return queries_.size(); }
  // The node's bound on queries in flight (each holds a socket): kDnsQueued, lower under a small descriptor
  // limit (what the gateway's budget keeps for them, fd_budget.hpp).
  void set_max_in_flight(size_t n) { max_in_flight_ = std::max<size_t>(n, 1); }
  // Node-wide totals of the decisions (each is in its sandbox's DNS log too), for the node's counters.
  struct Totals {
    uint64_t answered = 0, refused = 0, failed = 0, dropped = 0;
  };
  const Totals& totals() const { return totals_; }

 private:
  struct Query final : Handler {
    DnsService* svc = nullptr;
    uint64_t serial = 0;
    std::shared_ptr<DnsContext> ctx;
    std::shared_ptr<const DnsPolicy> policy;
    net::DnsTransport transport = net::DnsTransport::kUdp;
    Done done;
    std::vector<uint8_t> query;                 // the sandbox's bytes (for a SERVFAIL built later)
    std::unique_ptr<net::GateExchange> exchange;  // while the upstreams are asked
    int watched = -1;                           // the exchange's socket as registered on the loop
    net::GateResult result;                     // the gate's decision, once made
    int64_t allow_deadline_ms = 0;              // waiting for the allowlist: SERVFAIL past this
    bool waiting_allowlist = false;
    bool counted = false;                       // counted in upstream_sockets_
    void on_event(uint32_t) override { svc->on_upstream(*this); }
  };
  struct Timer final : Handler {
    DnsService* svc = nullptr;
    void on_event(uint32_t) override { svc->on_timer(); }
  };
  bool admit(DnsContext& ctx, std::string& why) const;
  void on_upstream(Query& q) noexcept;
  void on_timer() noexcept;
  void advance(Query& q) noexcept;  // after a step: watch the exchange, or go on to the allowlist, or answer
  void unwatch(Query& q) noexcept;
  void recount(Query& q) noexcept;  // upstream_sockets_ follows whether `q` holds a socket
  void to_allowlist(Query& q);
  void complete(Query& q, size_t opened) noexcept;  // logs, schedules `done`, forgets the query
  void record(DnsContext& ctx, proto::DnsVerdict v, uint16_t type, const std::string& name, size_t opened,
              const std::string& outcome) noexcept;  // the sandbox's log and the node's totals
  void servfail(Query& q, std::string_view why, std::string_view detail = {}) noexcept;  // outcome: why + detail
  void arm_timer(bool on) noexcept;
  void wake() noexcept;
  void start_workers();
  void work();
  EventLoop& loop_;
  sys::UniqueFd wake_;   // eventfd: completions are waiting
  sys::UniqueFd timer_;  // timerfd: ticks while queries are in flight (the upstream tries' deadlines)
  Timer timer_handler_;
  bool timer_armed_ = false;
  // Loop thread only.
  std::map<uint64_t, std::unique_ptr<Query>> queries_;
  uint64_t next_serial_ = 0;
  size_t upstream_sockets_ = 0;
  size_t active_sandboxes_ = 0;  // sandboxes with queries in flight
  Totals totals_;
  size_t max_in_flight_ = kDnsQueued;
  std::deque<std::pair<Done, std::vector<uint8_t>>> ready_;  // answers to hand out on the next wake
  // Shared with the workers, under mu_.
  std::mutex mu_;
  std::condition_variable cv_;
  std::list<std::shared_ptr<DnsContext>> ring_;  // sandboxes with adds waiting, served front to back
  std::list<DnsAllowJob> allow_done_;            // finished adds, for the loop thread
  std::vector<std::thread> workers_;
  bool stop_ = false;
};

// Adds what a gate's answer opened to the allowlist of the sandbox whose cgroup2 directory is `cgroup_fd`,
// under the allowlist lock every rebuilder takes. Returns how many records could not be placed.
size_t add_to_allowlist(int cgroup_fd, const std::vector<policy::NetResolved>& add,
                        const std::vector<policy::NetProtectedRange>& protect);

}  // namespace sandlet::netgw
