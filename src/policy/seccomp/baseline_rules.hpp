// The baseline seccomp filter's rules (see policy/seccomp_profile.hpp), compiled with libseccomp.
// Build-time only: the library carries the compiled program, not libseccomp.
#pragma once
#include <string>

namespace sandlet::seccomp {

// struct sock_filter[] as bytes, for the architecture this runs on. Throws std::runtime_error.
std::string build_baseline_seccomp_bpf();

}  // namespace sandlet::seccomp
