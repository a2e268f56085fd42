#include "sys/seccomp_filter.hpp"

namespace sandlet::sys {
namespace {

// kBaselineSeccompBpf: the rules of src/seccomp/baseline_rules.cpp, compiled at build time.
#include "seccomp_baseline.inc"

}  // namespace

const std::string& baseline_seccomp_bpf() {
  static const std::string bpf(reinterpret_cast<const char*>(kBaselineSeccompBpf), sizeof kBaselineSeccompBpf);
  return bpf;
}

}  // namespace sandlet::sys
