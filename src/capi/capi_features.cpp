// C ABI: the kernel features report (what `sandlet doctor` prints).
#include "capi/handles.hpp"

#include <boost/json.hpp>
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
    boost::json::object report =
        boost::json::parse(sandlet::container::kernel_report_json(cgroups ? &*cgroups : nullptr, &rt->rt->layer_mounts()))
            .as_object();
    // One section per backend of the registry: available or not and why, what it supports, its own facts.
    boost::json::array backends;
    for (const auto& b : rt->rt->backends()) {
      boost::json::array caps;
      for (uint32_t bit = 1; bit != 0 && bit <= b.capabilities; bit <<= 1)
        if (b.capabilities & bit) caps.push_back(boost::json::string(sandlet::capability_names(bit)));
      backends.push_back({{"name", b.name},
                          {"summary", b.summary},
                          {"available", b.available},
                          {"reason", b.reason},
                          {"capabilities", std::move(caps)},
                          {"details", boost::json::parse(b.details_json)}});
    }
    report["backends"] = std::move(backends);
    *out = sandlet::capi::dup_string(boost::json::serialize(report));
  });
}

}  // extern "C"
