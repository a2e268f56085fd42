#include "netgw/gateway.hpp"

#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <chrono>
#include <cstdio>

#include "common/error.hpp"
#include "lazy/seqpacket.hpp"
#include "netgw/limits.hpp"
#include "netgw/netgw_paths.hpp"
#include "policy/net_uplink.hpp"

namespace sandlet::netgw {
namespace {

std::string reply_error(const Error& e) {
  return boost::json::serialize(boost::json::object{{"ok", false}, {"code", static_cast<int>(e.code())}, {"error", e.what()}});
}

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

}  // namespace

int64_t Gateway::now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

Gateway::Gateway(GatewayOptions o) : o_(std::move(o)) {
  if (!o_.uplink_netns.empty()) {
    uplink_.reset(::open(o_.uplink_netns.c_str(), O_RDONLY | O_CLOEXEC));
    if (!uplink_) throw_errno("open the uplink namespace " + o_.uplink_netns);
    // The whole process (one thread) lives in the uplink: every outbound socket is made there.
    if (::setns(uplink_.get(), CLONE_NEWNET) != 0) throw_errno("enter the uplink namespace " + o_.uplink_netns);
  }
  uplink_.reset(::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC));
  if (!uplink_) throw_errno("open the gateway's own network namespace");
  uplink_addresses_ = sys::netns_addresses(-1);
  dns_ = std::make_unique<DnsService>(loop_);  // here: its workers start in the uplink namespace
}

std::vector<policy::NetProtectedRange> Gateway::protected_ranges() const {
  return policy::protected_ranges_of(uplink_addresses_);
}

SandboxPort* Gateway::find(const std::string& id) {
  auto it = sandboxes_.find(id);
  return it == sandboxes_.end() ? nullptr : it->second.get();
}

int Gateway::run(int ready_fd) {
  control_ = lazy::seqpacket_listen(control_socket_path(o_.root));
  (void)::fcntl(control_.get(), F_SETFL, O_NONBLOCK);
  loop_.add(control_.get(), EPOLLIN, this);
  if (ready_fd >= 0) {
    (void)!::write(ready_fd, "r", 1);
    ::close(ready_fd);
  }
  idle_since_ms_ = now_ms();
  for (;;) {
    loop_.run_once(100);
    const int64_t now = now_ms();
    for (auto& [id, sb] : sandboxes_) sb->tick(now);
    if (sandboxes_.empty() && clients_.empty() && now - idle_since_ms_ >= o_.idle_exit_ms) {
      // Leave the socket path first, so a starter that finds it gone starts a successor.
      ::unlink(control_socket_path(o_.root).c_str());
      return 0;
    }
  }
}

void Gateway::on_event(uint32_t) {
  for (;;) {
    const int fd = ::accept4(control_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) return;
    if (clients_.size() >= 64) {
      ::close(fd);
      continue;
    }
    auto c = std::make_unique<Client>();
    c->gw = this;
    c->fd.reset(fd);
    loop_.add(fd, EPOLLIN, c.get());
    clients_[c.get()] = std::move(c);
  }
}

void Gateway::on_client(Client& c, uint32_t) {
  std::vector<sys::UniqueFd> fds;
  bool eof = false;
  std::string req;
  try {
    req = lazy::seqpacket_recv(c.fd.get(), 64 * 1024, &fds, &eof);
  } catch (const Error&) {
    eof = true;
  }
  if (eof) {
    loop_.remove(c.fd.get());
    auto it = clients_.find(&c);
    loop_.retire(std::move(it->second));
    clients_.erase(it);
    if (sandboxes_.empty()) idle_since_ms_ = now_ms();
    return;
  }
  if (req.empty()) return;
  std::string reply;
  try {
    reply = handle(req, fds);
  } catch (const Error& e) {
    reply = reply_error(e);
  } catch (const std::exception& e) {
    reply = reply_error(Error(Code::kInternal, e.what()));
  }
  (void)::send(c.fd.get(), reply.data(), reply.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
}

std::string Gateway::handle(const std::string& text, std::vector<sys::UniqueFd>& fds) {
  boost::system::error_code ec;
  auto v = boost::json::parse(text, ec);
  if (ec || !v.is_object()) throw Error(Code::kInvalidArgument, "netgw request is not a JSON object");
  const auto& o = v.as_object();
  const std::string op = text_of(o, "op");
  boost::json::object out{{"ok", true}};
  if (op == "ping") {
    out["pid"] = ::getpid();
  } else if (op == "status") {
    boost::json::array list;
    for (auto& [id, sb] : sandboxes_)
      list.push_back({{"id", id}, {"connections", sb->connections()}, {"udp_flows", sb->flows()},
                      {"bytes_out", sb->relayed_out}, {"bytes_in", sb->relayed_in}, {"refused", sb->refused}});
    out["pid"] = ::getpid();
    out["sandboxes"] = std::move(list);
    out["connections"] = tcp_total;
    out["udp_flows"] = udp_total;
  } else if (op == "detach") {
    detach(text_of(o, "id"), "detach");
  } else if (op == "update") {
    SandboxPort* port = find(text_of(o, "id"));
    if (!port) throw Error(Code::kNotFound, "netgw update: sandbox " + text_of(o, "id") + " is not attached");
    uplink_addresses_ = sys::netns_addresses(-1);
    port->update(policy_of(o));
  } else if (op == "attach") {
    if (fds.size() != 3 && fds.size() != 4)
      throw Error(Code::kInvalidArgument, "netgw attach: needs the netns, pidfd and cgroup fds (and the DNS log)");
    AttachRequest r;
    r.id = text_of(o, "id");
    r.netns = std::move(fds[0]);
    r.pidfd = std::move(fds[1]);
    r.cgroup = std::move(fds[2]);
    if (fds.size() == 4) r.dns_log = std::move(fds[3]);
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
    uplink_addresses_ = sys::netns_addresses(-1);  // the uplink's addresses may have changed since
    if (sandboxes_.size() >= kMaxSandboxes) throw Error(Code::kResourceExhausted, "netgw: too many sandboxes attached");
    // Attached already (two runtimes re-attaching after a restart): what it holds stays as it is.
    if (sandboxes_.count(r.id)) return boost::json::serialize(boost::json::object{{"ok", true}, {"attached", true}});
    const std::string id = r.id;
    auto port = std::make_unique<SandboxPort>(*this, std::move(r));
    sandboxes_[id] = std::move(port);
  } else {
    throw Error(Code::kInvalidArgument, "netgw: unknown op '" + op + "'");
  }
  return boost::json::serialize(out);
}

void Gateway::detach(const std::string& id, const char* why) {
  auto it = sandboxes_.find(id);
  if (it == sandboxes_.end()) return;
  std::fprintf(stderr, "sandlet-netgw: %s %s\n", why, id.c_str());
  loop_.retire(std::move(it->second));
  sandboxes_.erase(it);
  if (sandboxes_.empty()) idle_since_ms_ = now_ms();
}

}  // namespace sandlet::netgw
