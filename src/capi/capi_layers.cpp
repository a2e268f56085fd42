// C ABI: the layer store and environments (src/image/layer_store.hpp).
#include <boost/json.hpp>
#include <set>

#include "capi/handles.hpp"
#include "capi/options.hpp"
#include "capi/store_json.hpp"

using sandlet::capi::check_options_size;
using sandlet::capi::dup_string;
using sandlet::capi::field_or;
using sandlet::capi::guard;
namespace json = boost::json;

namespace {

sandlet::image::ImportOptions import_options(const sandlet_layer_import_options_t* opts) {
  sandlet::image::ImportOptions o;
  if (!opts) return o;
  using T = sandlet_layer_import_options_t;
  check_options_size(*opts, "sandlet_layer_import_options_t", "SANDLET_LAYER_IMPORT_OPTIONS_INIT");
  if (const char* role = field_or(*opts, &T::role, nullptr)) o.role = role;
  if (const char* name = field_or(*opts, &T::name, nullptr)) o.name = name;
  if (const char* parent = field_or(*opts, &T::parent, nullptr)) o.parent = parent;
  o.dedupe = !field_or(*opts, &T::no_dedupe, 0);
  if (sandlet_progress_fn fn = field_or(*opts, &T::progress, nullptr)) {
    void* ud = field_or(*opts, &T::progress_user_data, nullptr);
    o.progress = [fn, ud](const sandlet::image::ImportProgress& p) { fn(ud, p.bytes, p.total_bytes, p.files); };
  }
  return o;
}

sandlet::image::ExportOptions export_options(const sandlet_layer_export_options_t* opts) {
  sandlet::image::ExportOptions o;
  if (!opts) return o;
  using T = sandlet_layer_export_options_t;
  check_options_size(*opts, "sandlet_layer_export_options_t", "SANDLET_LAYER_EXPORT_OPTIONS_INIT");
  o.zstd_level = field_or(*opts, &T::zstd_level, 0);
  if (sandlet_progress_fn fn = field_or(*opts, &T::progress, nullptr)) {
    void* ud = field_or(*opts, &T::progress_user_data, nullptr);
    o.progress = [fn, ud](const sandlet::image::ImportProgress& p) { fn(ud, p.bytes, p.total_bytes, p.files); };
  }
  return o;
}

std::vector<std::string> ref_list(const char* const* refs, size_t n) {
  if (n && !refs) throw sandlet::Error(sandlet::Code::kInvalidArgument, "layer list is NULL");
  std::vector<std::string> out;
  for (size_t i = 0; i < n; ++i) {
    if (!refs[i]) throw sandlet::Error(sandlet::Code::kInvalidArgument, "layer " + std::to_string(i) + " is NULL");
    out.emplace_back(refs[i]);
  }
  return out;
}

}  // namespace

