#include "backends/host/init_file_policy.hpp"

namespace sandlet::host {

void add_file_policy(const Policy& policy, proto::InitConfig& config) {
  static_assert(proto::kMaxFileRules == kMaxFileRules, "the spec's limit (spec/policy_spec.hpp)");
  if (policy.mask_kernel_files) config.flags |= proto::kInitMaskKernelFiles;
  for (const FileRule& r : policy.files) {
    const proto::FileRuleAccess a = r.access == FileAccess::kHidden     ? proto::FileRuleAccess::kHidden
                                    : r.access == FileAccess::kWritable ? proto::FileRuleAccess::kWritable
                                                                        : proto::FileRuleAccess::kReadOnly;
    config.file_rules.push_back({r.path, a});
  }
  if (!config.file_rules.empty()) config.flags |= proto::kInitHasFileRules;
}

}  // namespace sandlet::host
