#include "policy/seccomp_profile.hpp"

namespace sandlet::policy {
namespace {

// kBaselineSeccompBpf: the rules of src/policy/seccomp/baseline_rules.cpp, compiled at build time.
#include "seccomp_baseline.inc"

}  // namespace

const std::string& baseline_seccomp_bpf() {
  static const std::string bpf(reinterpret_cast<const char*>(kBaselineSeccompBpf), sizeof kBaselineSeccompBpf);
  return bpf;
}

}  // namespace sandlet::policy
