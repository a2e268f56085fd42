// The spec's `policy`: what binds the sandbox's processes beyond its namespaces, root inside included
// (docs/POLICY.md). Plain aggregates; each part is parsed and checked in spec/spec_policy.cpp.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace sandlet {

// policy.seccomp: a versioned profile, made stricter by `deny` (system call names) and looser only by the
// named relaxations in `allow` (policy/seccomp/profile_table.hpp).
struct SeccompPolicy {
  std::string profile = "default";  // "default" (the newest version) or a version: "default-v1", "default-v2"
  std::vector<std::string> deny;    // each a system call libseccomp knows, once; none the init needs
  std::vector<std::string> allow;   // each a relaxation name, once
  bool operator==(const SeccompPolicy&) const = default;
};

// What a file rule makes of a path and everything below it (docs/POLICY.md, "File rules").
enum class FileAccess { kReadOnly, kHidden, kWritable };

struct FileRule {
  std::string path;  // absolute, normalized; not in /proc, /dev, /sys or /.sandlet; "/" only for read-only/writable
  FileAccess access = FileAccess::kReadOnly;
  bool operator==(const FileRule&) const = default;
};

struct Policy {
  SeccompPolicy seccomp;
  // <= 64, each path once; nested rules are allowed: the most specific (longest) path wins below it.
  std::vector<FileRule> files;
  // Empty, read-only stand-ins over /proc's kernel-internal files (kcore, kpage*, sysrq-trigger, ...).
  bool mask_kernel_files = true;
  bool operator==(const Policy&) const = default;
};

constexpr size_t kMaxFileRules = 64;

// "read-only", "hidden", "writable"; parse_file_access throws naming `field` for anything else.
std::string_view file_access_name(FileAccess a);
FileAccess parse_file_access(std::string_view v, const std::string& field);

// Appends a rule (fields named "policy.files[N].path"/".access", N its index), checked as parse does.
void policy_add_file_rule(Policy& p, std::string_view path, FileAccess access);

// Checks every part as the parser does (a Policy may have been filled in directly). Throws
// Error(kInvalidArgument) naming the field ("policy.seccomp.deny[2]", "policy.files[3].path").
void validate_policy(const Policy& policy);

}  // namespace sandlet