extern "C" {

SANDLET_API sandlet_error_t* sandlet_layer_import(sandlet_runtime_t* rt, const char* path,
                                                  const sandlet_layer_import_options_t* opts, char** result_json) {
  SANDLET_REQUIRE_HANDLE(rt);
  SANDLET_REQUIRE(path);
  return guard([&] {
    auto r = rt->rt->layer_store().import(path, import_options(opts));
    if (result_json) *result_json = dup_string(sandlet::capi::import_result_json(r));
  });
}

SANDLET_API sandlet_error_t* sandlet_layer_list(sandlet_runtime_t* rt, char** out) {
  SANDLET_REQUIRE_HANDLE(rt);
  SANDLET_REQUIRE(out);
  return guard([&] { *out = dup_string(sandlet::capi::layer_list_json(rt->rt->layer_store().list())); });
}

SANDLET_API sandlet_error_t* sandlet_layer_inspect(sandlet_runtime_t* rt, const char* ref, char** out) {
  SANDLET_REQUIRE_HANDLE(rt);
  SANDLET_REQUIRE(ref);
  SANDLET_REQUIRE(out);
  return guard([&] { *out = dup_string(sandlet::capi::layer_json(rt->rt->layer_store().inspect(ref))); });
}

SANDLET_API sandlet_error_t* sandlet_layer_remove(sandlet_runtime_t* rt, const char* ref) {
  SANDLET_REQUIRE_HANDLE(rt);
  SANDLET_REQUIRE(ref);
  return guard([&] {
    auto& store = rt->rt->layer_store();
    std::string digest = store.resolve(ref);
    store.remove(digest, rt->rt->layers_in_use());
    rt->rt->layer_mounts().release_unused(nullptr, [&] { return rt->rt->layers_in_use(); });
  });
}

SANDLET_API sandlet_error_t* sandlet_layer_gc(sandlet_runtime_t* rt, char** report_json) {
  SANDLET_REQUIRE_HANDLE(rt);
  return guard([&] {
    rt->rt->gc();  // dead sandboxes first: their layers are then no longer in use
    auto report = rt->rt->layer_store().gc(rt->rt->layers_in_use());
    if (report_json) *report_json = dup_string(sandlet::capi::layer_gc_json(report));
  });
}

SANDLET_API sandlet_error_t* sandlet_layer_merge(sandlet_runtime_t* rt, const char* const* refs, size_t n,
                                                 const sandlet_layer_import_options_t* opts, char** layer_json) {
  SANDLET_REQUIRE_HANDLE(rt);
  return guard([&] {
    auto& runtime = *rt->rt;
    std::vector<sandlet::sys::UniqueFd> holds;
    auto merged = runtime.layer_store().merge(ref_list(refs, n), import_options(opts), [&](const std::string& d) {
      holds.emplace_back();
      return runtime.layer_mounts().acquire(d, &holds.back());
    });
    holds.clear();
    runtime.layer_mounts().release_unused(nullptr, [&] { return runtime.layers_in_use(); });
    if (layer_json) *layer_json = dup_string(sandlet::capi::layer_json(merged));
  });
}

SANDLET_API sandlet_error_t* sandlet_layer_export(sandlet_runtime_t* rt, const char* ref, const char* path,
                                                  const sandlet_layer_export_options_t* opts, char** result_json) {
  SANDLET_REQUIRE_HANDLE(rt);
  SANDLET_REQUIRE(ref);
  SANDLET_REQUIRE(path);
  return guard([&] {
    auto& runtime = *rt->rt;
    // Mounted for the read, unmounted after (success or not) unless a sandbox uses it.
    struct Mounted {
      sandlet::Runtime& runtime;
      std::set<std::string> digest;
      sandlet::sys::UniqueFd hold;
      ~Mounted() {
        hold.reset();
        if (digest.empty()) return;
        try {
          runtime.layer_mounts().release_unused(&digest, [&] { return runtime.layers_in_use(); });
        } catch (...) {  // best effort: gc unmounts what is left
        }
      }
    } mounted{runtime, {}, {}};
    auto r = runtime.layer_store().export_layer(ref, path, export_options(opts), [&](const std::string& d) {
      mounted.digest = {d};
      return runtime.layer_mounts().acquire(d, &mounted.hold);
    });
    if (result_json) *result_json = dup_string(sandlet::capi::export_result_json(r));
  });
}

SANDLET_API sandlet_error_t* sandlet_env_create(sandlet_runtime_t* rt, const char* name, const char* const* layers,
                                                size_t n, const char* defaults_json, char** version_json) {
  SANDLET_REQUIRE_HANDLE(rt);
  SANDLET_REQUIRE(name);
  return guard([&] {
    std::map<std::string, std::string> env;
    std::string workdir, user;
    if (defaults_json && *defaults_json) {
      boost::system::error_code ec;
      json::value v = json::parse(defaults_json, ec);
      if (ec || !v.is_object()) {
        throw sandlet::Error(sandlet::Code::kInvalidArgument, "environment defaults: expected a JSON object");
      }
      for (const auto& [k, val] : v.as_object()) {
        if (k == "env" && val.is_object()) {
          for (const auto& [ek, ev] : val.as_object()) {
            if (!ev.is_string()) throw sandlet::Error(sandlet::Code::kInvalidArgument, "environment defaults: env." + std::string(ek) + " must be a string");
            env[std::string(ek)] = std::string(ev.as_string());
          }
        } else if (k == "workdir" && val.is_string()) {
          workdir = val.as_string();
        } else if (k == "user" && val.is_string()) {
          user = val.as_string();
        } else {
          throw sandlet::Error(sandlet::Code::kInvalidArgument,
                               "environment defaults: unknown or mistyped field '" + std::string(k) + "'");
        }
      }
    }
    auto v = rt->rt->layer_store().env_create(name, ref_list(layers, n), env, workdir, user);
    if (version_json) *version_json = dup_string(sandlet::capi::env_version_json(v));
  });
}

SANDLET_API sandlet_error_t* sandlet_env_list(sandlet_runtime_t* rt, char** out) {
  SANDLET_REQUIRE_HANDLE(rt);
  SANDLET_REQUIRE(out);
  return guard([&] { *out = dup_string(sandlet::capi::env_list_json(rt->rt->layer_store().env_list())); });
}

SANDLET_API sandlet_error_t* sandlet_env_remove(sandlet_runtime_t* rt, const char* name) {
  SANDLET_REQUIRE_HANDLE(rt);
  SANDLET_REQUIRE(name);
  return guard([&] { rt->rt->layer_store().env_remove(name); });
}

}  // extern "C"
