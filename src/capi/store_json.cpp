#include "capi/store_json.hpp"

#include <boost/json.hpp>

namespace json = boost::json;

namespace sandlet::capi {
namespace {

json::object layer_object(const image::LayerInfo& l) {
  return json::object{{"digest", l.digest},
                      {"role", l.role},
                      {"name", l.name},
                      {"source", l.source},
                      {"parent", l.parent},
                      {"stack", json::value_from(l.stack)},
                      {"created", l.created},
                      {"size", l.size},
                      {"stored_bytes", l.stored_bytes},
                      {"inodes", l.inodes},
                      {"blobs", json::value_from(l.blobs)}};
}

json::array layer_array(const std::vector<image::LayerInfo>& layers) {
  json::array out;
  out.reserve(layers.size());
  for (const auto& l : layers) out.push_back(layer_object(l));
  return out;
}

json::object env_version_object(const image::EnvVersion& v) {
  json::object env;
  for (const auto& [k, val] : v.env) env[k] = val;
  json::object o{{"version", v.version}, {"layers", json::value_from(v.layers)}, {"env", std::move(env)},
                 {"workdir", v.workdir}, {"user", v.user}, {"created", v.created}};
  // An environment made from an image: where it came from, and the config's entrypoint / cmd (recorded only).
  o["image"] = json::object{{"reference", v.image.reference}, {"manifest_digest", v.image.manifest_digest},
                              {"platform", v.image.platform}, {"entrypoint", json::value_from(v.image.entrypoint)},
                              {"cmd", json::value_from(v.image.cmd)}};
  return o;
}

}  // namespace

std::string layer_json(const image::LayerInfo& layer) { return json::serialize(layer_object(layer)); }

std::string layer_list_json(const std::vector<image::LayerInfo>& layers) {
  return json::serialize(layer_array(layers));
}

std::string import_result_json(const image::ImportResult& r) {
  json::array existed;
  for (bool e : r.existed) existed.push_back(e);
  return json::serialize(
      json::object{{"layers", layer_array(r.layers)}, {"existed", std::move(existed)}, {"environment", r.environment},
                   {"missing", json::value_from(r.missing)}});
}

std::string export_result_json(const image::ExportResult& r) {
  return json::serialize(json::object{{"digest", r.digest},
                                      {"path", r.path},
                                      {"bytes", r.bytes},
                                      {"files", r.files},
                                      {"compression", r.compressed ? "zstd" : "none"}});
}

std::string layer_gc_json(const image::GcReport& report) {
  return json::serialize(json::object{{"removed_layers", json::value_from(report.removed_layers)},
                                      {"removed_blobs", json::value_from(report.removed_blobs)},
                                      {"bytes_freed", report.bytes_freed}});
}

std::string env_version_json(const image::EnvVersion& version) {
  return json::serialize(env_version_object(version));
}

std::string env_list_json(const std::vector<image::EnvInfo>& envs) {
  json::array out;
  for (const auto& e : envs) {
    json::array versions;
    for (const auto& v : e.versions) versions.push_back(env_version_object(v));
    out.push_back(json::object{{"name", e.name}, {"versions", std::move(versions)}});
  }
  return json::serialize(out);
}

}  // namespace sandlet::capi
