// The spec's `policy` object: a table of its sub-keys, each parsed and checked here, and its JSON form.
#include <boost/json.hpp>

#include "common/error.hpp"
#include "common/json_exact.hpp"
#include "spec/policy_spec.hpp"
#include "spec/spec_text.hpp"

namespace sandlet {
namespace {

namespace json = boost::json;
using spec_text::check_absolute_path;
using spec_text::quoted;

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
  check_absolute_path(field, v);
  if (v == "/") return;
  if (v.back() == '/') throw_invalid(field, quoted(v) + " ends in '/' (write it without)");
  for (size_t start = 1; start <= v.size();) {
    size_t end = v.find('/', start);
    if (end == std::string_view::npos) end = v.size();
    const std::string_view part = v.substr(start, end - start);
    if (part.empty() || part == "." || part == "..")
      throw_invalid(field, quoted(v) + " is not a normalized path (no \"//\", \".\" or \"..\" components)");
    start = end + 1;
  }
  // The init's own views (masked kernel files cover /proc) and the runtime's toolkit.
  for (std::string_view own : {"/proc", "/dev", "/sys", "/.sandlet"}) {
    if (within(v, own))
      throw_invalid(field, quoted(v) + " is in " + std::string(own) + ", which the sandbox's init provides");
  }
}

[[noreturn]] void throw_type(const std::string& field, const std::string& expected) {
  throw_invalid(field, "expected " + expected);
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

using SubParser = void (*)(Policy&, const json::value&);
struct SubKey {
  std::string_view name;
  SubParser parse;
};

const SubKey kPolicyKeys[] = {
    {"files", parse_files},
    {"mask_kernel_files", parse_mask_kernel_files},
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

void validate_policy(const Policy& p) {
  Policy check;
  for (const FileRule& r : p.files) policy_add_file_rule(check, r.path, r.access);
}

void parse_policy_json(Policy& p, const json::value& v) {
  if (!v.is_object()) throw_type("policy", "an object");
  for (const auto& kv : v.get_object()) {
    const std::string_view key(kv.key().data(), kv.key().size());
    const SubKey* sub = nullptr;
    for (const SubKey& k : kPolicyKeys)
      if (k.name == key) sub = &k;
    if (!sub) throw_invalid("policy." + json_exact::shown(key), "unknown field");
    sub->parse(p, kv.value());
  }
}

std::string policy_to_json(const Policy& p) {
  json::object o;
  json::array files;
  for (const FileRule& r : p.files) {
    json::object rule;
    rule["path"] = r.path;
    rule["access"] = json::string(file_access_name(r.access));
    files.push_back(std::move(rule));
  }
  o["files"] = std::move(files);
  o["mask_kernel_files"] = p.mask_kernel_files;
  return json::serialize(o);
}

}  // namespace sandlet
