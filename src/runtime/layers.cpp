// The runtime's side of layered environments: resolving a spec's environment and store references to
// mounted layer directories at create, and unmounting layers once no live sandbox uses them.
#include <algorithm>

#include "common/error.hpp"
#include "runtime/runtime.hpp"
#include "sys/fs_util.hpp"

namespace sandlet {
namespace {

// A spec naming a layer or environment this root does not have is an invalid spec (INVALID_ARGUMENT,
// like a missing layer directory), not a missing object the caller asked for; other failures keep theirs.
Code spec_code(const Error& e) { return e.code() == Code::kNotFound ? Code::kInvalidArgument : e.code(); }

}  // namespace

Spec Runtime::resolve_layers(const Spec& spec, SandboxRecord& rec, std::vector<sys::UniqueFd>& holds) {
  bool any_ref = !spec.environment.empty() ||
                 std::any_of(spec.layers.begin(), spec.layers.end(), [](const auto& l) { return image::is_store_ref(l); });
  if (!any_ref) return spec;

  Spec out = spec;
  std::vector<std::string> refs;
  if (!spec.environment.empty()) {
    image::EnvVersion env;
    try {
      env = layer_store_->env_resolve(spec.environment);
    } catch (const Error& e) {
      throw Error(spec_code(e), "invalid spec field 'environment': " + std::string(e.what()), e.err_no());
    }
    std::string name = spec.environment.substr(0, spec.environment.find('@'));
    rec.environment = name + "@" + std::to_string(env.version);
    refs = env.layers;
    out.env = env.env;  // the environment's variables, overridden by the spec's
    for (const auto& [k, v] : spec.env) out.env[k] = v;
    if (!env.workdir.empty() && spec.workdir == "/") out.workdir = env.workdir;
    if (!env.user.empty() && spec.user.empty()) out.user = env.user;
  }
  const size_t from_env = refs.size();
  refs.insert(refs.end(), spec.layers.begin(), spec.layers.end());
  if (refs.size() > 500) throw Error(Code::kInvalidArgument, "invalid spec field 'layers': more than 500 layers with the environment's");

  out.environment.clear();
  out.layers.clear();
  try {
    for (size_t i = 0; i < refs.size(); ++i) {
      const std::string& ref = refs[i];
      if (!image::is_store_ref(ref)) {
        out.layers.push_back(ref);
        rec.layers.push_back({ref, ""});
        continue;
      }
      std::string digest;
      try {
        digest = layer_store_->resolve(ref);
      } catch (const Error& e) {
        std::string field = i < from_env ? "environment" : "layers[" + std::to_string(i - from_env) + "]";
        throw Error(spec_code(e), "invalid spec field '" + field + "': " + e.what(), e.err_no());
      }
      rec.layers.push_back({ref, digest});
      holds.emplace_back();
      out.layers.push_back(layer_mounts_->acquire(digest, &holds.back()));
    }
  } catch (...) {
    holds.clear();
    release_layers_of(rec);
    throw;
  }
  return out;
}

std::set<std::string> Runtime::layers_in_use() {
  std::set<std::string> used;
  for (const auto& name : sys::list_dir(host_.root + "/sandboxes")) {
    std::string id = name.rfind(".reclaim-", 0) == 0 ? name.substr(9) : name;
    std::optional<SandboxRecord> rec;
    try {
      rec = load_record(id);
    } catch (const Error&) {
      continue;
    }
    if (!rec) continue;
    for (const auto& l : rec->layers) {
      if (!l.digest.empty()) used.insert(l.digest);
    }
  }
  return used;
}

void Runtime::release_layers_of(const SandboxRecord& rec) {
  bool any = std::any_of(rec.layers.begin(), rec.layers.end(), [](const auto& l) { return !l.digest.empty(); });
  if (!any) return;
  // Candidates: this sandbox's layers that no other sandbox of this process uses (cheap, in memory); the
  // records of every process are read only for those.
  std::set<std::string> candidates;
  for (const auto& l : rec.layers) {
    if (!l.digest.empty()) candidates.insert(l.digest);
  }
  {
    std::lock_guard lock(mutex_);
    for (const auto& [id, child] : children_) {
      if (id == rec.id) continue;
      for (const auto& l : child.record.layers) candidates.erase(l.digest);
    }
  }
  {
    std::lock_guard lock(warm_mutex_);
    for (const auto& d : warm_key_digests_) candidates.erase(d);
  }
  if (candidates.empty()) return;
  try {
    layer_mounts_->release_unused(&candidates, [this] { return layers_in_use(); });
  } catch (const Error&) {
    // A mount left behind is unmounted by the next gc; reclaiming the sandbox must not fail over it.
  }
}

}  // namespace sandlet
