// The re-attach after a gateway restart (net_gateway_reattach.hpp). A sandbox's open connections died with
// the old gateway; new ones work again.
#include <fcntl.h>

#include <boost/json.hpp>
#include <cstdio>
#include <filesystem>
#include <map>
#include <mutex>

#include "backends/host/dns_log.hpp"
#include "backends/host/net_gateway_client.hpp"
#include "backends/host/net_gateway_reattach.hpp"
#include "backends/host/netgw_counters.hpp"
#include "spec/network_spec.hpp"
#include "sys/fs_util.hpp"
#include "sys/pidfd.hpp"

namespace sandlet::host {
namespace {

std::mutex readers_mutex;
std::map<std::string, GatewayMemberOf>& readers() {
  static std::map<std::string, GatewayMemberOf> by_backend;
  return by_backend;
}

}  // namespace

void register_gateway_members(const std::string& backend, GatewayMemberOf member_of) {
  std::lock_guard<std::mutex> lk(readers_mutex);
  readers()[backend] = std::move(member_of);
}

void reattach_gateway_sandboxes(NetGatewayClient& gateway, const std::string& root) noexcept {
  std::map<std::string, GatewayMemberOf> by_backend;
  {
    std::lock_guard<std::mutex> lk(readers_mutex);
    by_backend = readers();
  }
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(root + "/sandboxes", ec)) {
    try {
      const std::string name = e.path().filename().string();
      if (name.empty() || name[0] == '.') continue;
      auto text = sys::read_file_if_exists(e.path().string() + "/record.json", 1u << 20);
      if (!text) continue;
      // Only the fields this needs, read as JSON: the record's type belongs to the runtime, above here.
      const boost::json::object rec = boost::json::parse(*text).as_object();
      const std::string state(rec.at("state").as_string());
      const auto reader = by_backend.find(std::string(rec.at("backend").as_string()));
      if (reader == by_backend.end() || (state != "running" && state != "paused")) continue;
      const std::optional<GatewayMember> st = reader->second(rec.at("backend_state").as_object());
      if (!st) continue;
      const auto* network = rec.at("spec").as_object().if_contains("network");
      const NetworkPolicy policy = network ? parse_network_value(*network) : NetworkPolicy{};
      const std::string id(rec.at("id").as_string());
      const sys::UniqueFd pidfd = sys::open_pidfd_checked(st->pid, st->start);
      if (!pidfd) continue;  // ended meanwhile
      const std::string ns_path = "/proc/" + std::to_string(st->pid) + "/ns/net";
      const sys::UniqueFd ns(::open(ns_path.c_str(), O_RDONLY | O_CLOEXEC));
      const sys::UniqueFd group(::open(st->cgroup_v2.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
      // Checked again after the opens: the namespace is the process's that the pidfd names, and the group
      // (where the gateway reads the allowlist) is this sandbox's own, the one its process runs in — a
      // damaged record must not hand the gateway another sandbox's rules.
      const auto proc_groups = sys::read_file_if_exists("/proc/" + std::to_string(st->pid) + "/cgroup", 65536);
      const std::string own = "/" + id;
      const std::string& v2 = st->cgroup_v2;
      if (!ns || !group || !proc_groups || v2.size() < own.size() || v2.compare(v2.size() - own.size(), own.size(), own) != 0 ||
          proc_groups->find(own) == std::string::npos || !sys::process_alive(st->pid, st->start))
        continue;
      const sys::UniqueFd dns_log = policy.dns.empty() ? sys::UniqueFd() : open_dns_log(e.path().string(), false);
      const sys::UniqueFd counters = open_netgw_counters(e.path().string(), false);
      gateway.attach(id, ns.get(), pidfd.get(), group.get(), policy, dns_log ? dns_log.get() : -1, counters.get());
    } catch (const std::exception&) {
      // One sandbox that cannot be attached again (e.g. its published port was taken meanwhile) does
      // not keep the others from it.
    }
  }
}

std::unique_ptr<NetGatewayClient> make_node_gateway(const std::string& root, const std::string& uplink_netns) {
  auto gw = std::make_unique<NetGatewayClient>(root, uplink_netns);
  gw->on_restart = [raw = gw.get(), root] {
    static thread_local bool running = false;  // a gateway killed again during the re-attach
    if (running) return;
    running = true;
    reattach_gateway_sandboxes(*raw, root);
    running = false;
  };
  return gw;
}

}  // namespace sandlet::host
