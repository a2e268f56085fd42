// The gateway's resolver (docs/NETWORK.md, "DNS by name"): queries a sandbox sends to its resolver address
// (policy::kResolver4/6, port 53, UDP or TCP) are decided by that sandbox's name gate (net/name_gate.hpp) on
// worker threads — a decision may wait seconds for an upstream, the event loop must not — and the
// addresses an answer opens are in the sandbox's allowlist before the reply goes back (the sandbox
// connects as soon as it reads it). Every decision goes into the sandbox's DNS log.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "net/name_gate.hpp"
#include "net/dns_log_writer.hpp"
#include "netgw/event_loop.hpp"
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

// One sandbox's side, shared by the jobs it has in flight (they outlive a detach).
class DnsContext final {
 public:
  DnsContext(std::string id, sys::UniqueFd cgroup, sys::UniqueFd log);
  const std::string& id() const { return id_; }
  std::shared_ptr<const DnsPolicy> policy() const;
  void set_policy(std::shared_ptr<const DnsPolicy> p, std::vector<policy::NetProtectedRange> protect);
  std::vector<policy::NetProtectedRange> protect() const;
  int cgroup() const { return cgroup_.get(); }
  net::DnsLogWriter& log() { return log_; }
  std::atomic<int> inflight{0};

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
  // Queues `query` for a worker (started on first use: workers must be made in the uplink namespace).
  // False when over the bounds (the query is dropped and logged as such).
  bool submit(const std::shared_ptr<DnsContext>& ctx, std::vector<uint8_t> query, net::DnsTransport transport, Done done);
  // Queues a pass that drops the sandbox's expired resolved addresses.
  void prune(const std::shared_ptr<DnsContext>& ctx);
  void on_event(uint32_t events) override;  // completions, on the loop thread

 private:
  struct Job {
    std::shared_ptr<DnsContext> ctx;
    std::vector<uint8_t> query;
    net::DnsTransport transport = net::DnsTransport::kUdp;
    Done done;  // empty: a prune
  };
  void work();
  void decide(Job& job);
  EventLoop& loop_;
  sys::UniqueFd wake_;  // eventfd: completions are waiting
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> queue_;
  std::deque<std::pair<Done, std::vector<uint8_t>>> done_;
  std::vector<std::thread> workers_;
  bool stop_ = false;
};

// Adds what a gate's answer opened to the allowlist of the sandbox whose cgroup2 directory is `cgroup_fd`,
// under the allowlist lock every rebuilder takes. Returns how many records could not be placed.
size_t add_to_allowlist(int cgroup_fd, const std::vector<policy::NetResolved>& add,
                        const std::vector<policy::NetProtectedRange>& protect);

}  // namespace sandlet::netgw
