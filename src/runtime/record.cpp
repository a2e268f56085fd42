#include "runtime/record.hpp"

#include <boost/json.hpp>

#include "common/error.hpp"
#include "common/json_exact.hpp"
#include "policy/seccomp_profile.hpp"

namespace json = boost::json;

namespace sandlet {
namespace {

// Boost.JSON's own parser may be one ulp off on a double: records are read exactly, so that a spec's
// numbers (and the times) come back as written.
json::value parse_exact(const std::string& text) {
  json_exact::Parsed parsed = json_exact::parse(text);
  if (!parsed.error.empty()) throw Error(Code::kDataLoss, "damaged sandbox record: " + parsed.error);
  return std::move(parsed.value);
}

constexpr int kRecordVersion = 2;

// Version 1 kept the container backend's fields at the top level.
json::object backend_state_v1(const json::object& o) {
  json::object s;
  for (const char* key : {"slot", "uid_base", "init_pid", "init_start", "cgroup_v2", "cgroup_v1", "agent_socket"})
    if (const auto* v = o.if_contains(key)) s[key] = *v;
  return s;
}

}  // namespace

std::string SandboxRecord::to_json() const {
  json::object o;
  o["version"] = kRecordVersion;
  o["id"] = id;
  o["backend"] = backend;
  o["state"] = state_name(state);
  o["created_at"] = created_at;
  o["deadline"] = deadline;
  o["owner_pid"] = owner_pid;
  o["owner_start"] = owner_start;
  o["environment"] = environment;
  json::array used;
  for (const auto& l : layers) used.push_back(json::object{{"ref", l.ref}, {"digest", l.digest}});
  o["layers"] = std::move(used);
  o["backend_state"] = backend_state;
  // The spec's own JSON text goes in as it is (it is a JSON object): parsing it back into a value only to
  // print it again cost as much as the rest of the record.
  std::string text = json::serialize(o);
  text.insert(text.size() - 1, ",\"spec\":" + spec_to_json(spec));
  return text;
}

SandboxRecord SandboxRecord::from_json(const std::string& text) {
  try {
    json::object o = parse_exact(text).as_object();
    const int version = o.at("version").to_number<int>();
    if (version != 1 && version != kRecordVersion)
      throw Error(Code::kDataLoss, "unsupported sandbox record version " + std::to_string(version));
    SandboxRecord r;
    r.id = json::value_to<std::string>(o.at("id"));
    r.backend = json::value_to<std::string>(o.at("backend"));
    auto state = state_from_name(o.at("state").as_string());
    if (!state) throw Error(Code::kDataLoss, "damaged sandbox record: unknown state");
    r.state = *state;
    r.spec = parse_spec_json(json::serialize(o.at("spec")));
    r.created_at = o.at("created_at").to_number<double>();
    r.deadline = o.at("deadline").to_number<double>();
    r.owner_pid = o.at("owner_pid").to_number<pid_t>();
    r.owner_start = o.at("owner_start").to_number<uint64_t>();
    if (const auto* env = o.if_contains("environment")) r.environment = json::value_to<std::string>(*env);
    if (const auto* used = o.if_contains("layers")) {
      for (const auto& l : used->as_array())
        r.layers.push_back({json::value_to<std::string>(l.at("ref")), json::value_to<std::string>(l.at("digest"))});
    }
    r.backend_state = version == 1 ? backend_state_v1(o) : o.at("backend_state").as_object();
    return r;
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw Error(Code::kDataLoss, std::string("damaged sandbox record: ") + e.what());
  }
}

std::string public_record_json(const SandboxRecord& rec, const char* state) {
  json::object o = parse_exact(rec.to_json()).as_object();
  o["state"] = state;
  // Secrets are the sandbox's, not its observers': their names only.
  if (auto* spec = o.if_contains("spec"); spec && spec->is_object())
    if (auto* secrets = spec->as_object().if_contains("secrets"); secrets && secrets->is_object())
      for (auto& kv : secrets->as_object()) kv.value() = "<hidden>";
  // What the sandbox runs under, resolved ("default" -> its version) and with its relaxations named.
  o["effective_policy"] = json::object{{"seccomp", policy::describe(rec.spec.policy.seccomp)}};
  return json::serialize(o);
}

}  // namespace sandlet
