#include "runtime/record.hpp"

#include <boost/json.hpp>

#include "common/error.hpp"

namespace json = boost::json;

namespace sandlet {

const char* state_name(SandboxState s) {
  switch (s) {
    case SandboxState::kRunning: return "running";
    case SandboxState::kPooled: return "pooled";
    default: return "creating";
  }
}

std::string SandboxRecord::to_json() const {
  json::object o;
  o["version"] = 1;
  o["id"] = id;
  o["backend"] = backend;
  o["state"] = state_name(state);
  o["spec"] = json::parse(spec_to_json(spec));
  o["created_at"] = created_at;
  o["deadline"] = deadline;
  o["slot"] = slot;
  o["uid_base"] = uid_base;
  o["init_pid"] = init_pid;
  o["init_start"] = init_start;
  o["owner_pid"] = owner_pid;
  o["owner_start"] = owner_start;
  json::array v1;
  for (const auto& p : cgroups.v1) v1.emplace_back(p);
  o["cgroup_v2"] = cgroups.v2;
  o["cgroup_v1"] = std::move(v1);
  o["agent_socket"] = agent_socket;
  o["environment"] = environment;
  json::array used;
  for (const auto& l : layers) used.push_back(json::object{{"ref", l.ref}, {"digest", l.digest}});
  o["layers"] = std::move(used);
  return json::serialize(o);
}

SandboxRecord SandboxRecord::from_json(const std::string& text) {
  try {
    json::object o = json::parse(text).as_object();
    if (o.at("version").to_number<int>() != 1) throw Error(Code::kDataLoss, "unsupported sandbox record version");
    SandboxRecord r;
    r.id = json::value_to<std::string>(o.at("id"));
    r.backend = json::value_to<std::string>(o.at("backend"));
    const auto& state = o.at("state").as_string();
    r.state = state == "running" ? SandboxState::kRunning
              : state == "pooled" ? SandboxState::kPooled
                                  : SandboxState::kCreating;
    r.spec = parse_spec_json(json::serialize(o.at("spec")));
    r.created_at = o.at("created_at").to_number<double>();
    r.deadline = o.at("deadline").to_number<double>();
    r.slot = o.at("slot").to_number<int>();
    r.uid_base = o.at("uid_base").to_number<uint32_t>();
    r.init_pid = o.at("init_pid").to_number<pid_t>();
    r.init_start = o.at("init_start").to_number<uint64_t>();
    r.owner_pid = o.at("owner_pid").to_number<pid_t>();
    r.owner_start = o.at("owner_start").to_number<uint64_t>();
    r.cgroups.v2 = json::value_to<std::string>(o.at("cgroup_v2"));
    for (const auto& p : o.at("cgroup_v1").as_array()) r.cgroups.v1.push_back(json::value_to<std::string>(p));
    r.agent_socket = json::value_to<std::string>(o.at("agent_socket"));
    if (const auto* env = o.if_contains("environment")) r.environment = json::value_to<std::string>(*env);
    if (const auto* used = o.if_contains("layers")) {
      for (const auto& l : used->as_array()) {
        r.layers.push_back({json::value_to<std::string>(l.at("ref")), json::value_to<std::string>(l.at("digest"))});
      }
    }
    return r;
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw Error(Code::kDataLoss, std::string("damaged sandbox record: ") + e.what());
  }
}

}  // namespace sandlet
