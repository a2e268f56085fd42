// Every kernel feature the container backend and the layer store use: present or not, what the kernel
// answered to its probe, and which path sandlet takes here (what `sandlet doctor` and
// sandlet_runtime_features_json print).
#pragma once
#include <string>

#include "image/layer_mounts.hpp"
#include "sys/cgroup.hpp"

namespace sandlet::container {

// A JSON object:
//   {"kernel": "<uname -r, informational>",
//    "container_backend": "" | why it cannot run here,
//    "features": [{"name", "present", "used_for", "probe", "path"}...],
//    "weaker_guarantees": [{"name", "guarantee", "why"}...],   (what creates refuse unless accepted)
//    "paths": {"overlay": "...", "store_layers": "..."}}
// `cgroups` / `layers` may be null (then those features are "not probed"). Also runs probes that are
// too costly for every runtime open (a user namespace for the tmpfs idmap check, the overlay fallback's
// mount namespace).
std::string kernel_report_json(const sys::CgroupSystem* cgroups, const image::LayerMounts* layers);

}  // namespace sandlet::container
