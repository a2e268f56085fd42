// The layer store's environments: named, versioned lists of layers with env/workdir/user defaults, one
// JSON file each under <root>/layers/envs/.
#include <unistd.h>

#include <algorithm>

#include "common/error.hpp"
#include "image/layer_store.hpp"
#include "image/store_files.hpp"
#include "sys/fs_util.hpp"

namespace json = boost::json;

namespace sandlet::image {
namespace {

bool exists(const std::string& path) { return ::access(path.c_str(), F_OK) == 0; }

json::value env_version_to_json(const EnvVersion& v) {
  json::object env;
  for (const auto& [k, val] : v.env) env[k] = val;
  return json::object{{"version", v.version}, {"layers", json::value_from(v.layers)}, {"env", env},
                      {"workdir", v.workdir}, {"user", v.user}, {"created", v.created}};
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
      info.versions.push_back(std::move(ver));
    }
    return info;
  } catch (const std::exception& e) {
    throw Error(Code::kDataLoss, path + ": not a valid environment file (" + e.what() + ")");
  }
}

}  // namespace

std::string EnvInfo::to_json() const {
  json::array vs;
  for (const auto& v : versions) vs.push_back(env_version_to_json(v));
  return json::serialize(json::object{{"name", name}, {"versions", vs}});
}

EnvVersion LayerStore::env_create(const std::string& name, const std::vector<std::string>& layer_refs,
                                  const std::map<std::string, std::string>& env, const std::string& workdir,
                                  const std::string& user) {
  check_layer_name(name, "environment name");
  if (layer_refs.empty()) throw Error(Code::kInvalidArgument, "environment " + name + ": at least one layer is needed");
  if (!workdir.empty() && workdir[0] != '/') {
    throw Error(Code::kInvalidArgument, "environment " + name + ": workdir must be an absolute path");
  }
  EnvVersion v;
  for (const auto& r : layer_refs) v.layers.push_back(resolve(r));
  v.env = env;
  v.workdir = workdir;
  v.user = user;
  v.created = sys::now_unix_seconds();
  FileLock lock(dir_ + "/lock");
  std::string path = dir_ + "/envs/" + name + ".json";
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
  std::string name = ref;
  long want = -1;
  if (size_t at = ref.rfind('@'); at != std::string::npos) {
    name = ref.substr(0, at);
    try {
      size_t used = 0;
      want = std::stol(ref.substr(at + 1), &used);
      if (used != ref.size() - at - 1 || want <= 0) throw std::invalid_argument("");
    } catch (const std::exception&) {
      throw Error(Code::kInvalidArgument, "environment '" + ref + "': the version after '@' must be a positive integer");
    }
  }
  check_layer_name(name, "environment name");
  std::string path = dir_ + "/envs/" + name + ".json";
  if (!exists(path)) throw Error(Code::kNotFound, "environment '" + name + "' not found in " + dir_);
  EnvInfo info = env_from_json(read_json_file(path), path);
  if (info.versions.empty()) throw Error(Code::kNotFound, "environment '" + name + "' has no versions");
  if (want < 0) return info.versions.back();
  for (const auto& v : info.versions) {
    if (v.version == static_cast<uint32_t>(want)) return v;
  }
  throw Error(Code::kNotFound, "environment '" + name + "' has no version " + std::to_string(want));
}

void LayerStore::env_remove(const std::string& name) {
  check_layer_name(name, "environment name");
  FileLock lock(dir_ + "/lock");
  std::string path = dir_ + "/envs/" + name + ".json";
  if (::unlink(path.c_str()) != 0) {
    if (errno == ENOENT) throw Error(Code::kNotFound, "environment '" + name + "' not found");
    throw_errno("remove " + path);
  }
}

}  // namespace sandlet::image
