// C ABI: remote stores and lazy layers (sandlet_store.h) -> Runtime::layer_push/_pull/loader_status.
// The shims settle what sandlet_store.h promises of the arguments themselves (a NULL or empty reference, an
// empty store URL, unknown flags, no store anywhere) before the runtime is asked, so those answers do not
// depend on which store client would have served the URL.
#include <cstdio>

#include <functional>

#include "capi/handles.hpp"
#include "registry/image_ref.hpp"

using sandlet::capi::dup_string;
using sandlet::capi::guard;

namespace {

void check_ref(const char* ref) {
  if (*ref == '\0') throw sandlet::Error(sandlet::Code::kInvalidArgument, "argument 'ref' is empty: name a layer");
}

// NULL: the runtime's store (its option, else $SANDLET_STORE; the runtime resolves it). An empty string is
// refused rather than read as NULL: a caller that meant a URL and built an empty one should hear so, not
// reach another store.
std::string store_url(const char* store) {
  if (store != nullptr && *store == '\0')
    throw sandlet::Error(sandlet::Code::kInvalidArgument,
                         "argument 'store' is an empty URL (NULL means the runtime's store)");
  return store != nullptr ? store : "";
}

}  // namespace

extern "C" {

SANDLET_API sandlet_error_t* sandlet_layer_push(sandlet_runtime_t* rt, const char* ref, const char* store,
                                                char** result_json) {
  SANDLET_REQUIRE_HANDLE(rt);
  SANDLET_REQUIRE(ref);
  return guard([&] {
    check_ref(ref);
    std::string result = rt->rt->layer_push(ref, store_url(store));
    if (result_json) *result_json = dup_string(result);
  });
}

SANDLET_API sandlet_error_t* sandlet_layer_pull(sandlet_runtime_t* rt, const char* ref, const char* store,
                                                uint32_t flags, char** result_json) {
  SANDLET_REQUIRE_HANDLE(rt);
  SANDLET_REQUIRE(ref);
  return guard([&] {
    check_ref(ref);
    if (uint32_t unknown = flags & ~SANDLET_PULL_LAZY) {
      char message[96];
      std::snprintf(message, sizeof message, "argument 'flags' has unknown bits 0x%x (SANDLET_PULL_*)", unknown);
      throw sandlet::Error(sandlet::Code::kInvalidArgument, message);
    }
    if (sandlet::registry::has_docker_scheme(ref)) {
      if (store) throw sandlet::Error(sandlet::Code::kInvalidArgument, "argument 'store': a docker:// image comes from its registry, not a store");
      if (flags & SANDLET_PULL_LAZY)
        throw sandlet::Error(sandlet::Code::kInvalidArgument,
                             "argument 'flags': a registry image is pulled whole (its gzip/zstd tar layers cannot be read "
                             "in place); push its layers to a store to pull them lazily elsewhere");
      std::string result = rt->rt->image_pull(ref, "");
      if (result_json) *result_json = dup_string(result);
      return;
    }
    std::string result = rt->rt->layer_pull(ref, store_url(store), (flags & SANDLET_PULL_LAZY) != 0);
    if (result_json) *result_json = dup_string(result);
  });
}

SANDLET_API sandlet_error_t* sandlet_image_pull(sandlet_runtime_t* rt, const char* ref, const char* name,
                                                sandlet_image_progress_fn progress, void* user, char** result_json) {
  SANDLET_REQUIRE_HANDLE(rt);
  SANDLET_REQUIRE(ref);
  return guard([&] {
    std::function<void(const sandlet::registry::PullProgress&)> fn;
    if (progress)
      fn = [progress, user](const sandlet::registry::PullProgress& p) {
        progress(user, p.phase.c_str(), p.layer, p.layers, p.bytes, p.total);
      };
    std::string result = rt->rt->image_pull(ref, name ? name : "", fn);
    if (result_json) *result_json = dup_string(result);
  });
}

SANDLET_API sandlet_error_t* sandlet_loader_status(sandlet_runtime_t* rt, char** json) {
  SANDLET_REQUIRE_HANDLE(rt);
  SANDLET_REQUIRE(json);
  return guard([&] { *json = dup_string(rt->rt->loader_status()); });
}

}  // extern "C"
