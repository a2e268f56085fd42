// The baseline seccomp filter every sandbox process runs under: it denies kernel-level operations a
// sandbox never needs. Built once with libseccomp on the host and shipped to the init as raw BPF, so the
// static init needs no libseccomp.
#pragma once
#include <string>

namespace sandlet::sys {

// struct sock_filter[] as bytes. Thread-safe; computed once per process.
const std::string& baseline_seccomp_bpf();

}  // namespace sandlet::sys
