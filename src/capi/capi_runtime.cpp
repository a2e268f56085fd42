// C ABI: errors, versions, runtime.
#include "capi/handles.hpp"

#include <pthread.h>

#include <atomic>

using sandlet::capi::guard;

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

SANDLET_API sandlet_code_t sandlet_error_code(const sandlet_error_t* err) { return err ? err->code : SANDLET_OK; }
SANDLET_API const char* sandlet_error_message(const sandlet_error_t* err) { return err ? err->message.c_str() : ""; }
SANDLET_API int sandlet_error_errno(const sandlet_error_t* err) { return err ? err->err_no : 0; }
SANDLET_API void sandlet_error_delete(sandlet_error_t* err) { delete err; }
SANDLET_API void sandlet_free(void* ptr) { std::free(ptr); }

SANDLET_API const char* sandlet_code_name(sandlet_code_t code) {
  switch (code) {
    case SANDLET_OK: return "OK";
    case SANDLET_CANCELLED: return "CANCELLED";
    case SANDLET_UNKNOWN: return "UNKNOWN";
    case SANDLET_INVALID_ARGUMENT: return "INVALID_ARGUMENT";
    case SANDLET_DEADLINE_EXCEEDED: return "DEADLINE_EXCEEDED";
    case SANDLET_NOT_FOUND: return "NOT_FOUND";
    case SANDLET_ALREADY_EXISTS: return "ALREADY_EXISTS";
    case SANDLET_PERMISSION_DENIED: return "PERMISSION_DENIED";
    case SANDLET_RESOURCE_EXHAUSTED: return "RESOURCE_EXHAUSTED";
    case SANDLET_FAILED_PRECONDITION: return "FAILED_PRECONDITION";
    case SANDLET_ABORTED: return "ABORTED";
    case SANDLET_OUT_OF_RANGE: return "OUT_OF_RANGE";
    case SANDLET_UNIMPLEMENTED: return "UNIMPLEMENTED";
    case SANDLET_INTERNAL: return "INTERNAL";
    case SANDLET_UNAVAILABLE: return "UNAVAILABLE";
    case SANDLET_DATA_LOSS: return "DATA_LOSS";
  }
  return "UNKNOWN";
}

SANDLET_API uint32_t sandlet_abi_version(void) { return SANDLET_ABI_VERSION; }
SANDLET_API const char* sandlet_version_string(void) { return SANDLET_VERSION_STRING; }

SANDLET_API sandlet_error_t* sandlet_runtime_open(const char* root, const sandlet_runtime_options_t* opts,
                                                  sandlet_runtime_t** out) {
  SANDLET_REQUIRE(out);
  return guard([&] {
    sandlet::RuntimeOptions options;
    if (opts) {
      if (opts->size < sizeof(uint32_t) * 2)
        throw sandlet::Error(sandlet::Code::kInvalidArgument, "sandlet_runtime_options_t.size is too small");
      if (opts->size >= offsetof(sandlet_runtime_options_t, worker_threads) + sizeof(uint32_t) && opts->worker_threads)
        options.worker_threads = opts->worker_threads;
      if (opts->size >= offsetof(sandlet_runtime_options_t, skip_gc_on_open) + sizeof(int))
        options.gc_on_open = !opts->skip_gc_on_open;
      if (opts->size >= offsetof(sandlet_runtime_options_t, disable_warm_pool) + sizeof(int))
        options.warm_pool = opts->disable_warm_pool ? 0 : options.warm_pool;
      if (opts->size >= offsetof(sandlet_runtime_options_t, create_soon) + sizeof(int))
        options.create_soon = opts->create_soon != 0;
    }
    auto handle = std::make_unique<sandlet_runtime>();
    handle->rt = sandlet::Runtime::open(root ? root : "", options);
    for (const auto& b : handle->rt->backends())
      handle->backend_infos.push_back({b.name.c_str(), b.available ? 1 : 0, b.reason.c_str()});
    *out = handle.release();
  });
}

SANDLET_API void sandlet_runtime_close(sandlet_runtime_t* rt) {
  if (!rt) return;
  if (rt->opened.forked()) return;  // a fork()ed child leaks it (see handles.hpp)
  try {
    rt->rt->close();
  } catch (...) {
  }
  delete rt;
}

SANDLET_API const char* sandlet_runtime_root(const sandlet_runtime_t* rt) { return rt ? rt->rt->root().c_str() : ""; }

SANDLET_API sandlet_error_t* sandlet_runtime_backends(sandlet_runtime_t* rt, const sandlet_backend_info_t** out,
                                                      size_t* count) {
  SANDLET_REQUIRE_HANDLE(rt);
  SANDLET_REQUIRE(out);
  SANDLET_REQUIRE(count);
  *out = rt->backend_infos.data();
  *count = rt->backend_infos.size();
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
