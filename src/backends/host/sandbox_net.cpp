#include "backends/host/sandbox_net.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <sys/file.h>

#include <boost/json.hpp>

#include <cstring>

#include "common/error.hpp"
#include "policy/net_filter.hpp"
#include "policy/net_protect.hpp"
#include "policy/net_sk_lookup.hpp"
#include "sys/fd.hpp"

namespace sandlet::host {
namespace {

// A policy with resolvers (`dns`) reaches its own resolver address (the node gateway's name gate), UDP
// and TCP port 53: a rule of the compile only, never shown in the policy.
std::vector<NetAllowRule> with_resolver(const NetworkPolicy& p) {
  std::vector<NetAllowRule> rules = p.allow;
  if (p.dns.empty()) return rules;
  for (int family : {4, 6}) {
    NetAllowRule r;
    r.family = family;
    if (family == 4) std::memcpy(r.addr.data(), policy::kResolver4, 4);
    else std::memcpy(r.addr.data(), policy::kResolver6, 16);
    r.prefix = family == 4 ? 32 : 128;
    r.protocols = kNetTcp | kNetUdp;
    r.port_lo = r.port_hi = policy::kResolverPort;
    rules.push_back(r);
  }
  return rules;
}

std::vector<policy::NetTrieEntry> compile(const NetworkPolicy& p, const std::string& field,
                                          const std::vector<policy::NetProtectedRange>& inline_protect = {}) {
  return policy::compile_net_rules(with_resolver(p), field + ".allow", inline_protect);
}

// What a filter of an older version, without a protected-range map, gets compiled into its rules.
std::vector<policy::NetProtectedRange> inline_protection(const std::string& uplink_netns) {
  sys::UniqueFd ns;
  if (!uplink_netns.empty()) {
    ns.reset(::open(uplink_netns.c_str(), O_RDONLY | O_CLOEXEC));
    if (!ns) throw_errno("open the network uplink namespace " + uplink_netns);
  }
  std::vector<sys::NetnsAddress> local = sys::netns_addresses(ns ? ns.get() : -1);
  for (const sys::NetnsAddress& r : sys::netns_local_routes(ns ? ns.get() : -1)) local.push_back(r);
  return policy::protected_ranges_of(local);
}

sys::UniqueFd open_group(const std::string& cgroup_v2, const std::string& id) {
  if (cgroup_v2.empty()) throw Error(Code::kFailedPrecondition, "sandbox " + id + " has no cgroup");
  sys::UniqueFd fd(::open(cgroup_v2.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd) throw_errno("sandbox " + id + ": open cgroup " + cgroup_v2);
  return fd;
}

// The sandbox's filter, with the sandbox's allowlist lock held (an flock on its cgroup directory: every
// process that rebuilds the trie — an update, the resolver adding addresses — takes it, and it goes with
// the group).
struct LockedFilter {
  sys::UniqueFd group;
  policy::NetFilter filter;
};

LockedFilter attached(const std::string& cgroup_v2, const std::string& id) {
  sys::UniqueFd group = open_group(cgroup_v2, id);
  while (::flock(group.get(), LOCK_EX) != 0) {
    if (errno != EINTR) throw_errno("sandbox " + id + ": lock the allowlist (flock " + cgroup_v2 + ")");
  }
  std::optional<policy::NetFilter> f = policy::NetFilter::open_attached(group.get());
  if (!f)
    throw Error(Code::kFailedPrecondition,
                "sandbox " + id + " was created with network \"none\": it has no allowlist to update");
  return {std::move(group), std::move(*f)};
}

}  // namespace

NetIds attach_network_policy(int cgroup_fd, const NetworkPolicy& policy) {
  if (policy.none) return {};
  policy::NetFilter f = policy::NetFilter::create(compile(policy, "network"), policy::fixed_protected_ranges());
  f.attach(cgroup_fd);
  return {f.rules_map_id(), f.stats_map_id()};
}

void update_network_policy(const std::string& cgroup_v2, const std::string& id, const NetworkPolicy& policy,
                           const std::string& uplink_netns) {
  if (policy.none || !policy.publish.empty() || policy.egress_rate != 0)
    throw Error(Code::kInvalidArgument, "network update of sandbox " + id +
                                            ": only \"allow\" (and \"dns\") can change while it runs");
  LockedFilter locked = attached(cgroup_v2, id);
  const std::vector<policy::NetTrieEntry> rules =
      compile(policy, "network",
              locked.filter.holds_protect() ? std::vector<policy::NetProtectedRange>{} : inline_protection(uplink_netns));
  // Addresses resolved for a rule by name stay while the new policy has the same rule (name, protocols,
  // ports); the others leave with this update.
  std::vector<uint32_t> keep;
  for (const NetAllowRule& r : policy.allow) {
    if (r.family == 0) keep.push_back(policy::net_rule_tag(r));
  }
  locked.filter.set_rules(rules, &keep);
}

size_t add_resolved_addresses(const std::string& cgroup_v2, const std::string& id,
                              const std::vector<policy::NetResolved>& add) {
  return attached(cgroup_v2, id).filter.add_resolved(add, policy::net_clock_now());
}

std::vector<policy::NetResolved> resolved_addresses(const std::string& cgroup_v2, const std::string& id) {
  return attached(cgroup_v2, id).filter.resolved();
}

boost::json::object network_counters(const std::string& cgroup_v2, const std::string& id, uint64_t after_seq) {
  boost::json::object o;
  const sys::UniqueFd group = open_group(cgroup_v2, id);
  std::optional<policy::NetFilter> f = policy::NetFilter::open_attached(group.get());
  o["filtered"] = f.has_value();
  const policy::NetCounters c = f ? f->counters() : policy::NetCounters{};
  o["connect_denied"] = c.connect_denied;
  o["sendmsg_denied"] = c.sendmsg_denied;
  o["egress_dropped"] = c.egress_dropped;
  boost::json::array denied;
  if (f) {
    for (const policy::NetDenial& d : f->denials_after(after_seq)) {
      char text[INET6_ADDRSTRLEN] = {};
      inet_ntop(d.family == 4 ? AF_INET : AF_INET6, d.addr.data(), text, sizeof text);
      static const char* const kHooks[] = {"connect", "sendmsg", "egress"};
      const char* proto = d.protos == kNetTcp ? "tcp" : d.protos == kNetUdp ? "udp" : d.protos == kNetIcmp ? "icmp" : "other";
      denied.push_back(boost::json::object{{"seq", d.seq}, {"address", text}, {"port", d.port},
                                           {"protocol", proto}, {"hook", kHooks[d.hook < 3 ? static_cast<int>(d.hook) : 2]}});
    }
  }
  o["denied"] = std::move(denied);
  return o;
}

}  // namespace sandlet::host
