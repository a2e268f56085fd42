#include "backends/container/container_state.hpp"

#include <boost/json.hpp>

#include "common/error.hpp"

namespace json = boost::json;

namespace sandlet::container {

json::object ContainerState::to_json() const {
  json::object o;
  o["slot"] = slot;
  o["uid_base"] = uid_base;
  o["init_pid"] = init_pid;
  o["init_start"] = init_start;
  json::array v1;
  for (const auto& p : cgroups.v1) v1.emplace_back(p);
  o["cgroup_v2"] = cgroups.v2;
  o["cgroup_v1"] = std::move(v1);
  o["agent_socket"] = agent_socket;
  o["upper_mnt_id"] = upper_mnt_id;
  if (net_rules_map) o["net_rules_map"] = net_rules_map, o["net_stats_map"] = net_stats_map;
  if (net_gateway) o["net_gateway"] = true;
  return o;
}

ContainerState ContainerState::from_json(const json::object& o) {
  ContainerState s;
  if (o.empty()) return s;
  try {
    s.slot = o.at("slot").to_number<int>();
    s.uid_base = o.at("uid_base").to_number<uint32_t>();
    s.init_pid = o.at("init_pid").to_number<pid_t>();
    s.init_start = o.at("init_start").to_number<uint64_t>();
    s.cgroups.v2 = json::value_to<std::string>(o.at("cgroup_v2"));
    for (const auto& p : o.at("cgroup_v1").as_array()) s.cgroups.v1.push_back(json::value_to<std::string>(p));
    s.agent_socket = json::value_to<std::string>(o.at("agent_socket"));
    if (auto* m = o.if_contains("upper_mnt_id")) s.upper_mnt_id = m->to_number<uint64_t>();
    if (auto* m = o.if_contains("net_rules_map")) s.net_rules_map = m->to_number<uint32_t>();
    if (auto* m = o.if_contains("net_stats_map")) s.net_stats_map = m->to_number<uint32_t>();
    if (auto* m = o.if_contains("net_gateway"); m && m->is_bool()) s.net_gateway = m->as_bool();
  } catch (const std::exception& e) {
    throw Error(Code::kDataLoss, std::string("damaged container state in a sandbox record: ") + e.what());
  }
  return s;
}

}  // namespace sandlet::container
