// The spec's `policy`: what a sandbox may do beyond its namespaces (docs/POLICY.md). Plain aggregates; each
// part is parsed and checked in spec/spec_policy.cpp.
#pragma once
#include <string>
#include <vector>

namespace sandlet {

// policy.seccomp: a versioned profile, made stricter by `deny` (system call names) and looser only by the
// named relaxations in `allow` (policy/seccomp/profile_table.hpp).
struct SeccompPolicy {
  std::string profile = "default";  // "default" (the newest version) or a version: "default-v1"
  std::vector<std::string> deny;    // each a system call libseccomp knows, once; none the init needs
  std::vector<std::string> allow;   // each a relaxation name, once
  bool operator==(const SeccompPolicy&) const = default;
};

struct Policy {
  SeccompPolicy seccomp;
  bool operator==(const Policy&) const = default;
};

// Checks every part as the parser does (a Policy may have been filled in directly). Throws
// Error(kInvalidArgument) naming the field ("policy.seccomp.deny[2]").
void validate_policy(const Policy& policy);

}  // namespace sandlet
