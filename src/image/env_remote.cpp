#include "image/env_remote.hpp"

#include <algorithm>
#include <boost/json.hpp>

#include "common/error.hpp"

namespace json = boost::json;

namespace sandlet::image {
namespace {

constexpr size_t kMaxRecord = 1u << 20;
constexpr size_t kMaxLayers = 500;

std::string record_key(const std::string& name) { return "envs/" + env_file_name(name) + ".json"; }

bool hex64(const std::string& s) {
  return s.size() == 64 && std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

template <class T>
void add_unique(std::vector<T>& to, const std::vector<T>& from) {
  for (const auto& x : from)
    if (std::find(to.begin(), to.end(), x) == to.end()) to.push_back(x);
}

// The record as a store gives it: anything but the expected shape is refused, naming the field.
EnvVersion parse_record(const std::string& text, const std::string& name, const std::string& where) {
  auto bad = [&](const std::string& why) { return Error(Code::kDataLoss, where + ": " + why); };
  json::error_code ec;
  json::value v = json::parse(text, ec);
  if (ec || !v.is_object()) throw bad("not a JSON object");
  const auto& o = v.as_object();
  auto* n = o.if_contains("name");
  if (!n || !n->is_string() || n->as_string() != name) throw bad("field 'name' is not '" + name + "'");
  EnvVersion out;
  auto* ls = o.if_contains("layers");
  if (!ls || !ls->is_array() || ls->as_array().empty() || ls->as_array().size() > kMaxLayers)
    throw bad("field 'layers' must list 1 to " + std::to_string(kMaxLayers) + " layer digests");
  for (const auto& l : ls->as_array()) {
    if (!l.is_string() || !hex64(std::string(l.as_string()))) throw bad("field 'layers' holds something not a digest");
    out.layers.emplace_back(l.as_string());
  }
  if (auto* e = o.if_contains("env")) {
    if (!e->is_object()) throw bad("field 'env' is not an object");
    for (const auto& [k, val] : e->as_object()) {
      if (!val.is_string() || k.empty() || k.find('=') != json::string_view::npos || k.find('\0') != json::string_view::npos)
        throw bad("field 'env' has an entry that is not NAME: \"value\"");
      out.env[std::string(k)] = std::string(val.as_string());
    }
  }
  for (auto [field, dest] : {std::pair{"workdir", &out.workdir}, std::pair{"user", &out.user}}) {
    auto* f = o.if_contains(field);
    if (!f) continue;
    if (!f->is_string()) throw bad(std::string("field '") + field + "' is not a string");
    *dest = std::string(f->as_string());
  }
  if (!out.workdir.empty() && out.workdir[0] != '/') throw bad("field 'workdir' is not an absolute path");
  return out;
}

bool same(const EnvVersion& a, const EnvVersion& b) {
  return a.layers == b.layers && a.env == b.env && a.workdir == b.workdir && a.user == b.user;
}

}  // namespace

EnvTransfer push_environment(LayerStore& layers, const std::string& ref, store::BlobStore& to, PushResult& r) {
  EnvTransfer t;
  t.version = layers.env_resolve(ref);
  t.name = ref.substr(0, ref.rfind('@'));
  for (const auto& digest : t.version.layers) {
    PushResult one = layers.push(digest, to);
    add_unique(r.layers, one.layers);
    r.objects_sent += one.objects_sent;
    r.bytes_sent += one.bytes_sent;
    r.objects_skipped += one.objects_skipped;
  }
  json::object env;
  for (const auto& [k, v] : t.version.env) env[k] = v;
  std::string record = json::serialize(json::object{{"name", t.name}, {"layers", json::value_from(t.version.layers)},
                                                    {"env", env}, {"workdir", t.version.workdir},
                                                    {"user", t.version.user}, {"version", t.version.version}});
  to.put(record_key(t.name), record);
  ++r.objects_sent;
  r.bytes_sent += record.size();
  return t;
}

bool remote_environment_exists(store::BlobStore& from, const std::string& name) {
  return from.head(record_key(name)).has_value();
}

EnvTransfer pull_environment(LayerStore& layers, const std::string& name, store::BlobStore& from,
                             const std::string& store_url, bool lazy, PullResult& r) {
  check_env_name(name, "environment name");
  std::string text = from.get(record_key(name), kMaxRecord);
  r.bytes_fetched += text.size();
  EnvVersion want = parse_record(text, name, from.config().url + "/" + record_key(name));
  for (const auto& digest : want.layers) {
    PullResult one = layers.pull(digest, from, store_url, lazy);
    for (const auto& d : one.layers) {
      if (std::find(r.layers.begin(), r.layers.end(), d) != r.layers.end()) continue;
      r.layers.push_back(d);
    }
    r.bytes_fetched += one.bytes_fetched;
    r.lazy = r.lazy || one.lazy;
  }
  r.image_bytes = 0;  // each layer once (layers share their parents)
  for (const auto& d : r.layers)
    if (auto l = layers.find(d)) r.image_bytes += l->size;
  EnvTransfer t;
  t.name = name;
  try {
    EnvVersion here = layers.env_resolve(name);
    if (same(here, want)) {
      t.version = here;
      return t;
    }
  } catch (const Error& e) {
    if (e.code() != Code::kNotFound) throw;
  }
  t.version = layers.env_create(name, want.layers, want.env, want.workdir, want.user);
  return t;
}

}  // namespace sandlet::image
