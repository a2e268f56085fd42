#include "net/name_gate.hpp"

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

GateResult NameGate::handle(std::span<const uint8_t> bytes, DnsTransport transport) const {
  try {
    const DnsParse parsed = parse_dns(bytes, transport);
    GateResult r = decide(parsed, transport);
    if (parsed.ok() && !parsed.message.questions.empty()) {
      r.name = parsed.message.questions.front().name;
      r.type = parsed.message.questions.front().type;
    }
    return r;
  } catch (const std::exception& e) {
    // Only allocation can throw here; the sandbox sees no reply and retries.
    return result({}, std::string("dropped: ") + e.what());
  }
}

GateResult NameGate::decide(const DnsParse& parsed, DnsTransport transport) const {
  if (!parsed.header_ok) return result({}, "dropped: " + parsed.error);
  const DnsMessage& query = parsed.message;
  if (query.header.response()) return result({}, "dropped: a response, not a query");
  if (query.header.opcode() != 0) return answer(query, kDnsNotImp, transport, "not implemented: opcode " + std::to_string(query.header.opcode()));
  if (!parsed.ok()) {
    DnsMessage bare = query;
    bare.questions.clear();
    return answer(bare, kDnsFormErr, transport, "format error: " + parsed.error);
  }
  if (query.questions.empty()) return answer(query, kDnsFormErr, transport, "format error: no question");
  const DnsQuestion& q = query.questions.front();
  if (q.klass != kDnsClassIn || !dns_is_host_name(q.name))
    return answer(query, kDnsRefused, transport, "refused: not a host name of class IN");
  const std::vector<size_t> rules = rules_for(q.name);
  if (rules.empty()) return answer(query, kDnsRefused, transport, "refused: " + q.name + " is in no rule");
  if (q.type != kDnsA && q.type != kDnsAaaa && q.type != kDnsCname)
    return answer(query, kDnsRefused, transport, "refused: " + type_text(q.type) + " queries are not forwarded");

  const Clock::time_point end = Clock::now() + options_.total_timeout;
  std::string tried;
  for (int round = 0; round < options_.rounds; ++round) {
    for (const DnsUpstream& up : upstreams_) {
      const Clock::time_point now = Clock::now();
      if (now >= end) break;
      const UpstreamResult r = ask_upstream(up, q, std::min(end, now + options_.attempt_timeout));
      const std::string who = dns_upstream_text(up);
      if (r.outcome != UpstreamOutcome::kReply) {
        tried += " " + who + (r.outcome == UpstreamOutcome::kTimeout ? " timed out;" : " " + r.why + ";");
        continue;
      }
      const uint8_t rcode = r.reply.header.rcode();
      if (rcode == kDnsNxDomain) return answer(query, kDnsNxDomain, transport, "nxdomain from " + who);
      if (rcode != kDnsNoError || r.reply.header.truncated()) {
        // Another upstream may do better; a truncated answer is incomplete (no TCP fallback).
        tried += " " + who + (rcode != kDnsNoError ? " rcode " + std::to_string(rcode) : " truncated") + ";";
        continue;
      }
      DnsChainAnswer chain = follow_answer(q.name, q.type, r.reply.answers);
      // The sandbox must not cache longer than the allowlist keeps the addresses.
      for (DnsRecord& rec : chain.records) rec.ttl = std::min(rec.ttl, kNetResolvedTtlCap);
      GateResult out = result(build_dns_reply(query, kDnsNoError, chain.records, transport),
                              "answered by " + who + ": " + std::to_string(chain.addresses.size()) + " address(es) for " + q.name);
      for (const DnsAddress& a : chain.addresses) {
        for (size_t i : rules) {
          const NetAllowRule& rule = rules_[i];
          out.allow.push_back({a.family, a.addr, rule.protocols, rule.port_lo, rule.port_hi, a.ttl, i});
        }
      }
      return out;
    }
  }
  if (upstreams_.empty()) tried = " no upstream resolvers;";
  if (!tried.empty()) tried.pop_back();
  return answer(query, kDnsServFail, transport, "servfail:" + tried);
}

}  // namespace sandlet::net
