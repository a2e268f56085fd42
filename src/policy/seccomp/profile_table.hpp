// The versioned seccomp profiles and the named relaxations a spec may ask for (docs/POLICY.md, "seccomp").
// Data only: the rules are compiled from these lists by policy/seccomp/profile_rules.cpp. A version, once
// released, never changes; a stricter or looser profile is a new version, and "default" names the newest.
#pragma once
#include <span>
#include <string_view>

namespace sandlet::seccomp {

// "default-v1".
inline constexpr std::string_view kNewestProfile = "default-v1";

// "default" -> the newest version; a known version -> itself; anything else -> "" (unknown).
std::string_view resolve_profile(std::string_view name);
// Every accepted profile name, for error messages ("default", "default-v1", ...).
std::span<const std::string_view> profile_names();

// A syscall argument test: (arg[index] & mask) == value (only the low 32 bits of mask/value are used by the
// rules that need the kernel's 32-bit view: ioctl request numbers, personality values).
struct ArgMatch {
  unsigned index;
  unsigned long long mask;
  unsigned long long value;
};
// One rule of a profile: the syscall `name` is denied (EPERM), unconditionally when `arg` is null, else when
// the argument matches.
struct DenyRule {
  std::string_view name;
  const ArgMatch* arg;
};

// The rules of a known profile version (resolve_profile's answer); empty for an unknown one.
std::span<const DenyRule> profile_rules(std::string_view version);

// A named relaxation: the syscalls it removes from the profile's unconditional denials.
struct Relaxation {
  std::string_view name;
  std::span<const std::string_view> syscalls;
  std::string_view why;  // shown in docs and errors
};
std::span<const Relaxation> relaxations();
const Relaxation* find_relaxation(std::string_view name);

// System calls the sandbox's init itself makes after its filter is installed: `deny` may not name them (the
// agent would stop working and the sandbox with it).
bool init_needs(std::string_view syscall);

}  // namespace sandlet::seccomp
