// The spec's `policy`: what binds the sandbox's processes, root inside included (docs/POLICY.md).
// A plain aggregate; its JSON form and checks are in spec_policy.cpp.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace boost::json {
class value;
}

namespace sandlet {

// What a file rule makes of a path and everything below it (docs/POLICY.md, "File rules").
enum class FileAccess { kReadOnly, kHidden, kWritable };

struct FileRule {
  std::string path;  // absolute, normalized; not in /proc, /dev or /sys; "/" only for read-only/writable
  FileAccess access = FileAccess::kReadOnly;
  bool operator==(const FileRule&) const = default;
};

struct Policy {
  // <= 64, each path once; nested rules are allowed: the most specific (longest) path wins below it.
  std::vector<FileRule> files;
  // Empty, read-only stand-ins over /proc's kernel-internal files (kcore, kpage*, sysrq-trigger, ...).
  bool mask_kernel_files = true;
};

constexpr size_t kMaxFileRules = 64;

// "read-only", "hidden", "writable"; parse_file_access throws naming `field` for anything else.
std::string_view file_access_name(FileAccess a);
FileAccess parse_file_access(std::string_view v, const std::string& field);

// Appends a rule (fields named "policy.files[N].path"/".access", N its index), checked as parse does.
void policy_add_file_rule(Policy& p, std::string_view path, FileAccess access);

// Every policy field as the setters check it (a Policy may have been filled in directly).
void validate_policy(const Policy& p);

// The JSON object "policy" (unknown sub-keys and wrong types are errors naming the field), and its form
// for spec_to_json: a complete JSON object text that parse_policy_json reads back as `p`.
void parse_policy_json(Policy& p, const boost::json::value& v);
std::string policy_to_json(const Policy& p);

}  // namespace sandlet
