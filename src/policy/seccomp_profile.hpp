// The seccomp filter a sandbox's processes run under (docs/POLICY.md, "seccomp"): a versioned profile that
// denies kernel-level operations a sandbox never needs, with the spec's relaxations and extra denials. The
// default profile (the newest version, nothing added or removed) is compiled with libseccomp at build time
// and carried as raw BPF; any other policy is compiled at create time and cached per distinct policy in
// the process. The init never links libseccomp: it installs the bytes it is sent.
#pragma once
#include <boost/json/object.hpp>
#include <string>

#include "spec/policy_spec.hpp"

namespace sandlet::policy {

// The default profile's program (struct sock_filter[] as bytes). Thread-safe.
const std::string& baseline_seccomp_bpf();

// The program for `p` (validated: validate_policy). Thread-safe; the embedded program for the default,
// else compiled once per distinct policy (order and repeats of names do not matter). Throws Error.
const std::string& seccomp_bpf_for(const SeccompPolicy& p);

// The effective policy, for the sandbox's info and the audit log:
//   {"profile": "default-v2", "requested": "default", "relaxations": [{"name", "syscalls", "arguments"}...],
//    "extra_denied": [...], "precompiled": true|false}
boost::json::object describe(const SeccompPolicy& p);

}  // namespace sandlet::policy
