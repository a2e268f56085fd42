// C ABI: the layer store and environments (src/image/layer_store.hpp).
#include <boost/json.hpp>

#include "capi/handles.hpp"

using sandlet::capi::guard;
namespace json = boost::json;

namespace {

sandlet::image::ImportOptions import_options(const sandlet_layer_import_options_t* opts) {
  sandlet::image::ImportOptions o;
  if (!opts) return o;
  if (opts->version != SANDLET_LAYER_IMPORT_OPTIONS_VERSION) {
    throw sandlet::Error(sandlet::Code::kInvalidArgument, "sandlet_layer_import_options_t.version must be " +
                                                              std::to_string(SANDLET_LAYER_IMPORT_OPTIONS_VERSION));
  }
  if (opts->role) o.role = opts->role;
  if (opts->name) o.name = opts->name;
  if (opts->parent) o.parent = opts->parent;
  o.dedupe = !opts->no_dedupe;
  if (opts->progress) {
    o.progress = [fn = opts->progress, ud = opts->progress_user_data](const sandlet::image::ImportProgress& p) {
      fn(ud, p.bytes, p.total_bytes, p.files);
    };
  }
  return o;
}

std::string layers_json(const std::vector<sandlet::image::LayerInfo>& layers) {
  std::string out = "[";
  for (size_t i = 0; i < layers.size(); ++i) out += (i ? "," : "") + layers[i].to_json();
  return out + "]";
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
    if (!result_json) return;
    json::array existed;
    for (bool e : r.existed) existed.push_back(e);
    *result_json = sandlet::capi::dup_string("{\"layers\":" + layers_json(r.layers) + ",\"existed\":" +
                                             json::serialize(existed) + ",\"environment\":" +
                                             json::serialize(json::value(r.environment)) + "}");
  });
}

SANDLET_API sandlet_error_t* sandlet_layer_list(sandlet_runtime_t* rt, char** out) {
  SANDLET_REQUIRE_HANDLE(rt);
  SANDLET_REQUIRE(out);
  return guard([&] { *out = sandlet::capi::dup_string(layers_json(rt->rt->layer_store().list())); });
}

SANDLET_API sandlet_error_t* sandlet_layer_inspect(sandlet_runtime_t* rt, const char* ref, char** out) {
  SANDLET_REQUIRE_HANDLE(rt);
  SANDLET_REQUIRE(ref);
  SANDLET_REQUIRE(out);
  return guard([&] { *out = sandlet::capi::dup_string(rt->rt->layer_store().inspect(ref).to_json()); });
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
    if (!report_json) return;
    json::object o{{"removed_layers", json::value_from(report.removed_layers)},
                   {"removed_blobs", json::value_from(report.removed_blobs)},
                   {"bytes_freed", report.bytes_freed}};
    *report_json = sandlet::capi::dup_string(json::serialize(o));
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
    if (layer_json) *layer_json = sandlet::capi::dup_string(merged.to_json());
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
    if (version_json) {
      sandlet::image::EnvInfo info{name, {v}};
      json::value j = json::parse(info.to_json());
      *version_json = sandlet::capi::dup_string(json::serialize(j.at("versions").at(0)));
    }
  });
}

SANDLET_API sandlet_error_t* sandlet_env_list(sandlet_runtime_t* rt, char** out) {
  SANDLET_REQUIRE_HANDLE(rt);
  SANDLET_REQUIRE(out);
  return guard([&] {
    std::string s = "[";
    auto envs = rt->rt->layer_store().env_list();
    for (size_t i = 0; i < envs.size(); ++i) s += (i ? "," : "") + envs[i].to_json();
    *out = sandlet::capi::dup_string(s + "]");
  });
}

SANDLET_API sandlet_error_t* sandlet_env_remove(sandlet_runtime_t* rt, const char* name) {
  SANDLET_REQUIRE_HANDLE(rt);
  SANDLET_REQUIRE(name);
  return guard([&] { rt->rt->layer_store().env_remove(name); });
}

}  // extern "C"
