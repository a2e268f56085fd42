// The runtime's side of layered environments: resolving a spec's environment and store references to
// mounted layer directories at create, and unmounting layers once no live sandbox uses them.
#include <algorithm>
#include <map>
#include <mutex>
#include <set>

#include "common/error.hpp"
#include "runtime/layers.hpp"
#include "sys/fs_util.hpp"

namespace sandlet {
namespace {

// A spec naming a layer or environment this root does not have is an invalid spec (INVALID_ARGUMENT,
// like a missing layer directory), not a missing object the caller asked for; other failures keep theirs.
Code spec_code(const Error& e) { return e.code() == Code::kNotFound ? Code::kInvalidArgument : e.code(); }

}  // namespace

bool LayerUsage::has_store_refs(const Spec& spec) {
  return !spec.environment.empty() || (!spec.toolkit.empty() && image::is_store_ref(spec.toolkit)) ||
         std::any_of(spec.layers.begin(), spec.layers.end(), [](const auto& l) { return image::is_store_ref(l); });
}

Spec LayerUsage::resolve(const Spec& spec, SandboxRecord& rec, std::vector<sys::UniqueFd>& holds,
                         std::vector<LayerImage>* images) {
  if (!has_store_refs(spec)) {
    if (images) {
      for (const auto& l : spec.layers) images->push_back(LayerImage{"", "", {}, false, l});
      if (!spec.toolkit.empty()) images->push_back(LayerImage{"", "", {}, false, spec.toolkit, true});
    }
    return spec;
  }
  // A store layer for a backend that mounts nothing itself: its images, verified once per process.
  const auto use = [&](const std::string& digest) {
    if (!images) {
      holds.emplace_back();
      return mounts_.acquire(digest, &holds.back());
    }
    const image::LayerInfo layer = store_.inspect(digest);
    {
      static std::mutex verified_mutex;
      static std::set<std::string> verified;
      std::lock_guard lock(verified_mutex);
      const std::string key = store_.meta_path(digest);  // per store: one process may open several roots
      if (!verified.count(key)) {
        store_.verify(layer);
        verified.insert(key);
      }
    }
    LayerImage img;
    img.digest = digest;
    img.meta_path = store_.meta_path(digest);
    // A lazy layer's missing blobs are the loader's cache files, filled as the backend reads them.
    std::map<std::string, std::string> cache;
    for (const auto& b : layer.blobs)
      if (!store_.has_blob_data(b)) img.lazy = true;
    if (img.lazy) {
      holds.emplace_back();
      cache = mounts_.attach_images(layer, &holds.back());
    }
    for (const auto& b : layer.blobs) {
      const auto it = cache.find(b);
      img.blobs.push_back(it != cache.end() ? it->second : store_.blob_path(b));
    }
    images->push_back(std::move(img));
    return "sha256:" + digest;
  };
  const auto host = [&](const std::string& dir) {
    if (images) images->push_back(LayerImage{"", "", {}, false, dir});
    return dir;
  };

  Spec out = spec;
  std::vector<std::string> refs;
  if (!spec.environment.empty()) {
    image::EnvVersion env;
    std::string local = spec.environment;
    try {
      if (env_resolver_) local = env_resolver_(spec.environment);
      env = store_.env_resolve(local);
    } catch (const Error& e) {
      throw Error(spec_code(e), "invalid spec field 'environment': " + std::string(e.what()), e.err_no());
    }
    const std::string name = image::split_env_version(local).first;
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
        out.layers.push_back(host(ref));
        rec.layers.push_back({ref, ""});
        continue;
      }
      image::LayerInfo layer;
      try {
        layer = store_.inspect(ref);
      } catch (const Error& e) {
        std::string field = i < from_env ? "environment" : "layers[" + std::to_string(i - from_env) + "]";
        throw Error(spec_code(e), "invalid spec field '" + field + "': " + e.what(), e.err_no());
      }
      const std::string& digest = layer.digest;
      // A snapshot above other layers must be on exactly those (else it would show another tree, silently).
      if (i > 0 && !layer.stack.empty()) {
        std::vector<std::string> below;
        for (const auto& l : rec.layers) below.push_back(l.digest.empty() ? l.ref : l.digest);
        if (below != layer.stack) {
          std::string field = i < from_env ? "environment" : "layers[" + std::to_string(i - from_env) + "]";
          throw Error(Code::kInvalidArgument, "invalid spec field '" + field + "': snapshot " + layer.digest +
                                                  " goes on other layers than those below it; name it as the "
                                                  "lowest layer (its own go below it)");
        }
      }
      // A snapshot as the lowest layer stands for its whole chain: the layers it was taken on go below it.
      if (i == 0 && !layer.stack.empty()) {
        if (layer.stack.size() + refs.size() > 500)
          throw Error(Code::kInvalidArgument, "invalid spec field 'layers': more than 500 layers with the snapshot's chain");
        for (const auto& below : layer.stack) {
          if (!image::is_store_ref(below)) {
            out.layers.push_back(host(below));
            rec.layers.push_back({below, ""});
            continue;
          }
          out.layers.push_back(use(below));
          rec.layers.push_back({below, below});
        }
      }
      rec.layers.push_back({ref, digest});
      out.layers.push_back(use(digest));
    }
    // The toolkit: mounted like a layer and held for the create; the sandbox keeps its own clone of it.
    // A backend that takes images gets the toolkit's last, flagged (a host directory as such).
    if (!spec.toolkit.empty() && image::is_store_ref(spec.toolkit)) {
      image::LayerInfo layer;
      try {
        layer = store_.inspect(spec.toolkit);
      } catch (const Error& e) {
        throw Error(spec_code(e), "invalid spec field 'toolkit': " + std::string(e.what()), e.err_no());
      }
      if (images) {
        use(layer.digest);
        images->back().toolkit = true;
      } else {
        holds.emplace_back();
        out.toolkit = mounts_.acquire(layer.digest, &holds.back());
      }
    } else if (!spec.toolkit.empty() && images) {
      images->push_back(LayerImage{"", "", {}, false, spec.toolkit, true});
    }
  } catch (...) {
    holds.clear();
    release_of(rec);
    throw;
  }
  return out;
}

