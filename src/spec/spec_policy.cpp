// The spec's `policy`: a table of sub-keys, each parsed into its part of Policy and checked.
#include "spec/spec_policy.hpp"

#include <boost/json.hpp>

#include <algorithm>

#include "common/error.hpp"
#include "common/json_exact.hpp"
#include "policy/seccomp/profile_rules.hpp"
#include "policy/seccomp/profile_table.hpp"

namespace sandlet {
namespace {

namespace json = boost::json;
using json_exact::shown;

[[noreturn]] void throw_type(const std::string& field, const std::string& expected) {
  throw_invalid(field, "expected " + expected);
}

const json::object& as_object(const json::value& v, const std::string& field) {
  if (!v.is_object()) throw_type(field, "an object");
  return v.get_object();
}

std::string as_string(const json::value& v, const std::string& field) {
  if (!v.is_string()) throw_type(field, "a string");
  return std::string(v.get_string());
}

std::vector<std::string> as_strings(const json::value& v, const std::string& field, const std::string& what) {
  if (!v.is_array()) throw_type(field, "an array of " + what);
  std::vector<std::string> out;
  const json::array& a = v.get_array();
  for (size_t i = 0; i < a.size(); ++i) out.push_back(as_string(a[i], field + "[" + std::to_string(i) + "]"));
  return out;
}

template <typename Names>
std::string listed(const Names& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + std::string(n);
  return out;
}

// ---- policy.seccomp --------------------------------------------------------------------------------------

void check_names_once(const std::vector<std::string>& names, const std::string& field) {
  for (size_t i = 0; i < names.size(); ++i)
    if (std::find(names.begin(), names.begin() + i, names[i]) != names.begin() + i)
      throw_invalid(field + "[" + std::to_string(i) + "]", "'" + shown(names[i]) + "' is listed twice");
}

void validate_seccomp(const SeccompPolicy& p) {
  if (seccomp::resolve_profile(p.profile).empty())
    throw_invalid("policy.seccomp.profile",
                  "unknown profile '" + shown(p.profile) + "' (known: " + listed(seccomp::profile_names()) + ")");
  for (size_t i = 0; i < p.allow.size(); ++i) {
    if (seccomp::find_relaxation(p.allow[i])) continue;
    std::vector<std::string_view> known;
    for (const auto& r : seccomp::relaxations()) known.push_back(r.name);
    throw_invalid("policy.seccomp.allow[" + std::to_string(i) + "]",
                  "unknown relaxation '" + shown(p.allow[i]) + "' (known: " + listed(known) + ")");
  }
  check_names_once(p.allow, "policy.seccomp.allow");
  for (size_t i = 0; i < p.deny.size(); ++i) {
    const std::string field = "policy.seccomp.deny[" + std::to_string(i) + "]";
    if (!seccomp::syscall_known(p.deny[i]))
      throw_invalid(field, "'" + shown(p.deny[i]) + "' is not a system call of this architecture");
    if (seccomp::init_needs(p.deny[i]))
      throw_invalid(field, "'" + p.deny[i] + "' is needed by the sandbox's init and cannot be denied");
  }
  check_names_once(p.deny, "policy.seccomp.deny");
}

void parse_seccomp(Policy& policy, const json::value& v) {
  SeccompPolicy p;
  for (const auto& kv : as_object(v, "policy.seccomp")) {
    const std::string key(kv.key());
    const std::string field = "policy.seccomp." + shown(key);
    if (key == "profile") {
      p.profile = as_string(kv.value(), field);
    } else if (key == "deny") {
      p.deny = as_strings(kv.value(), field, "system call names");
    } else if (key == "allow") {
      p.allow = as_strings(kv.value(), field, "relaxation names");
    } else {
      throw_invalid(field, "unknown field (known: profile, deny, allow)");
    }
  }
  validate_seccomp(p);
  policy.seccomp = std::move(p);
}

json::value seccomp_json(const Policy& policy) {
  const SeccompPolicy& p = policy.seccomp;
  json::array deny(p.deny.begin(), p.deny.end());
  json::array allow(p.allow.begin(), p.allow.end());
  return json::object{{"profile", p.profile}, {"deny", std::move(deny)}, {"allow", std::move(allow)}};
}

// ---- the table ---------------------------------------------------------------------------------------

struct SubKey {
  std::string_view name;
  void (*parse)(Policy&, const json::value&);
  json::value (*write)(const Policy&);
};

const SubKey kSubKeys[] = {
    {"seccomp", parse_seccomp, seccomp_json},
};

}  // namespace

void validate_policy(const Policy& policy) { validate_seccomp(policy.seccomp); }

void parse_policy_json(Policy& policy, const json::value& v) {
  Policy parsed;
  for (const auto& kv : as_object(v, "policy")) {
    const std::string_view key(kv.key().data(), kv.key().size());
    const SubKey* sub = nullptr;
    for (const SubKey& s : kSubKeys)
      if (s.name == key) sub = &s;
    if (!sub) {
      std::vector<std::string_view> known;
      for (const SubKey& s : kSubKeys) known.push_back(s.name);
      throw_invalid("policy." + shown(key), "unknown field (known: " + listed(known) + ")");
    }
    sub->parse(parsed, kv.value());
  }
  policy = std::move(parsed);
}

std::string policy_to_json(const Policy& policy) {
  json::object o;
  for (const SubKey& s : kSubKeys) o[s.name] = s.write(policy);
  return json::serialize(o);
}

}  // namespace sandlet
