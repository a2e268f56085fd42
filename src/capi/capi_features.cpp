// C ABI: the kernel features report (what `sandlet doctor` prints).
#include "capi/handles.hpp"

#include <optional>

#include "backends/container/kernel_report.hpp"

using sandlet::capi::guard;

extern "C" {

SANDLET_API sandlet_error_t* sandlet_runtime_features_json(sandlet_runtime_t* rt, char** out) {
  SANDLET_REQUIRE_HANDLE(rt);
  SANDLET_REQUIRE(out);
  return guard([&] {
    std::optional<sandlet::sys::CgroupSystem> cgroups;
    try {
      cgroups = sandlet::sys::CgroupSystem::detect();
    } catch (const sandlet::Error&) {
      // Reported as a missing cgroup2 tree.
    }
    *out = sandlet::capi::dup_string(
        sandlet::container::kernel_report_json(cgroups ? &*cgroups : nullptr, &rt->rt->layer_mounts()));
  });
}

}  // extern "C"
