// The gateway's control requests (one JSON object per message on its control socket; docs/NETWORK.md):
// attach, update, detach, status, ping. Only the library's processes reach this socket (mode 0600 under the
// runtime root), but a request is still checked field by field: a damaged record must not crash the node's
// gateway.
#include <arpa/inet.h>
#include <unistd.h>

#include <boost/json.hpp>

#include "common/error.hpp"
#include "network/gateway/gateway.hpp"
#include "network/gateway/journal.hpp"
#include "network/gateway/limits.hpp"

namespace sandlet::netgw {
namespace {

const boost::json::value* field(const boost::json::object& o, const char* k) { return o.if_contains(k); }

std::string text_of(const boost::json::object& o, const char* k) {
  auto* v = field(o, k);
  if (!v || !v->is_string()) throw Error(Code::kInvalidArgument, std::string("netgw request: '") + k + "' missing");
  return std::string(v->as_string());
}

uint64_t number_of(const boost::json::object& o, const char* k, uint64_t max) {
  auto* v = field(o, k);
  if (!v || !v->is_number()) throw Error(Code::kInvalidArgument, std::string("netgw request: '") + k + "' missing");
  const uint64_t n = v->to_number<uint64_t>();
  if (n > max) throw Error(Code::kInvalidArgument, std::string("netgw request: '") + k + "' out of range");
  return n;
}

// The request's parts a `net update` may change: "exact", "names", "dns" (none: no resolver).
PolicyUpdate policy_of(const boost::json::object& o) {
  PolicyUpdate u;
  if (auto* ex = field(o, "exact"); ex && ex->is_array())
    for (auto& e : ex->as_array()) {
      Endpoint ep;
      if (e.is_string() && parse_ip(std::string(e.as_string()), ep)) u.exact.push_back(ep);
    }
  if (auto* names = field(o, "names"); names && names->is_array()) {
    if (names->as_array().size() > kMaxNameRules) throw Error(Code::kInvalidArgument, "netgw: too many rules by name");
    for (auto& n : names->as_array()) {
      if (!n.is_object()) throw Error(Code::kInvalidArgument, "netgw: a rule by name is not an object");
      const auto& no = n.as_object();
      NetAllowRule rule;
      rule.host = text_of(no, "host");
      rule.protocols = static_cast<uint8_t>(number_of(no, "protocols", 255));
      rule.port_lo = static_cast<uint16_t>(number_of(no, "port_lo", 65535));
      rule.port_hi = static_cast<uint16_t>(number_of(no, "port_hi", 65535));
      u.names.push_back(std::move(rule));
    }
  }
  if (auto* dns = field(o, "dns"); dns && dns->is_array()) {
    if (dns->as_array().size() > kMaxNameRules) throw Error(Code::kInvalidArgument, "netgw: too many resolvers");
    for (auto& d : dns->as_array()) {
      std::optional<net::DnsUpstream> up = d.is_string() ? net::dns_upstream_of(std::string(d.as_string())) : std::nullopt;
      if (!up) throw Error(Code::kInvalidArgument, "netgw: a resolver is not an IP address");
      u.upstreams.push_back(*up);
    }
  }
  return u;
}

// The attach's descriptors by name: "fds" lists them in order (netns, pidfd, cgroup, then "dns_log" and
// "counters" when sent); a request without it is an older library's: three, and the DNS log fourth.
void take_fds(const boost::json::object& o, std::vector<sys::UniqueFd>& fds, AttachRequest& r) {
  std::vector<std::string> names{"netns", "pidfd", "cgroup"};
  if (auto* list = field(o, "fds"); list && list->is_array()) {
    names.clear();
    for (auto& n : list->as_array())
      if (n.is_string()) names.emplace_back(n.as_string());
  } else if (fds.size() == 4) {
    names.push_back("dns_log");
  }
  if (names.size() != fds.size() || names.size() < 3 || names[0] != "netns" || names[1] != "pidfd" || names[2] != "cgroup")
    throw Error(Code::kInvalidArgument, "netgw attach: needs the netns, pidfd and cgroup descriptors, as named in 'fds'");
  r.netns = std::move(fds[0]);
  r.pidfd = std::move(fds[1]);
  r.cgroup = std::move(fds[2]);
  for (size_t i = 3; i < names.size(); ++i) {
    if (names[i] == "dns_log") r.dns_log = std::move(fds[i]);
    else if (names[i] == "counters") r.counters = std::move(fds[i]);
  }
}

std::string range_text(const policy::NetProtectedRange& r) {
  char buf[INET6_ADDRSTRLEN] = {};
  ::inet_ntop(r.family == 4 ? AF_INET : AF_INET6, r.addr.data(), buf, sizeof buf);
  return std::string(buf) + "/" + std::to_string(r.prefix);
}

}  // namespace

std::string Gateway::handle(const std::string& text, std::vector<sys::UniqueFd>& fds, bool replay) {
  boost::system::error_code ec;
  auto v = boost::json::parse(text, ec);
  if (ec || !v.is_object()) throw Error(Code::kInvalidArgument, "netgw request is not a JSON object");
  auto& o = v.as_object();
  const std::string op = text_of(o, "op");
  boost::json::object out{{"ok", true}};
  if (op == "ping") {
    out["pid"] = ::getpid();
  } else if (op == "status") {
    // The node, and the sandbox asked for by "id" (or, with "sandboxes": true, the first 256): one reply
    // must fit one message.
    const std::string only = field(o, "id") ? text_of(o, "id") : "";
    const bool all = field(o, "sandboxes") && field(o, "sandboxes")->is_bool() && field(o, "sandboxes")->as_bool();
    boost::json::array list;
    for (auto& [id, sb] : sandboxes_) {
      if (!(all || id == only) || list.size() >= 256) continue;
      boost::json::object one{{"id", id}, {"connections", sb->connections()}, {"udp_flows", sb->flows()},
                              {"fds", sb->connection_fds() + sb->fixed_fds()}};
      for (uint32_t c = 0; c < proto::kGwRestarts; ++c) one[proto::kNetgwCounterNames[c]] = sb->counter(static_cast<proto::NetgwCounter>(c));
      list.push_back(std::move(one));
    }
    out["pid"] = ::getpid();
    out["sandboxes"] = std::move(list);
    out["connections"] = tcp_total;
    out["udp_flows"] = udp_total;
    boost::json::object node;
    for (uint32_t c = 0; c < proto::kGwCounterCount; ++c) node[proto::kNetgwCounterNames[c]] = node_[c];
    const DnsService::Totals& t = dns_->totals();
    node["dns_answered"] = node_[proto::kGwDnsAnswered] + t.answered;
    node["dns_refused"] = node_[proto::kGwDnsRefused] + t.refused;
    node["dns_failed"] = node_[proto::kGwDnsFailed] + t.failed;
    node["dns_dropped"] = node_[proto::kGwDnsDropped] + t.dropped;
    node["attached"] = sandboxes_.size();
    node["fds_in_use"] = node_fds();
    node["fd_limit"] = fd_limit_;
    node["fd_budget"] = budget_.usable;
    out["node"] = std::move(node);
    boost::json::array ranges;
    for (const policy::NetProtectedRange& r : protected_) ranges.push_back(boost::json::string(range_text(r)));
    out["protected"] = std::move(ranges);
  } else if (op == "detach") {
    detach(text_of(o, "id"), "detach");
  } else if (op == "update") {
    SandboxPort* port = find(text_of(o, "id"));
    if (!port) throw Error(Code::kNotFound, "netgw update: sandbox " + text_of(o, "id") + " is not attached");
    port->update(policy_of(o));
    // What a successor re-attaches with: the attach request with this policy in place of the old one.
    boost::json::value kept = boost::json::parse(port->request(), ec);
    if (!ec && kept.is_object()) {
      for (const char* k : {"exact", "names", "dns"})
        if (auto* f = field(o, k)) kept.as_object()[k] = *f;
      port->set_request(boost::json::serialize(kept));
      if (o_.journal) o_.journal->update(port->id(), port->request());
    }
  } else if (op == "attach") {
    AttachRequest r;
    r.id = text_of(o, "id");
    std::vector<int> raw;
    for (const sys::UniqueFd& f : fds) raw.push_back(f.get());
    take_fds(o, fds, r);
    PolicyUpdate p = policy_of(o);
    r.exact = std::move(p.exact);
    r.names = std::move(p.names);
    r.upstreams = std::move(p.upstreams);
    if (auto* pub = field(o, "publish"); pub && pub->is_array()) {
      if (pub->as_array().size() > kMaxPublished) throw Error(Code::kInvalidArgument, "netgw attach: too many published ports");
      for (auto& p : pub->as_array()) {
        if (!p.is_object()) continue;
        const auto& po = p.as_object();
        Published pp;
        if (!parse_ip(text_of(po, "address"), pp.host)) throw Error(Code::kInvalidArgument, "netgw attach: bad publish address");
        pp.host.port = static_cast<uint16_t>(number_of(po, "host_port", 65535));
        pp.inside = static_cast<uint16_t>(number_of(po, "port", 65535));
        r.publish.push_back(pp);
      }
    }
    if (auto* rate = field(o, "egress_rate"); rate && rate->is_number()) r.egress_rate = rate->to_number<uint64_t>();
    // Attached already (two runtimes re-attaching after a restart): what it holds stays as it is.
    if (sandboxes_.count(r.id)) return boost::json::serialize(boost::json::object{{"ok", true}, {"attached", true}});
    if (sandboxes_.size() >= kMaxSandboxes) throw Error(Code::kUnavailable, "netgw: too many sandboxes attached (the limit is " + std::to_string(kMaxSandboxes) + ")");
    if (!budget_.admits_sandbox(node_fds(), unused_floors(),
                                kFdsPerSandbox + (r.upstreams.empty() ? 0 : kFdsPerResolver) + r.publish.size()))
      throw Error(Code::kUnavailable, "netgw: out of descriptors for another sandbox (" + std::to_string(node_fds()) +
                                          " in use, limit " + std::to_string(fd_limit_) + ")");
    r.request = text;
    const std::string id = r.id;
    // The supervisor keeps duplicates of the descriptors: sent while they are all still open (the port
    // closes some once it has used them), taken back if the attach fails.
    const bool journal = o_.journal && !replay;
    if (journal) o_.journal->remember(id, text, raw);
    std::unique_ptr<SandboxPort> port;
    try {
      port = std::make_unique<SandboxPort>(*this, std::move(r));
    } catch (...) {
      if (journal) o_.journal->forget(id);
      throw;
    }
    fixed_fds += port->fixed_fds();
    sandboxes_[id] = std::move(port);
    node_dirty_ = true;
  } else {
    throw Error(Code::kInvalidArgument, "netgw: unknown op '" + op + "'");
  }
  return boost::json::serialize(out);
}

}  // namespace sandlet::netgw
