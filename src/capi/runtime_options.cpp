#include "capi/runtime_options.hpp"
#include "registry/registry_config.hpp"

#include <string>

#include "capi/options.hpp"
#include "common/error.hpp"

namespace sandlet::capi {
namespace {

[[noreturn]] void refuse(const char* field, const std::string& why) {
  throw Error(Code::kInvalidArgument, std::string("invalid runtime option '") + field + "': " + why);
}

// The loader's settings: 0 keeps LoaderSettings' default. The bounds keep a loader from being started with
// settings it cannot honour: the fetch unit is whole chunks (64 KiB) and one request's buffer stays
// bounded; a fill deadline below 100 ms would fail reads on any store's ordinary latency.
void loader_settings(const sandlet_runtime_options_t& o, lazy::LoaderSettings& s) {
  using T = sandlet_runtime_options_t;
  if (uint64_t max = field_or(o, &T::cache_max_bytes, 0)) s.cache_max_bytes = max;
  if (uint32_t unit = field_or(o, &T::fetch_unit, 0)) {
    constexpr uint32_t kChunk = 64u << 10, kMax = 64u << 20;
    if (unit % kChunk != 0 || unit > kMax)
      refuse("fetch_unit", std::to_string(unit) + " is not a multiple of 65536 between 64 KiB and 64 MiB");
    s.fetch_unit = unit;
  }
  if (uint32_t n = field_or(o, &T::fetch_concurrency, 0)) {
    if (n > 256) refuse("fetch_concurrency", std::to_string(n) + " is not between 1 and 256");
    s.fetch_concurrency = n;
  }
  if (uint32_t ms = field_or(o, &T::fill_timeout_ms, 0)) {
    if (ms < 100) refuse("fill_timeout_ms", std::to_string(ms) + " is below 100");
    s.fill_timeout_ms = ms;
  }
}

void audit_options(const sandlet_runtime_options_t& o, AuditOptions& a) {
  using T = sandlet_runtime_options_t;
  if (uint32_t keep = field_or(o, &T::audit_keep, 0)) {
    if (keep > 1000) refuse("audit_keep", std::to_string(keep) + " is above 1000");
    a.keep = keep;
  }
  if (uint64_t max = field_or(o, &T::audit_max_bytes, 0)) {
    if (max < 65536) refuse("audit_max_bytes", std::to_string(max) + " is below 65536");
    a.max_bytes = max;
  }
}

}  // namespace

RuntimeOptions runtime_options(const sandlet_runtime_options_t* opts) {
  RuntimeOptions options;
  if (!opts) return options;
  using T = sandlet_runtime_options_t;
  const T& o = *opts;
  check_options_size(o, "sandlet_runtime_options_t", "SANDLET_RUNTIME_OPTIONS_INIT");
  if (uint32_t n = field_or(o, &T::worker_threads, 0)) options.worker_threads = n;
  options.gc_on_open = !field_or(o, &T::skip_gc_on_open, 0);
  if (field_or(o, &T::disable_warm_pool, 0)) options.warm_pool = 0;
  options.create_soon = field_or(o, &T::create_soon, 0) != 0;
  if (uint32_t depth = field_or(o, &T::snapshot_max_depth, 0)) {
    if (depth < 2) refuse("snapshot_max_depth", "must be >= 2");
    options.snapshot_max_depth = depth;
  }
  if (const char* store = field_or(o, &T::store, nullptr)) options.store = store;  // "" = unset, as NULL
  if (const char* reg = field_or(o, &T::registries, nullptr)) {
    registry::parse_registry_config(reg, "field 'registries'");  // INVALID_ARGUMENT before anything is opened
    options.registries = reg;
  }
  loader_settings(o, options.loader);
  audit_options(o, options.audit);
  return options;
}

}  // namespace sandlet::capi
