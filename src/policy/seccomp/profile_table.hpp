// The versioned seccomp profiles and the named relaxations a spec may ask for (docs/POLICY.md, "seccomp").
// Data only: the rules are compiled from these lists by policy/seccomp/profile_rules.cpp. A version, once
// released, never changes; a stricter or looser profile is a new version, and "default" names the newest.
#pragma once
#include <cerrno>
#include <span>
#include <string_view>

namespace sandlet::seccomp {

// "default-v2".
inline constexpr std::string_view kNewestProfile = "default-v2";

// "default" -> the newest version; a known version -> itself; anything else -> "" (unknown).
std::string_view resolve_profile(std::string_view name);
// Every accepted profile name, for error messages ("default", "default-v1", ...).
std::span<const std::string_view> profile_names();

// How an argument is compared. BPF sees the whole 64-bit register although the kernel reads int arguments
// (families, protocols, ioctl requests) as their low 32 bits: kMaskedEq with a 32-bit mask compares what
// the kernel reads; kGe compares all 64 bits, so a value with any upper bit set is "greater" — the rule
// that refuses values beyond a range also refuses every value a 32-bit comparison would alias.
enum class Cmp { kMaskedEq, kGe };

// A syscall argument test: (arg[index] & mask) == value, or arg[index] >= value (mask unused).
struct ArgMatch {
  unsigned index;
  unsigned long long mask;
  unsigned long long value;
  Cmp op = Cmp::kMaskedEq;
  std::string_view label = {};  // what it selects, for describe(): "AF_VSOCK"
};
// One rule of a profile: the syscall `name` fails with `error`, unconditionally when `arg` is null, else
// when `arg` matches and, if set, `and_arg` too (on another argument: libseccomp 2.5 cannot put two
// comparisons on the same argument in one rule).
struct DenyRule {
  std::string_view name;
  const ArgMatch* arg;
  const ArgMatch* and_arg = nullptr;
  int error = EPERM;
};

// The rules of a known profile version (resolve_profile's answer); empty for an unknown one.
std::span<const DenyRule> profile_rules(std::string_view version);

// A named relaxation: the syscalls it removes from the profile's unconditional denials, and the argument
// comparisons whose rules it removes (every rule that uses one of them, as `arg` or `and_arg`). A profile
// without such rules (default-v1 has no socket rules) is not changed by the latter.
struct Relaxation {
  std::string_view name;
  std::span<const std::string_view> syscalls;
  std::span<const ArgMatch* const> arguments;
  std::string_view why;  // shown in docs and errors
};
std::span<const Relaxation> relaxations();
const Relaxation* find_relaxation(std::string_view name);

// The socket families the kernel knew when the newest profile was written (AF_MAX of Linux 5.15..6.18):
// families from here on are refused as one range.
inline constexpr unsigned kSocketFamilies = 46;
// "AF_VSOCK" for 40; "" beyond the table.
std::string_view socket_family_name(unsigned long long family);

// System calls the sandbox's init itself makes after its filter is installed: `deny` may not name them (the
// agent would stop working and the sandbox with it).
bool init_needs(std::string_view syscall);

}  // namespace sandlet::seccomp
