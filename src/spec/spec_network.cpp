// The spec's `network` policy: JSON shape and values (network_spec.hpp, docs/NETWORK.md).
#include <arpa/inet.h>

#include <algorithm>
#include <boost/json.hpp>
#include <charconv>
#include <set>
#include <utility>

#include "common/error.hpp"
#include "common/json_exact.hpp"
#include "spec/network_spec.hpp"
#include "spec/spec.hpp"
#include "spec/spec_text.hpp"

namespace sandlet {
namespace {

namespace json = boost::json;
using json_exact::shown;
using spec_text::quoted;

constexpr size_t kMaxRules = 256;
constexpr size_t kMaxResolvers = 4;
constexpr size_t kMaxPublish = 64;
constexpr size_t kMaxName = 253;
constexpr uint64_t kMinRate = 8 * 1024;
constexpr uint64_t kMaxRate = 1ull << 40;

std::string idx(const std::string& field, size_t i) { return field + "[" + std::to_string(i) + "]"; }

std::string kind_of(const json::value& v) {
  switch (v.kind()) {
    case json::kind::string: return "\"" + shown(v.get_string()) + "\"";
    case json::kind::array: return "an array";
    case json::kind::object: return "an object";
    case json::kind::null: return "null";
    case json::kind::bool_: return v.get_bool() ? "true" : "false";
    default: return "a number";
  }
}

std::string_view str(const json::value& v, const std::string& field) {
  if (!v.is_string()) throw_invalid(field, "expected a string, got " + kind_of(v));
  return {v.get_string().data(), v.get_string().size()};
}

const json::array& arr(const json::value& v, const std::string& field) {
  if (!v.is_array()) throw_invalid(field, "expected an array, got " + kind_of(v));
  return v.get_array();
}

const json::object& obj(const json::value& v, const std::string& field) {
  if (!v.is_object()) throw_invalid(field, "expected an object, got " + kind_of(v));
  return v.get_object();
}

// Every key of `o` must be one of `known`.
void only_keys(const json::object& o, const std::string& field, std::initializer_list<std::string_view> known) {
  for (const auto& kv : o) {
    const std::string_view k(kv.key().data(), kv.key().size());
    bool ok = false;
    for (auto n : known) ok = ok || n == k;
    if (!ok) throw_invalid(field + "." + shown(k), "unknown field");
  }
}

uint16_t port_number(std::string_view t, const std::string& field, int min) {
  unsigned v = 0;
  const auto r = std::from_chars(t.data(), t.data() + t.size(), v);
  if (t.empty() || r.ec != std::errc() || r.ptr != t.data() + t.size() || v > 65535 || static_cast<int>(v) < min)
    throw_invalid(field, quoted(t) + " is not a port number (" + std::to_string(min) + "..65535)");
  return static_cast<uint16_t>(v);
}

uint16_t port_value(const json::value& v, const std::string& field, int min) {
  if (v.is_int64() && v.get_int64() >= min && v.get_int64() <= 65535) return static_cast<uint16_t>(v.get_int64());
  if (v.is_uint64() && v.get_uint64() <= 65535) return static_cast<uint16_t>(v.get_uint64());
  throw_invalid(field, "expected a port number (" + std::to_string(min) + "..65535), got " + kind_of(v));
}

void parse_ports(std::string_view t, const std::string& field, NetAllowRule& r) {
  const size_t dash = t.find('-');
  if (dash == std::string_view::npos) {
    r.port_lo = r.port_hi = port_number(t, field, 1);
    return;
  }
  r.port_lo = port_number(t.substr(0, dash), field, 1);
  r.port_hi = port_number(t.substr(dash + 1), field, 1);
  if (r.port_lo > r.port_hi) throw_invalid(field, quoted(t) + ": the range's first port is above its last");
}

uint8_t parse_protocol(std::string_view t, const std::string& field) {
  if (t == "tcp") return kNetTcp;
  if (t == "udp") return kNetUdp;
  if (t == "icmp") return kNetIcmp;
  if (t == "any") return kNetAllProtos;
  throw_invalid(field, quoted(t) + " is not a protocol (tcp, udp, icmp or any)");
}

bool parse_ip(std::string_view t, int& family, std::array<uint8_t, 16>& addr) {
  const std::string s(t);
  addr.fill(0);
  if (inet_pton(AF_INET, s.c_str(), addr.data()) == 1) return family = 4, true;
  if (inet_pton(AF_INET6, s.c_str(), addr.data()) == 1) return family = 6, true;
  return false;
}

std::string ip_text(int family, const std::array<uint8_t, 16>& addr) {
  char buf[INET6_ADDRSTRLEN] = {};
  inet_ntop(family == 4 ? AF_INET : AF_INET6, addr.data(), buf, sizeof buf);
  return buf;
}

void parse_cidr(std::string_view t, const std::string& field, NetAllowRule& r) {
  const size_t slash = t.find('/');
  if (!parse_ip(t.substr(0, slash), r.family, r.addr))
    throw_invalid(field, quoted(t) + " is not an IPv4 or IPv6 address or CIDR");
  const int bits = r.family == 4 ? 32 : 128;
  r.prefix = bits;
  if (slash != std::string_view::npos) {
    const std::string_view n = t.substr(slash + 1);
    unsigned v = 0;
    const auto res = std::from_chars(n.data(), n.data() + n.size(), v);
    if (n.empty() || res.ec != std::errc() || res.ptr != n.data() + n.size() || v > static_cast<unsigned>(bits))
      throw_invalid(field, quoted(t) + ": the prefix length must be 0.." + std::to_string(bits));
    r.prefix = static_cast<int>(v);
  }
  for (int b = r.prefix; b < bits; ++b) {
    if (r.addr[b / 8] & (0x80 >> (b % 8))) {
      std::array<uint8_t, 16> net = r.addr;
      for (int c = r.prefix; c < bits; ++c) net[c / 8] &= static_cast<uint8_t>(~(0x80 >> (c % 8)));
      throw_invalid(field, quoted(t) + " has host bits set (the network is " + ip_text(r.family, net) + "/" +
                               std::to_string(r.prefix) + ")");
    }
  }
}

// RFC 1123 host name: dot-separated labels of [A-Za-z0-9-], not starting or ending with '-'; or "*." and
// such a name (a wildcard over one domain: every name under it); or "*" alone (every name: what the
// resolvers answer, minus the protected ranges, as a public network that resolves names needs).
void parse_host(std::string_view full, const std::string& field, NetAllowRule& r) {
  if (full == "*") {
    r.host = "*";
    return;
  }
  const bool wildcard = full.substr(0, 2) == "*.";
  const std::string_view t = wildcard ? full.substr(2) : full;
  bool ok = !t.empty() && full.size() <= kMaxName && t.front() != '.' && t.back() != '.';
  size_t label = 0;
  for (size_t i = 0; ok && i < t.size(); ++i) {
    const char c = t[i];
    if (c == '.') {
      ok = label > 0 && t[i - 1] != '-';
      label = 0;
    } else {
      const bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
      ok = (alnum || (c == '-' && label > 0)) && ++label <= 63;
    }
  }
  ok = ok && t.back() != '-';
  if (!ok)
    throw_invalid(field, quoted(full) + " is not a DNS name (labels of letters, digits and '-', \"*.\" and such a name, or \"*\")");
  r.host.assign(full);
  for (char& c : r.host) c = (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
}

void check_icmp_ports(const NetAllowRule& r, const std::string& field) {
  if (r.protocols == kNetIcmp && !(r.port_lo == 0 && r.port_hi == 65535))
    throw_invalid(field + ".ports", "ICMP has no ports (leave \"ports\" out)");
}

NetAllowRule parse_rule(const json::value& v, const std::string& field) {
  if (v.is_string()) return parse_net_rule_text(str(v, field), field);  // the CLI's short form
  const json::object& o = obj(v, field);
  only_keys(o, field, {"cidr", "host", "ports", "protocol"});
  NetAllowRule r;
  const json::value* cidr = o.if_contains("cidr");
  const json::value* host = o.if_contains("host");
  if ((cidr != nullptr) == (host != nullptr)) throw_invalid(field, "needs exactly one of \"cidr\" and \"host\"");
  if (cidr) parse_cidr(str(*cidr, field + ".cidr"), field + ".cidr", r);
  if (host) parse_host(str(*host, field + ".host"), field + ".host", r);
  if (const json::value* p = o.if_contains("protocol")) r.protocols = parse_protocol(str(*p, field + ".protocol"), field + ".protocol");
  if (const json::value* p = o.if_contains("ports")) {
    if (p->is_string())
      parse_ports(str(*p, field + ".ports"), field + ".ports", r);
    else
      r.port_lo = r.port_hi = port_value(*p, field + ".ports", 1);
  }
  check_icmp_ports(r, field);
  return r;
}

NetPublish parse_publish(const json::value& v, const std::string& field) {
  const json::object& o = obj(v, field);
  only_keys(o, field, {"host_port", "port", "address", "protocol"});
  NetPublish p;
  const json::value* hp = o.if_contains("host_port");
  const json::value* sp = o.if_contains("port");
  if (!sp) throw_invalid(field + ".port", "required");
  p.port = port_value(*sp, field + ".port", 1);
  p.host_port = hp ? port_value(*hp, field + ".host_port", 1) : p.port;
  if (const json::value* a = o.if_contains("address")) {
    int family = 0;
    std::array<uint8_t, 16> addr{};
    const std::string_view t = str(*a, field + ".address");
    if (!parse_ip(t, family, addr)) throw_invalid(field + ".address", quoted(t) + " is not an IP address");
    p.address = ip_text(family, addr);
  }
  if (const json::value* pr = o.if_contains("protocol")) {
    if (str(*pr, field + ".protocol") != "tcp") throw_invalid(field + ".protocol", "only \"tcp\" can be published");
  }
  return p;
}

}  // namespace

NetworkPolicy parse_network_value(const json::value& v, const std::string& field) {
  NetworkPolicy p;
  if (v.is_string()) {
    if (str(v, field) != "none")
      throw_invalid(field, "expected \"none\" or a policy object, got " + kind_of(v));
    return p;
  }
  const json::object& o = obj(v, field);
  only_keys(o, field, {"allow", "dns", "publish", "egress_rate"});
  p.none = false;
  if (const json::value* a = o.if_contains("allow")) {
    const json::array& rules = arr(*a, field + ".allow");
    if (rules.size() > kMaxRules) throw_invalid(field + ".allow", "more than " + std::to_string(kMaxRules) + " rules");
    for (size_t i = 0; i < rules.size(); ++i) p.allow.push_back(parse_rule(rules[i], idx(field + ".allow", i)));
  }
  if (const json::value* d = o.if_contains("dns")) {
    const json::array& list = arr(*d, field + ".dns");
    if (list.size() > kMaxResolvers)
      throw_invalid(field + ".dns", "more than " + std::to_string(kMaxResolvers) + " resolvers");
    for (size_t i = 0; i < list.size(); ++i) {
      int family = 0;
      std::array<uint8_t, 16> addr{};
      const std::string_view t = str(list[i], idx(field + ".dns", i));
      if (!parse_ip(t, family, addr)) throw_invalid(idx(field + ".dns", i), quoted(t) + " is not an IP address");
      p.dns.push_back(ip_text(family, addr));
    }
  }
  if (const json::value* pub = o.if_contains("publish")) {
    const json::array& list = arr(*pub, field + ".publish");
    if (list.size() > kMaxPublish)
      throw_invalid(field + ".publish", "more than " + std::to_string(kMaxPublish) + " ports");
    std::set<std::pair<std::string, uint16_t>> seen;
    for (size_t i = 0; i < list.size(); ++i) {
      p.publish.push_back(parse_publish(list[i], idx(field + ".publish", i)));
      if (!seen.insert({p.publish.back().address, p.publish.back().host_port}).second)
        throw_invalid(idx(field + ".publish", i) + ".host_port", "published twice on the same address");
    }
  }
  if (const json::value* r = o.if_contains("egress_rate")) {
    const std::string f = field + ".egress_rate";
    uint64_t rate = 0;
    if (r->is_string()) {
      rate = parse_size(str(*r, f), f);
    } else if (r->is_uint64() || (r->is_int64() && r->get_int64() >= 0)) {
      rate = r->is_uint64() ? r->get_uint64() : static_cast<uint64_t>(r->get_int64());
    } else {
      throw_invalid(f, "expected bytes per second (a number or a size such as \"10M\"), got " + kind_of(*r));
    }
    if (rate != 0 && (rate < kMinRate || rate > kMaxRate))
      throw_invalid(f, "must be 0 (unlimited) or 8 KiB/s .. 1 TiB/s, got " + std::to_string(rate));
    p.egress_rate = rate;
  }
  for (size_t i = 0; i < p.allow.size(); ++i) {
    if (!p.allow[i].host.empty() && p.dns.empty())
      throw_invalid(idx(field + ".allow", i) + ".host", "a rule by name needs resolvers in \"" + field + ".dns\"");
  }
  return p;
}

NetworkPolicy parse_network_text(std::string_view text, const std::string& field) {
  if (text == "none") return NetworkPolicy{};
  json_exact::Parsed parsed = json_exact::parse(text);
  if (!parsed.error.empty()) throw_invalid(field, parsed.error);
  if (!parsed.duplicate.empty()) throw_invalid(field + "." + parsed.duplicate, "duplicate key");
  return parse_network_value(parsed.value, field);
}

std::string net_rule_target(const NetAllowRule& r) {
  if (r.family == 0) return r.host;
  return ip_text(r.family, r.addr) + "/" + std::to_string(r.prefix);
}

std::string network_to_json(const NetworkPolicy& p) {
  if (p.none) return "\"none\"";
  json::object o;
  json::array allow;
  for (const NetAllowRule& r : p.allow) {
    json::object j;
    j[r.family == 0 ? "host" : "cidr"] = net_rule_target(r);
    if (!(r.port_lo == 0 && r.port_hi == 65535))
      j["ports"] = r.port_lo == r.port_hi ? std::to_string(r.port_lo)
                                          : std::to_string(r.port_lo) + "-" + std::to_string(r.port_hi);
    const char* proto = r.protocols == kNetTcp ? "tcp" : r.protocols == kNetUdp ? "udp"
                        : r.protocols == kNetIcmp ? "icmp" : r.protocols == kNetAllProtos ? "any" : "?";
    j["protocol"] = proto;
    allow.emplace_back(std::move(j));
  }
  o["allow"] = std::move(allow);
  json::array dns;
  for (const auto& d : p.dns) dns.emplace_back(d);
  o["dns"] = std::move(dns);
  json::array pub;
  for (const NetPublish& x : p.publish) pub.emplace_back(json::object{{"host_port", x.host_port}, {"port", x.port}, {"address", x.address}});
  o["publish"] = std::move(pub);
  o["egress_rate"] = p.egress_rate;
  return json::serialize(o);
}

void validate_network(const NetworkPolicy& p, const std::string& field) {
  // The canonical text names every field; reading it back checks each one as the parser does.
  const NetworkPolicy back = parse_network_text(network_to_json(p), field);
  if (!(back == p)) throw_invalid(field, "inconsistent policy (a rule's address bytes beyond its family or prefix)");
}

NetAllowRule parse_net_rule_text(std::string_view t, const std::string& field) {
  NetAllowRule r;
  for (std::string_view proto : {"tcp:", "udp:", "icmp:", "any:"}) {
    if (t.substr(0, proto.size()) == proto) {
      r.protocols = parse_protocol(proto.substr(0, proto.size() - 1), field);
      t.remove_prefix(proto.size());
      break;
    }
  }
  std::string_view target = t, ports;
  if (!t.empty() && t.front() == '[') {
    const size_t close = t.find(']');
    if (close == std::string_view::npos) throw_invalid(field, quoted(t) + ": '[' without ']'");
    target = t.substr(1, close - 1);
    if (close + 1 < t.size()) {
      if (t[close + 1] != ':') throw_invalid(field, quoted(t) + ": expected ':PORTS' after ']'");
      ports = t.substr(close + 2);
      if (ports.empty()) throw_invalid(field, quoted(t) + ": empty ports");
    }
  } else if (std::count(t.begin(), t.end(), ':') == 1) {
    const size_t colon = t.find(':');
    target = t.substr(0, colon);
    ports = t.substr(colon + 1);
    if (ports.empty()) throw_invalid(field, quoted(t) + ": empty ports");
  }
  int family = 0;
  std::array<uint8_t, 16> scratch{};
  const size_t slash = target.find('/');
  if (slash != std::string_view::npos || parse_ip(target, family, scratch))
    parse_cidr(target, field, r);
  else
    parse_host(target, field, r);
  if (!ports.empty()) parse_ports(ports, field, r);
  check_icmp_ports(r, field);
  return r;
}

}  // namespace sandlet
