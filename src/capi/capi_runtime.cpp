// C ABI: versions, the runtime, gc, listing (errors: capi_errors.cpp).
#include "capi/handles.hpp"

#include <pthread.h>

#include <atomic>

#include "backends/backend.hpp"
#include "capi/runtime_options.hpp"
#include "capi/fncall_registry.hpp"

using sandlet::capi::guard;

// The public capability bits are the backends' own.
static_assert(SANDLET_CAP_PREPARE_AHEAD == sandlet::kCapPrepareAhead && SANDLET_CAP_ONE_SHOT == sandlet::kCapOneShot &&
              SANDLET_CAP_PAUSE == sandlet::kCapPause && SANDLET_CAP_SNAPSHOT == sandlet::kCapSnapshot &&
              SANDLET_CAP_FORK == sandlet::kCapFork && SANDLET_CAP_STORE_LAYERS == sandlet::kCapStoreLayers &&
              SANDLET_CAP_LAYER_IMAGES == sandlet::kCapLayerImages && SANDLET_CAP_SET_LIMITS == sandlet::kCapSetLimits &&
              SANDLET_CAP_REUSE_CHECK == sandlet::kCapReuseCheck && SANDLET_CAP_MACHINE_STATE == sandlet::kCapMachineState);

namespace {
std::atomic<unsigned> g_forks{0};
void count_fork_in_child() noexcept { g_forks.fetch_add(1, std::memory_order_relaxed); }
}  // namespace

unsigned sandlet::capi::fork_generation() noexcept {
  // Registered before the first handle is made (its OpenedBy asks here); earlier forks do not matter.
  static const bool registered = ::pthread_atfork(nullptr, nullptr, &count_fork_in_child) == 0;
  (void)registered;
  return g_forks.load(std::memory_order_relaxed);
}

extern "C" {

SANDLET_API uint32_t sandlet_abi_version(void) { return SANDLET_ABI_VERSION; }
SANDLET_API const char* sandlet_version_string(void) { return SANDLET_VERSION_STRING; }

SANDLET_API sandlet_error_t* sandlet_runtime_open(const char* root, const sandlet_runtime_options_t* opts,
                                                  sandlet_runtime_t** out) {
  SANDLET_REQUIRE(out);
  return guard([&] {
    const sandlet::RuntimeOptions options = sandlet::capi::runtime_options(opts);
    auto handle = std::make_unique<sandlet_runtime>();
    handle->rt = sandlet::Runtime::open(root ? root : "", options);
    handle->options = options;
    for (const auto& b : handle->rt->backends())
      handle->backend_infos.push_back({b.name.c_str(), b.available ? 1 : 0, b.capabilities, b.reason.c_str(),
                                       b.summary.c_str(), b.details_json.c_str()});
    *out = handle.release();
  });
}

SANDLET_API void sandlet_runtime_close(sandlet_runtime_t* rt) {
  if (!rt) return;
  if (rt->opened.forked()) return;  // a fork()ed child leaks it (see handles.hpp)
  rt->builds->stop_and_join();  // builds in flight are cancelled and complete first
  sandlet::capi::fncall_forget(rt);  // its pooled containers go first (calls in flight fail)
  try {
    rt->rt->close();
  } catch (...) {
  }
  delete rt;
}

SANDLET_API const char* sandlet_runtime_root(const sandlet_runtime_t* rt) { return rt ? rt->rt->root().c_str() : ""; }

SANDLET_API sandlet_error_t* sandlet_runtime_backends(sandlet_runtime_t* rt, const sandlet_backend_info_t** out,
                                                      size_t* count, size_t* elem_size) {
  SANDLET_REQUIRE_HANDLE(rt);
  SANDLET_REQUIRE(out);
  SANDLET_REQUIRE(count);
  SANDLET_REQUIRE(elem_size);
  *out = rt->backend_infos.data();
  *count = rt->backend_infos.size();
  *elem_size = sizeof(sandlet_backend_info_t);
  return nullptr;
}

SANDLET_API sandlet_error_t* sandlet_runtime_gc(sandlet_runtime_t* rt, size_t* removed) {
  SANDLET_REQUIRE_HANDLE(rt);
  return guard([&] {
    size_t n = rt->rt->gc();
    if (removed) *removed = n;
  });
}

SANDLET_API sandlet_error_t* sandlet_runtime_stats_json(sandlet_runtime_t* rt, char** out) {
  SANDLET_REQUIRE_HANDLE(rt);
  SANDLET_REQUIRE(out);
  return guard([&] { *out = sandlet::capi::dup_string(rt->rt->stats_json()); });
}

SANDLET_API sandlet_error_t* sandlet_runtime_list(sandlet_runtime_t* rt, const char* label_filter,
                                                  sandlet_sandbox_list_t** out) {
  SANDLET_REQUIRE_HANDLE(rt);
  SANDLET_REQUIRE(out);
  return guard([&] {
    auto list = std::make_unique<sandlet_sandbox_list>();
    list->items = rt->rt->list(label_filter ? label_filter : "");
    *out = list.release();
  });
}

SANDLET_API sandlet_error_t* sandlet_runtime_logs(sandlet_runtime_t* rt, const char* id, char** out_json) {
  SANDLET_REQUIRE_HANDLE(rt);
  SANDLET_REQUIRE(id);
  SANDLET_REQUIRE(out_json);
  return guard([&] { *out_json = sandlet::capi::dup_string(rt->rt->logs_json(id)); });
}

SANDLET_API sandlet_error_t* sandlet_runtime_expired(sandlet_runtime_t* rt, char** out_json) {
  SANDLET_REQUIRE_HANDLE(rt);
  SANDLET_REQUIRE(out_json);
  return guard([&] { *out_json = sandlet::capi::dup_string(rt->rt->expired_json()); });
}

SANDLET_API sandlet_error_t* sandlet_runtime_forget_expired(sandlet_runtime_t* rt, const char* id) {
  SANDLET_REQUIRE_HANDLE(rt);
  SANDLET_REQUIRE(id);
  return guard([&] { rt->rt->forget_expired(id); });
}

SANDLET_API size_t sandlet_sandbox_list_count(const sandlet_sandbox_list_t* l) { return l ? l->items.size() : 0; }
SANDLET_API const char* sandlet_sandbox_list_id(const sandlet_sandbox_list_t* l, size_t i) {
  return l && i < l->items.size() ? l->items[i].record.id.c_str() : nullptr;
}
SANDLET_API const char* sandlet_sandbox_list_state(const sandlet_sandbox_list_t* l, size_t i) {
  return l && i < l->items.size() ? l->items[i].state.c_str() : nullptr;
}
SANDLET_API const char* sandlet_sandbox_list_json(const sandlet_sandbox_list_t* l, size_t i) {
  return l && i < l->items.size() ? l->items[i].json.c_str() : nullptr;
}
SANDLET_API void sandlet_sandbox_list_delete(sandlet_sandbox_list_t* l) { delete l; }

}  // extern "C"
