#include "network/dns/name_gate.hpp"

#include <poll.h>

#include <algorithm>
#include <exception>

namespace sandlet::net {
namespace {

using Clock = std::chrono::steady_clock;

std::string type_text(uint16_t t) {
  return t == kDnsA ? "A" : t == kDnsAaaa ? "AAAA" : t == kDnsCname ? "CNAME" : "type " + std::to_string(t);
}

GateResult result(std::vector<uint8_t> reply, std::string outcome) {
  GateResult r;
  r.reply = std::move(reply);
  r.outcome = std::move(outcome);
  return r;
}

GateResult answer(const DnsMessage& query, uint8_t rcode, DnsTransport t, std::string outcome,
                  const std::vector<DnsRecord>& records = {}) {
  return result(build_dns_reply(query, rcode, records, t), std::move(outcome));
}

}  // namespace

bool dns_name_matches(std::string_view pattern, std::string_view name) {
  if (pattern == "*") return true;  // every name
  if (pattern.size() > 2 && pattern.substr(0, 2) == "*.") {
    const std::string_view domain = pattern.substr(1);  // ".example.com"
    return name.size() > domain.size() && name.substr(name.size() - domain.size()) == domain;
  }
  return pattern == name;
}

NameGate::NameGate(std::vector<NetAllowRule> rules, std::vector<DnsUpstream> upstreams, NameGateOptions options)
    : rules_(std::move(rules)), upstreams_(std::move(upstreams)), options_(options) {}

NameGate NameGate::for_policy(const NetworkPolicy& policy, NameGateOptions options) {
  std::vector<DnsUpstream> ups;
  for (const std::string& d : policy.dns) {
    if (auto u = dns_upstream_of(d)) ups.push_back(*u);
  }
  return NameGate(policy.allow, std::move(ups), options);
}

std::vector<size_t> NameGate::rules_for(std::string_view name) const {
  std::vector<size_t> out;
  for (size_t i = 0; i < rules_.size(); ++i) {
    if (rules_[i].family == 0 && dns_name_matches(rules_[i].host, name)) out.push_back(i);
  }
  return out;
}

GateStart NameGate::begin(std::span<const uint8_t> bytes, DnsTransport transport, GateClock::time_point now) const {
  try {
    const DnsParse parsed = parse_dns(bytes, transport);
    GateStart s = decide(parsed, transport, now);
    if (parsed.ok() && !parsed.message.questions.empty()) {
      GateResult& r = s.exchange ? s.exchange->result() : s.result;
      r.name = parsed.message.questions.front().name;
      r.type = parsed.message.questions.front().type;
    }
    return s;
  } catch (const std::exception& e) {
    // Only allocation can throw here; the sandbox sees no reply and retries.
    GateStart s;
    s.result.outcome = std::string("dropped: ") + e.what();
    return s;
  }
}

GateResult NameGate::handle(std::span<const uint8_t> bytes, DnsTransport transport) const {
  GateStart s = begin(bytes, transport);
  if (!s.exchange) return std::move(s.result);
  GateExchange& x = *s.exchange;
  while (!x.done()) {
    const GateClock::time_point now = GateClock::now();
    if (now >= x.deadline()) {
      x.on_deadline(now);
      continue;
    }
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(x.deadline() - now);
    pollfd p{x.fd(), POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(std::min<int64_t>(left.count(), 60'000))) > 0) x.on_readable(GateClock::now());
  }
  return std::move(x.result());
}

GateStart NameGate::decide(const DnsParse& parsed, DnsTransport transport, GateClock::time_point now) const {
  const auto decided = [](GateResult r) {
    GateStart s;
    s.result = std::move(r);
    return s;
  };
  if (!parsed.header_ok) return decided(result({}, "dropped: " + parsed.error));
  const DnsMessage& query = parsed.message;
  if (query.header.response()) return decided(result({}, "dropped: a response, not a query"));
  if (query.header.opcode() != 0)
    return decided(answer(query, kDnsNotImp, transport, "not implemented: opcode " + std::to_string(query.header.opcode())));
  if (!parsed.ok()) {
    DnsMessage bare = query;
    bare.questions.clear();
    return decided(answer(bare, kDnsFormErr, transport, "format error: " + parsed.error));
  }
  if (query.questions.empty()) return decided(answer(query, kDnsFormErr, transport, "format error: no question"));
  const DnsQuestion& q = query.questions.front();
  if (q.klass != kDnsClassIn || !dns_is_host_name(q.name))
    return decided(answer(query, kDnsRefused, transport, "refused: not a host name of class IN"));
  const std::vector<size_t> rules = rules_for(q.name);
  if (rules.empty()) return decided(answer(query, kDnsRefused, transport, "refused: " + q.name + " is in no rule"));
  if (q.type != kDnsA && q.type != kDnsAaaa && q.type != kDnsCname)
    return decided(answer(query, kDnsRefused, transport, "refused: " + type_text(q.type) + " queries are not forwarded"));

  auto x = std::unique_ptr<GateExchange>(new GateExchange());
  x->query_.header = query.header;
  x->query_.questions = query.questions;
  x->query_.edns_udp_size = query.edns_udp_size;  // the sandbox's reply size; its OPT goes no further
  x->transport_ = transport;
  // All that leaves: the name in canonical form, the type, class IN.
  x->forwarded_.name = q.name;
  x->forwarded_.wire = dns_canonical_wire(q.wire);
  x->forwarded_.type = q.type;
  x->forwarded_.klass = kDnsClassIn;
  for (size_t i : rules) {
    const NetAllowRule& rule = rules_[i];
    x->rules_.push_back({4, {}, rule.protocols, rule.port_lo, rule.port_hi, 0, i});
  }
  x->upstreams_ = upstreams_;
  x->options_ = options_;
  x->end_ = now + options_.total_timeout;
  x->start_next(now);
  GateStart s;
  s.exchange = std::move(x);
  return s;
}

void GateExchange::start_next(GateClock::time_point now) {
  try_.reset();
  const size_t total = options_.rounds > 0 ? upstreams_.size() * static_cast<size_t>(options_.rounds) : 0;
  while (next_ < total && now < end_) {
    current_ = next_ % upstreams_.size();
    ++next_;
    try_.emplace(upstreams_[current_], forwarded_);
    if (try_->fd() >= 0) {
      try_end_ = std::min(end_, now + options_.attempt_timeout);
      return;
    }
    tried_ += " " + dns_upstream_text(upstreams_[current_]) + " " + try_->error() + ";";
    try_.reset();
  }
  if (upstreams_.empty()) tried_ = " no upstream resolvers;";
  if (!tried_.empty()) tried_.pop_back();
  finish(answer(query_, kDnsServFail, transport_, "servfail:" + tried_));
}

void GateExchange::take(UpstreamResult r, GateClock::time_point now) {
  const std::string who = dns_upstream_text(upstreams_[current_]);
  if (r.outcome != UpstreamOutcome::kReply) {
    tried_ += " " + who + (r.outcome == UpstreamOutcome::kUnreachable ? " " + r.why + ";" : " timed out;");
    return start_next(now);
  }
  const uint8_t rcode = r.reply.header.rcode();
  if (rcode == kDnsNxDomain) return finish(answer(query_, kDnsNxDomain, transport_, "nxdomain from " + who));
  if (rcode != kDnsNoError || r.reply.header.truncated()) {
    // Another upstream may do better; a truncated answer is incomplete (no TCP fallback).
    tried_ += " " + who + (rcode != kDnsNoError ? " rcode " + std::to_string(rcode) : " truncated") + ";";
    return start_next(now);
  }
  const DnsQuestion& q = forwarded_;
  DnsChainAnswer chain = follow_answer(q.name, q.type, r.reply.answers);
  // The sandbox must not cache longer than the allowlist keeps the addresses.
  for (DnsRecord& rec : chain.records) rec.ttl = std::min(rec.ttl, kNetResolvedTtlCap);
  GateResult out = net::result(build_dns_reply(query_, kDnsNoError, chain.records, transport_),
                          "answered by " + who + ": " + std::to_string(chain.addresses.size()) + " address(es) for " + q.name);
  for (const DnsAddress& a : chain.addresses) {
    for (const NameGateAllow& rule : rules_) {
      out.allow.push_back({a.family, a.addr, rule.protocols, rule.port_lo, rule.port_hi, a.ttl, rule.rule});
    }
  }
  finish(std::move(out));
}

void GateExchange::finish(GateResult r) {
  try_.reset();
  r.name = std::move(result_.name);
  r.type = result_.type;
  result_ = std::move(r);
  done_ = true;
}

void GateExchange::fail(const char* what) noexcept {
  try_.reset();
  done_ = true;
  result_.reply.clear();
  result_.allow.clear();
  try {
    result_.outcome = std::string("dropped: ") + what;
  } catch (...) {
    result_.outcome.clear();
  }
}

void GateExchange::on_readable(GateClock::time_point now) noexcept {
  if (done_ || !try_) return;
  try {
    UpstreamResult r = try_->read();
    if (r.outcome != UpstreamOutcome::kPending) return take(std::move(r), now);
    if (now >= try_end_) take(UpstreamResult{}, now);  // kTimeout
  } catch (const std::exception& e) {
    fail(e.what());
  }
}

void GateExchange::on_deadline(GateClock::time_point now) noexcept {
  if (done_ || !try_ || now < try_end_) return;
  try {
    UpstreamResult r = try_->read();  // an answer that came with the deadline still counts
    take(r.outcome == UpstreamOutcome::kPending ? UpstreamResult{} : std::move(r), now);
  } catch (const std::exception& e) {
    fail(e.what());
  }
}

}  // namespace sandlet::net
