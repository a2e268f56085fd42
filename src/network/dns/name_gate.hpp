// The sandbox's resolver policy: which DNS queries are answered, and which addresses an answer opens.
// A query for a name of the sandbox's host rules (exact, or under a "*.domain" rule), of type A, AAAA or
// CNAME, class IN, is forwarded to the policy's upstreams; its answer is reduced to the asked name's CNAME
// chain and addresses (dns_answer.hpp), sent back with the sandbox's id and question, and the addresses are
// returned with each matching rule's protocols and ports for the caller to add to the sandbox's allowlist.
// Every other query gets REFUSED (the policy refuses to say: it does not claim the name does not exist).
//
// What leaves for the upstream is the question's name in lower case, its type and class IN, with our own
// id, flags (RD) and EDNS0: nothing else of the sandbox's query (not its letter case, flags, EDNS options,
// cookies or extra records). The reply mirrors the sandbox's own question as it was sent.
//
// Two ways to run it, built on the same pieces. begin() is the cheap first step (parse and policy): either
// the decision, or a GateExchange — the query in flight to the upstreams, one non-blocking socket at a
// time, which a caller's poller drives to its result (the gateway's event loop: waiting on an upstream
// holds no thread). handle() does both and blocks (up to the options' total timeout) in poll(). Both are
// const and thread-safe.
#pragma once
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "network/dns/dns_answer.hpp"
#include "network/dns/dns_message.hpp"
#include "network/dns/dns_upstream.hpp"
#include "spec/network_spec.hpp"

namespace sandlet::net {

struct NameGateOptions {
  std::chrono::milliseconds attempt_timeout{1000};  // one upstream, one try
  int rounds = 2;                                   // passes over the upstream list
  std::chrono::milliseconds total_timeout{4000};    // the whole query, whatever is left of the rounds
};

// An address the sandbox may now reach, as the rule that allowed its name says.
struct NameGateAllow {
  int family = 4;
  std::array<uint8_t, 16> addr{};
  uint8_t protocols = kNetAllProtos;
  uint16_t port_lo = 0, port_hi = 65535;
  uint32_t ttl = 0;   // from the answer (lowest on the CNAME chain); the allowlist applies its floor and cap
  size_t rule = 0;    // index of the rule in the list the gate was made with
};

struct GateResult {
  std::vector<uint8_t> reply;        // to send back on the same transport; empty: send nothing
  std::vector<NameGateAllow> allow;  // addresses to add (empty unless the reply carries addresses)
  std::string outcome;               // one line for logs and the audit: what was decided and why
  std::string name;                  // the question, when the query was well formed ("" and 0 otherwise)
  uint16_t type = 0;
};

using GateClock = std::chrono::steady_clock;

// A query the gate forwards, in flight: tries each upstream in order, in rounds (NameGateOptions), one try
// at a time on its own socket, until an upstream's answer decides or the total timeout passes (SERVFAIL).
// Drive it: wait until fd() is readable or deadline() has passed, then call on_readable() or
// on_deadline(); when done(), result() is the gate's decision as handle() would return it. It holds copies
// of what it needs (not the gate), at most one descriptor (while not done), and never throws.
class GateExchange final {
 public:
  bool done() const { return done_; }
  int fd() const { return try_ ? try_->fd() : -1; }  // the current try's socket (-1 when done)
  GateClock::time_point deadline() const { return try_end_; }  // when the current try gives up
  // The socket is readable: takes a matching answer (which may decide, or move on to the next upstream).
  void on_readable(GateClock::time_point now) noexcept;
  // Call once now >= deadline(): reads what came last, else the try timed out and the next one starts.
  void on_deadline(GateClock::time_point now) noexcept;
  GateResult& result() { return result_; }
  // The question as it goes upstream: the name in canonical form (lower case), the type, class IN.
  const DnsQuestion& forwarded() const { return forwarded_; }
  size_t tries() const { return next_; }  // tries started so far

 private:
  friend class NameGate;
  GateExchange() = default;
  void start_next(GateClock::time_point now);
  void take(UpstreamResult r, GateClock::time_point now);
  void finish(GateResult r);
  void fail(const char* what) noexcept;

  DnsMessage query_;  // the sandbox's query, for the reply (id, flags, question as sent; no records kept)
  DnsTransport transport_ = DnsTransport::kUdp;
  DnsQuestion forwarded_;
  std::vector<NameGateAllow> rules_;  // one per matching rule: its index, protocols and ports
  std::vector<DnsUpstream> upstreams_;
  NameGateOptions options_;
  size_t next_ = 0, current_ = 0;  // tries started; the upstream of the current one
  GateClock::time_point end_{}, try_end_{};
  std::optional<UpstreamTry> try_;
  std::string tried_;
  bool done_ = false;
  GateResult result_;
};

// begin()'s answer: a decision at once (`exchange` null), or a query to forward.
struct GateStart {
  GateResult result;
  std::unique_ptr<GateExchange> exchange;
};

class NameGate final {
 public:
  // `rules`: the policy's allow rules (those by address are ignored); `upstreams`: tried in order.
  NameGate(std::vector<NetAllowRule> rules, std::vector<DnsUpstream> upstreams, NameGateOptions options = {});
  // The gate of a policy: its host rules and its `dns` resolvers on port 53.
  static NameGate for_policy(const NetworkPolicy& policy, NameGateOptions options = {});

  // One query as the sandbox sent it (for kTcp with its length prefix). Never throws. Blocks while the
  // upstreams are asked: begin() and the exchange, driven with poll().
  GateResult handle(std::span<const uint8_t> query, DnsTransport transport = DnsTransport::kUdp) const;
  // The first step: parse and policy. Never throws; nothing waits. A forwarded query's exchange has sent
  // its first try when this returns (or is done already: no upstream could be asked).
  GateStart begin(std::span<const uint8_t> query, DnsTransport transport = DnsTransport::kUdp,
                  GateClock::time_point now = GateClock::now()) const;
  // Indexes of the rules whose name matches `name` (DnsQuestion::name form).
  std::vector<size_t> rules_for(std::string_view name) const;

 private:
  GateStart decide(const DnsParse& parsed, DnsTransport transport, GateClock::time_point now) const;
  std::vector<NetAllowRule> rules_;
  std::vector<DnsUpstream> upstreams_;
  NameGateOptions options_;
};

// Whether host rule `pattern` ("mirror.internal" or "*.example.com") matches `name`. A wildcard matches
// names with one or more labels in front of its domain, never the domain itself.
bool dns_name_matches(std::string_view pattern, std::string_view name);

}  // namespace sandlet::net
