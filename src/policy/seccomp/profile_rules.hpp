// Compiles a seccomp profile (policy/seccomp/profile_table.hpp) with its relaxations and extra denials into
// a BPF program with libseccomp. At build time for the default profile (sandlet-seccomp-gen embeds it in the
// library), at create time for any other combination (policy/seccomp_profile.cpp caches the result). The
// static init never links libseccomp: it installs the bytes it is sent.
#pragma once
#include <span>
#include <string>
#include <string_view>

namespace sandlet::seccomp {

// struct sock_filter[] as bytes, for x86_64: calls of any other ABI (i386 through int 0x80, x32) kill the
// process; the profile's calls fail with their rule's errno (EPERM; refused socket families EAFNOSUPPORT,
// netlink protocols EPROTONOSUPPORT), `deny`'s with EPERM; every other call is allowed. `version` is a profile
// version (resolve_profile's answer), `allow` names relaxations, `deny` names system calls; all must be
// known (the spec checks them first). Throws Error(kInternal) if libseccomp fails, Error(kInvalidArgument)
// for an unknown name.
std::string compile_seccomp_bpf(std::string_view version, std::span<const std::string> allow,
                                std::span<const std::string> deny);

// The newest profile without relaxations or extra denials: what the library embeds.
std::string build_default_seccomp_bpf();

// Whether libseccomp knows `name` as a system call of this architecture; its number there, or -1.
bool syscall_known(std::string_view name);
int syscall_number(std::string_view name);
// The name of system call `nr` of this architecture; "syscall_<nr>" when libseccomp has none.
std::string syscall_name(int nr);

}  // namespace sandlet::seccomp
