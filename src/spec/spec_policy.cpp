// The spec's `policy`: a table of sub-keys, each parsed into its part of Policy and checked.
#include "spec/spec_policy.hpp"

#include <boost/json.hpp>

#include <algorithm>

#include "common/error.hpp"
#include "common/json_exact.hpp"
#include "policy/seccomp/profile_rules.hpp"
#include "policy/seccomp/profile_table.hpp"
#include "spec/spec_text.hpp"

namespace sandlet {
namespace {

namespace json = boost::json;
using json_exact::shown;
using spec_text::check_normalized_path;
using spec_text::quoted;

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

// ---- policy.files, policy.mask_kernel_files -------------------------------------------------------

std::string file_field(size_t index, const char* part) {
  return "policy.files[" + std::to_string(index) + "]" + (part[0] ? std::string(".") + part : std::string());
}

// `inner` is `outer` or lies below it.
bool within(std::string_view inner, std::string_view outer) {
  if (outer == "/") return true;
  return inner.substr(0, outer.size()) == outer && (inner.size() == outer.size() || inner[outer.size()] == '/');
}

// Absolute and lexically normalized: a rule names exactly the path the kernel resolves.
void check_rule_path(const std::string& field, std::string_view v) {
  check_normalized_path(field, v);
  // The init's own views (masked kernel files cover /proc) and the runtime's toolkit.
  for (std::string_view own : {"/proc", "/dev", "/sys", "/.sandlet"}) {
    if (within(v, own))
      throw_invalid(field, quoted(v) + " is in " + std::string(own) + ", which the sandbox's init provides");
  }
}

void parse_files(Policy& p, const json::value& v) {
  if (!v.is_array()) throw_type("policy.files", "an array of {\"path\", \"access\"} objects");
  p.files.clear();
  const json::array& rules = v.get_array();
  for (size_t i = 0; i < rules.size(); ++i) {
    if (!rules[i].is_object()) throw_type(file_field(i, ""), "an object {\"path\", \"access\"}");
    const json::string* path = nullptr;
    const json::string* access = nullptr;
    for (const auto& kv : rules[i].get_object()) {
      const std::string key(kv.key().data(), kv.key().size());
      const std::string sub = file_field(i, json_exact::shown(key).c_str());
      if (key != "path" && key != "access") throw_invalid(sub, "unknown field");
      if (!kv.value().is_string()) throw_type(sub, "a string");
      (key == "path" ? path : access) = &kv.value().get_string();
    }
    if (!path) throw_invalid(file_field(i, "path"), "required");
    if (!access) throw_invalid(file_field(i, "access"), "required (\"read-only\", \"hidden\" or \"writable\")");
    if (p.files.size() >= kMaxFileRules)
      throw_invalid("policy.files", "at most " + std::to_string(kMaxFileRules) + " rules are supported");
    const FileAccess a = parse_file_access({access->data(), access->size()}, file_field(i, "access"));
    policy_add_file_rule(p, {path->data(), path->size()}, a);
  }
}

void parse_mask_kernel_files(Policy& p, const json::value& v) {
  if (!v.is_bool()) throw_type("policy.mask_kernel_files", "true or false");
  p.mask_kernel_files = v.get_bool();
}

json::value files_json(const Policy& p) {
  json::array files;
  for (const FileRule& r : p.files)
    files.push_back(json::object{{"path", r.path}, {"access", json::string(file_access_name(r.access))}});
  return files;
}

json::value mask_kernel_files_json(const Policy& p) { return p.mask_kernel_files; }

// ---- the table ---------------------------------------------------------------------------------------

struct SubKey {
  std::string_view name;
  void (*parse)(Policy&, const json::value&);
  json::value (*write)(const Policy&);
};

const SubKey kSubKeys[] = {
    {"seccomp", parse_seccomp, seccomp_json},
    {"files", parse_files, files_json},
    {"mask_kernel_files", parse_mask_kernel_files, mask_kernel_files_json},
};

}  // namespace

std::string_view file_access_name(FileAccess a) {
  switch (a) {
    case FileAccess::kReadOnly: return "read-only";
    case FileAccess::kHidden: return "hidden";
    case FileAccess::kWritable: return "writable";
  }
  return "?";
}

FileAccess parse_file_access(std::string_view v, const std::string& field) {
  for (FileAccess a : {FileAccess::kReadOnly, FileAccess::kHidden, FileAccess::kWritable})
    if (v == file_access_name(a)) return a;
  throw_invalid(field, "expected \"read-only\", \"hidden\" or \"writable\", got " + quoted(v));
}

void policy_add_file_rule(Policy& p, std::string_view path, FileAccess access) {
  if (p.files.size() >= kMaxFileRules)
    throw_invalid("policy.files", "at most " + std::to_string(kMaxFileRules) + " rules are supported");
  const size_t index = p.files.size();
  const std::string field = file_field(index, "path");
  check_rule_path(field, path);
  if (access != FileAccess::kReadOnly && access != FileAccess::kHidden && access != FileAccess::kWritable)
    throw_invalid(file_field(index, "access"), "expected \"read-only\", \"hidden\" or \"writable\"");
  if (path == "/" && access == FileAccess::kHidden)
    throw_invalid(file_field(index, "access"), "\"/\" cannot be hidden (nothing would be left to run)");
  for (size_t j = 0; j < p.files.size(); ++j) {
    if (p.files[j].path == path)
      throw_invalid(field, quoted(path) + " already has a rule: " + file_field(j, ""));
  }
  p.files.push_back(FileRule{std::string(path), access});
}

void validate_policy(const Policy& policy) {
  validate_seccomp(policy.seccomp);
  Policy check;
  for (const FileRule& r : policy.files) policy_add_file_rule(check, r.path, r.access);
}

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
