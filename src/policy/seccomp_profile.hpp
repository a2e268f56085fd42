// The baseline seccomp filter every sandbox process runs under: it denies kernel-level operations a
// sandbox never needs. Its rules (src/policy/seccomp/baseline_rules.cpp) are compiled with libseccomp at build
// time and carried as raw BPF, shipped to the init, so neither the library nor the static init needs
// libseccomp at run time.
#pragma once
#include <string>

namespace sandlet::policy {

// struct sock_filter[] as bytes. Thread-safe.
const std::string& baseline_seccomp_bpf();

}  // namespace sandlet::policy
