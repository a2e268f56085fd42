// The layer store's environments: named, versioned lists of layers with env/workdir/user defaults, one
// JSON file each under <root>/layers/envs/.
#include <unistd.h>

#include <algorithm>

#include "common/error.hpp"
#include "image/layer_store.hpp"
#include "image/sha256.hpp"
#include "registry/image_ref.hpp"
#include "image/store_files.hpp"
#include "sys/fs_util.hpp"

namespace json = boost::json;

namespace sandlet::image {
namespace {

bool exists(const std::string& path) { return ::access(path.c_str(), F_OK) == 0; }

json::value env_version_to_json(const EnvVersion& v) {
  json::object env;
  for (const auto& [k, val] : v.env) env[k] = val;
  json::object o{{"version", v.version}, {"layers", json::value_from(v.layers)}, {"env", env},
                 {"workdir", v.workdir}, {"user", v.user}, {"created", v.created}};
  if (!v.image.reference.empty() || !v.image.entrypoint.empty() || !v.image.cmd.empty())
    o["image"] = json::object{{"reference", v.image.reference},
                              {"manifest_digest", v.image.manifest_digest},
                              {"platform", v.image.platform},
                              {"entrypoint", json::value_from(v.image.entrypoint)},
                              {"cmd", json::value_from(v.image.cmd)}};
  return o;
}

EnvImage image_from_json(const json::value& v) {
  EnvImage i;
  const auto& o = v.as_object();
  i.reference = json::value_to<std::string>(o.at("reference"));
  i.manifest_digest = json::value_to<std::string>(o.at("manifest_digest"));
  i.platform = json::value_to<std::string>(o.at("platform"));
  i.entrypoint = json::value_to<std::vector<std::string>>(o.at("entrypoint"));
  i.cmd = json::value_to<std::vector<std::string>>(o.at("cmd"));
  return i;
}

EnvInfo env_from_json(const json::value& v, const std::string& path) {
  try {
    EnvInfo info;
    info.name = json::value_to<std::string>(v.at("name"));
    for (const auto& jv : v.at("versions").as_array()) {
      EnvVersion ver;
      ver.version = jv.at("version").to_number<uint32_t>();
      ver.layers = json::value_to<std::vector<std::string>>(jv.at("layers"));
      ver.env = json::value_to<std::map<std::string, std::string>>(jv.at("env"));
      ver.workdir = json::value_to<std::string>(jv.at("workdir"));
      ver.user = json::value_to<std::string>(jv.at("user"));
      ver.created = jv.at("created").to_number<double>();
      if (const auto* img = jv.as_object().if_contains("image")) ver.image = image_from_json(*img);
      info.versions.push_back(std::move(ver));
    }
    return info;
  } catch (const std::exception& e) {
    throw Error(Code::kDataLoss, path + ": not a valid environment file (" + e.what() + ")");
  }
}

}  // namespace

void check_env_name(const std::string& name, const std::string& field) {
  std::string base = name;
  if (const size_t at = name.find("@sha256:"); at != std::string::npos) {
    Digest d;
    if (at == 0 || !from_hex(std::string_view(name).substr(at + 8), d))
      throw Error(Code::kInvalidArgument, "invalid " + field + " '" + name + "': '@sha256:' must end the name with 64 hex digits");
    base = name.substr(0, at);
  }
  if (base.size() > 255)
    throw Error(Code::kInvalidArgument, "invalid " + field + " '" + name.substr(0, 64) + "...': longer than 255 characters");
  size_t begin = 0;
  for (;;) {
    const size_t slash = base.find('/', begin);
    const std::string part = base.substr(begin, slash == std::string::npos ? std::string::npos : slash - begin);
    if (part.size() > 128 || part == "." || part == "..")
      throw Error(Code::kInvalidArgument, "invalid " + field + " '" + name + "': bad component '" + part + "'");
    check_layer_name(part, field + " component");
    if (slash == std::string::npos) break;
    begin = slash + 1;
  }
  // A name with '/' is a registry reference, as a spec's environment reads it (lowercase repositories).
  if (name.find('/') != std::string::npos && !registry::looks_like_image_ref(name))
    throw Error(Code::kInvalidArgument, "invalid " + field + " '" + name +
                                            "': a name with '/' must be an image reference (REGISTRY/REPOSITORY[:TAG], "
                                            "lowercase repository)");
  if (env_file_name(name).size() + 5 > 255)
    throw Error(Code::kInvalidArgument, "invalid " + field + " '" + name.substr(0, 64) + "...': too long");
}

std::string env_file_name(const std::string& name) {
  std::string out;
  for (char c : name) {
    if (c == '/') out += "%2F";
    else if (c == '@') out += "%40";
    else out += c;
  }
  return out;
}

std::pair<std::string, long> split_env_version(const std::string& ref) {
  const size_t at = ref.rfind('@');
  if (at == std::string::npos || ref.compare(at, 8, "@sha256:") == 0) return {ref, -1};
  long want = -1;
  try {
    size_t used = 0;
    want = std::stol(ref.substr(at + 1), &used);
    if (used != ref.size() - at - 1 || want <= 0) throw std::invalid_argument("");
  } catch (const std::exception&) {
    throw Error(Code::kInvalidArgument, "environment '" + ref + "': the version after '@' must be a positive integer");
  }
  return {ref.substr(0, at), want};
}

std::string EnvInfo::to_json() const {
  json::array vs;
  for (const auto& v : versions) vs.push_back(env_version_to_json(v));
  return json::serialize(json::object{{"name", name}, {"versions", vs}});
}

EnvVersion LayerStore::env_create(const std::string& name, const std::vector<std::string>& layer_refs,
                                  const std::map<std::string, std::string>& env, const std::string& workdir,
                                  const std::string& user, const EnvImage& image) {
  check_env_name(name, "environment name");
  if (layer_refs.empty()) throw Error(Code::kInvalidArgument, "environment " + name + ": at least one layer is needed");
  if (!workdir.empty() && workdir[0] != '/') {
    throw Error(Code::kInvalidArgument, "environment " + name + ": workdir must be an absolute path");
  }
  EnvVersion v;
  for (const auto& r : layer_refs) v.layers.push_back(resolve(r));
  v.env = env;
  v.workdir = workdir;
  v.user = user;
  v.image = image;
  v.created = sys::now_unix_seconds();
  FileLock lock(dir_ + "/lock");
  std::string path = dir_ + "/envs/" + env_file_name(name) + ".json";
  EnvInfo info;
  info.name = name;
  if (exists(path)) info = env_from_json(read_json_file(path), path);
  v.version = info.versions.empty() ? 1 : info.versions.back().version + 1;
  info.versions.push_back(v);
  write_json_file(path, json::parse(info.to_json()));
  return v;
}

std::vector<EnvInfo> LayerStore::env_list() const {
  std::vector<EnvInfo> out;
  for (const auto& f : sys::list_dir(dir_ + "/envs")) {
    if (f.size() <= 5 || f.compare(f.size() - 5, 5, ".json") != 0) continue;
    std::string path = dir_ + "/envs/" + f;
    out.push_back(env_from_json(read_json_file(path), path));
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  return out;
}

EnvVersion LayerStore::env_resolve(const std::string& ref) const {
  const auto [name, want] = split_env_version(ref);
  check_env_name(name, "environment name");
  std::string path = dir_ + "/envs/" + env_file_name(name) + ".json";
  if (!exists(path)) throw Error(Code::kNotFound, "environment '" + name + "' not found in " + dir_);
  EnvInfo info = env_from_json(read_json_file(path), path);
  if (info.versions.empty()) throw Error(Code::kNotFound, "environment '" + name + "' has no versions");
  if (want < 0) return info.versions.back();
  for (const auto& v : info.versions) {
    if (v.version == static_cast<uint32_t>(want)) return v;
  }
  throw Error(Code::kNotFound, "environment '" + name + "' has no version " + std::to_string(want));
}

bool LayerStore::env_exists(const std::string& ref) const {
  const std::string name = split_env_version(ref).first;
  try {
    check_env_name(name, "environment name");
  } catch (const Error&) {
    return false;
  }
  return exists(dir_ + "/envs/" + env_file_name(name) + ".json");
}

void LayerStore::env_remove(const std::string& name) {
  check_env_name(name, "environment name");
  FileLock lock(dir_ + "/lock");
  std::string path = dir_ + "/envs/" + env_file_name(name) + ".json";
  if (::unlink(path.c_str()) != 0) {
    if (errno == ENOENT) throw Error(Code::kNotFound, "environment '" + name + "' not found");
    throw_errno("remove " + path);
  }
}

}  // namespace sandlet::image
