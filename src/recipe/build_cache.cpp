// The build cache's keys and entry files (build_cache.hpp).
#include "recipe/build_cache.hpp"

#include <unistd.h>

#include "common/error.hpp"
#include "image/sha256.hpp"
#include "image/store_files.hpp"
#include "sys/fs_util.hpp"

namespace sandlet::build {

std::string cache_key(const std::vector<std::string>& layers, const Step& step, const std::string& inputs,
                      const std::vector<std::string>& secrets_given, const std::string& network) {
  image::Sha256 h;
  // Length-prefixed fields: no two different steps hash the same bytes.
  auto field = [&](const std::string& tag, const std::string& s) {
    h.update(tag + " " + std::to_string(s.size()) + ":");
    h.update(s);
  };
  field("version", "sandlet-build-cache 1");
  for (const auto& l : layers) field("layer", l);
  field("kind", std::to_string(static_cast<int>(step.kind)));
  for (const auto& a : step.argv) field("argv", a);
  for (const auto& a : step.arg_env) field("arg", a);
  // A secret mount by id and placement only: its value never enters the key (a changed secret does not
  // re-run a step, as in Docker; --no-cache does).
  for (const auto& m : step.secrets)
    field("secret", m.id + " " + m.target + " " + std::to_string(m.mode) + " " + std::to_string(m.uid) + ":" +
                        std::to_string(m.gid) + (m.required ? " required" : ""));
  for (const auto& id : secrets_given) field("secret-given", id);
  if (step.kind == Kind::kRun) field("network", network);
  for (const auto& s : step.sources) field("source", s);
  field("dest", step.dest);
  field("chown", step.chown);
  field("chmod", step.chmod);
  for (const auto& [k, v] : step.state.env) field("env", k + "=" + v);
  field("workdir", step.state.workdir);
  field("user", step.state.user);
  field("inputs", inputs);
  return image::to_hex(h.finish());
}

std::optional<std::string> BuildCache::get(const std::string& key) const {
  try {
    auto text = sys::read_file_if_exists(path(key), 64 << 10);
    if (!text) return std::nullopt;
    boost::json::value v = boost::json::parse(*text);
    const auto* layer = v.as_object().if_contains("layer");
    if (!layer || !layer->is_string()) return std::nullopt;
    std::string digest(layer->as_string());
    image::Digest d;
    if (!image::from_hex(digest, d)) return std::nullopt;
    return digest;
  } catch (...) {
    return std::nullopt;  // unreadable or malformed: a miss (the step runs and rewrites it)
  }
}

void BuildCache::put(const std::string& key, const std::string& layer, const std::string& instruction) {
  sys::mkdir_p(dir_, 0700);
  boost::json::object o;
  o["layer"] = layer;
  o["instruction"] = instruction;
  o["created"] = sys::now_unix_seconds();
  image::write_json_file(path(key), o);
}

void BuildCache::remove(const std::string& key) noexcept { ::unlink(path(key).c_str()); }

size_t BuildCache::forget_layer(const std::string& layer) noexcept {
  size_t n = 0;
  try {
    for (const auto& name : sys::list_dir(dir_)) {
      if (name.size() != 64 + 5 || name.compare(64, 5, ".json") != 0) continue;
      std::string key = name.substr(0, 64);
      if (get(key) == layer) {
        remove(key);
        ++n;
      }
    }
  } catch (...) {
  }
  return n;
}

}  // namespace sandlet::build
