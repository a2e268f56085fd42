// C ABI: platform metrics (sandlet_metrics.h).
#include "sandlet/sandlet_metrics.h"

#include "capi/handles.hpp"

using sandlet::capi::guard;

extern "C" {

SANDLET_API sandlet_error_t* sandlet_runtime_metrics_text(sandlet_runtime_t* rt, char** out) {
  SANDLET_REQUIRE_HANDLE(rt);
  SANDLET_REQUIRE(out);
  return guard([&] { *out = sandlet::capi::dup_string(rt->rt->metrics_text()); });
}

SANDLET_API sandlet_error_t* sandlet_runtime_metrics_json(sandlet_runtime_t* rt, char** out) {
  SANDLET_REQUIRE_HANDLE(rt);
  SANDLET_REQUIRE(out);
  return guard([&] { *out = sandlet::capi::dup_string(rt->rt->metrics_json()); });
}

}  // extern "C"