// Sandboxes being reclaimed (retired) do not count: nothing of them runs any more.
std::set<std::string> LayerUsage::in_use() const {
  std::set<std::string> used;
  for (const auto& id : dirs_.names()) {
    if (id.rfind(SandboxDirs::kRetiredPrefix, 0) == 0) continue;
    std::optional<SandboxRecord> rec;
    try {
      rec = dirs_.load(id);
    } catch (const Error&) {
      continue;
    }
    if (!rec) continue;
    for (const auto& l : rec->layers)
      if (!l.digest.empty()) used.insert(l.digest);
    // Its last snapshot: the next one stacks on it (runtime/snapshot/snapshot.cpp).
    if (auto head = sys::read_file_if_exists(dirs_.dir(id) + "/snapshot.head", 128); head && head->size() >= 64)
      used.insert(head->substr(0, 64));
  }
  return used;
}

void LayerUsage::release_of(const SandboxRecord& rec) noexcept {
  try {
    // Candidates: this sandbox's layers that no other sandbox of this process uses (cheap, in memory); the
    // records of every process are read only for those.
    std::set<std::string> candidates;
    for (const auto& l : rec.layers)
      if (!l.digest.empty()) candidates.insert(l.digest);
    if (candidates.empty()) return;
    for (const auto& d : used_here_(rec.id)) candidates.erase(d);
    if (candidates.empty()) return;
    mounts_.release_unused(&candidates, [this] { return in_use(); });
  } catch (...) {
    // A mount left behind is unmounted by the next gc; reclaiming the sandbox must not fail over it.
  }
}

void LayerUsage::release_unused() noexcept {
  try {
    mounts_.release_unused(nullptr, [this] { return in_use(); });
  } catch (...) {
  }
}

}  // namespace sandlet
