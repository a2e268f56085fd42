// C ABI: platform metrics (sandlet_metrics.h).
#include "sandlet/sandlet_metrics.h"

#include "capi/handles.hpp"
#include "runtime/metrics/admission.hpp"

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

SANDLET_API sandlet_error_t* sandlet_runtime_metrics_node_text(sandlet_runtime_t* rt, char** out) {
  SANDLET_REQUIRE_HANDLE(rt);
  SANDLET_REQUIRE(out);
  return guard([&] { *out = sandlet::capi::dup_string(rt->rt->metrics_text(/*node=*/true)); });
}

SANDLET_API sandlet_error_t* sandlet_runtime_metrics_node_json(sandlet_runtime_t* rt, char** out) {
  SANDLET_REQUIRE_HANDLE(rt);
  SANDLET_REQUIRE(out);
  return guard([&] { *out = sandlet::capi::dup_string(rt->rt->metrics_json(/*node=*/true)); });
}

SANDLET_API sandlet_error_t* sandlet_runtime_set_admission(sandlet_runtime_t* rt, const sandlet_admission_options_t* opts) {
  SANDLET_REQUIRE_HANDLE(rt);
  return guard([&] {
    sandlet::AdmissionOptions o;
    if (opts) {
      if (!SANDLET_HAS_FIELD(sandlet_admission_options_t, max_queue, opts->size))  // the first layout
        throw sandlet::Error(sandlet::Code::kInvalidArgument, "invalid admission field 'size': " +
                                                                  std::to_string(opts->size) + " is too small");
      o.max_sandboxes = opts->max_sandboxes;
      o.max_memory = opts->max_memory;
      o.max_pids = opts->max_pids;
      o.max_initializing = opts->max_initializing;
      o.timeout_s = opts->timeout_s;
      if (opts->max_queue) o.max_queue = static_cast<size_t>(opts->max_queue);  // 0 = the default
      if (SANDLET_HAS_FIELD(sandlet_admission_options_t, max_cpus, opts->size)) {
        if (!std::isfinite(opts->max_cpus) || opts->max_cpus < 0 || opts->max_cpus > 1e6)
          throw sandlet::Error(sandlet::Code::kInvalidArgument,
                               "invalid admission field 'max_cpus': must be >= 0 (0 = unbounded) and at most 1e6");
        o.max_cpu_millis = static_cast<uint64_t>(std::llround(opts->max_cpus * 1000));
      }
    }
    rt->rt->set_admission(o);
  });
}

}  // extern "C"
