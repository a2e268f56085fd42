// Push, pull and the loader's status (sandlet_store.h), and the runtime's side of lazy layers: the layer
// mounts ask the node's loader for watched cache files before mounting a lazy layer.
#include <sys/stat.h>

#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <optional>

#include "common/error.hpp"
#include "image/env_remote.hpp"
#include "lazy/fanotify_group.hpp"
#include "lazy/loader_protocol.hpp"
#include "runtime/runtime.hpp"
#include "runtime/store_url_choice.hpp"
#include "remote_store/blob_store.hpp"
#include "remote_store/store_url.hpp"
#include "sys/fs_util.hpp"

namespace sandlet {
namespace {

std::string env_or_empty(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

}  // namespace

std::string Runtime::store_url(const std::string& given) const {
  std::string url = resolve_store_url(options_, given);
  store::parse_store_url(url);  // INVALID_ARGUMENT naming what is wrong
  return url;
}

namespace {

// An environment `ref` (NAME or NAME@VERSION) names here.
bool has_environment(const image::LayerStore& store, const std::string& ref) {
  try {
    store.env_resolve(ref);
    return true;
  } catch (const Error&) {
    return false;
  }
}

}  // namespace

void Runtime::wire_lazy_layers() {
  loader_ = std::make_unique<lazy::LoaderClient>(root_, options_.loader);
  image::LayerMounts::LazyHooks hooks;
  hooks.attach = [this](const image::LayerInfo& layer) {
    const std::string& why = lazy::pre_content_unavailable();
    if (!why.empty())
      throw Error(Code::kUnimplemented, "layer " + layer.digest + " is lazy, and lazy layers need fanotify pre-content "
                                        "events (Linux 6.14): " + why + "; pull it eagerly");
    boost::json::array blobs;
    for (const auto& b : layer.blobs) {
      if (layer_store_->has_blob_data(b)) continue;
      blobs.push_back(boost::json::object{{"sha", b}, {"index", layer_store_->blob_path(b) + ".chunks"}});
    }
    boost::json::object req{{"op", "attach"}, {"layer", layer.digest}, {"name", layer.name},
                            {"image_bytes", layer.size}, {"store", layer.store}, {"blobs", std::move(blobs)}};
    // Credentials of an S3 store come from this process's environment; the loader keeps them in memory only.
    boost::json::object creds;
    for (auto [key, env] : {std::pair{"access_key", "AWS_ACCESS_KEY_ID"}, std::pair{"secret_key", "AWS_SECRET_ACCESS_KEY"},
                            std::pair{"session_token", "AWS_SESSION_TOKEN"}})
      creds[key] = env_or_empty(env);
    req["creds"] = std::move(creds);
    auto reply = loader_->call(req, /*start=*/true);
    std::map<std::string, std::string> out;
    const auto* cache = reply.if_contains("cache");
    size_t i = 0;
    for (const auto& b : layer.blobs) {
      if (layer_store_->has_blob_data(b)) continue;
      if (!cache || !cache->is_array() || i >= cache->as_array().size() || !cache->as_array()[i].is_string())
        throw Error(Code::kInternal, "the loader's attach reply lists no cache file for blob " + b);
      out[b] = std::string(cache->as_array()[i++].as_string());
    }
    return out;
  };
  // A loader that is gone has nothing attached: nothing to tell it.
  hooks.detach = [this](const std::string& digest) {
    try {
      loader_->call({{"op", "detach"}, {"layer", digest}}, false);
    } catch (const Error&) {
    }
  };
  // Whether a mounted layer is lazy, known per digest once read (a digest's blobs do not change).
  struct Known {
    std::mutex mu;
    std::map<std::string, bool> lazy;
  };
  hooks.reused = [this, known = std::make_shared<Known>()](const std::string& digest) {
    bool lazy = false;
    {
      std::lock_guard<std::mutex> lk(known->mu);
      auto it = known->lazy.find(digest);
      if (it == known->lazy.end()) {
        auto layer = layer_store_->find(digest);
        if (layer && !layer->store.empty())
          for (const auto& b : layer->blobs)
            if (!layer_store_->has_blob_data(b)) lazy = true;
        it = known->lazy.emplace(digest, lazy).first;
      }
      lazy = it->second;
    }
    // Both loader processes dead (a holder alone is succeeded): a new one watches the mounts again.
    if (lazy) loader_->ensure_running();
  };
  layer_mounts_->set_lazy_hooks(std::move(hooks));
}

std::string Runtime::layer_push(const std::string& ref, const std::string& store) {
  std::string url = store_url(store);
  store::StoreConfig cfg = store::parse_store_url(url);
  if (cfg.kind == store::StoreConfig::Kind::kDir) sys::mkdir_p(cfg.dir, 0755);  // a push may start a store
  auto to = store::open_store(cfg);
  // A layer first; else an environment of that name (NAME or NAME@VERSION): its layers and its record.
  std::optional<image::EnvTransfer> env;
  image::PushResult r;
  try {
    r = layer_store_->push(ref, *to);
  } catch (const Error& e) {
    if (e.code() != Code::kNotFound || !has_environment(*layer_store_, ref)) throw;
    env = image::push_environment(*layer_store_, ref, *to, r);
  }
  boost::json::object o{{"digest", r.layers.empty() ? "" : r.layers.back()}, {"store", store::describe(to->config())},
                        {"layers", boost::json::value_from(r.layers)}, {"objects_sent", r.objects_sent},
                        {"bytes_sent", r.bytes_sent}, {"objects_skipped", r.objects_skipped}};
  if (env) o["environment"] = {{"name", env->name}, {"version", env->version.version}};
  return boost::json::serialize(o);
}

std::string Runtime::layer_pull(const std::string& ref, const std::string& store, bool lazy) {
  std::string url = store_url(store);
  auto from = store::open_store(store::parse_store_url(url));
  std::string eager_reason;
  if (lazy) {
    eager_reason = lazy::pre_content_unavailable();
    if (!eager_reason.empty()) {
      eager_reason = "the kernel has no fanotify pre-content events (Linux 6.14): " + eager_reason;
      lazy = false;
    } else if (!layer_mounts_->backing().file_backed) {
      eager_reason = "EROFS cannot mount files of this store here (file-backed mounts: Linux 6.12, a store on ext4, "
                     "xfs or btrfs): " + layer_mounts_->backing().answer;
      lazy = false;
    }
  }
  // A layer first; else an environment the store holds under that name: its layers, then its version here.
  std::optional<image::EnvTransfer> env;
  image::PullResult r;
  try {
    r = layer_store_->pull(ref, *from, url, lazy);
  } catch (const Error& e) {
    if (e.code() != Code::kNotFound || !image::remote_environment_exists(*from, ref))
      throw;
    r = {};
    env = image::pull_environment(*layer_store_, ref, *from, url, lazy, r);
  }
  boost::json::object o{{"digest", r.layers.empty() ? "" : r.layers.back()}, {"store", store::describe(from->config())},
                        {"layers", boost::json::value_from(r.layers)}, {"lazy", r.lazy},
                        {"eager_reason", eager_reason}, {"bytes_fetched", r.bytes_fetched},
                        {"image_bytes", r.image_bytes}};
  if (env) o["environment"] = {{"name", env->name}, {"version", env->version.version}};
  return boost::json::serialize(o);
}

std::string Runtime::loader_status() {
  boost::json::object st = loader_->status();
  if (!st.contains("running")) st["running"] = true;
  // Every lazy layer of this store, with the running loader's counters where it has them.
  std::map<std::string, boost::json::object> counted;
  if (auto* ls = st.if_contains("layers"); ls && ls->is_array())
    for (const auto& v : ls->as_array())
      if (v.is_object() && v.as_object().contains("digest"))
        counted[std::string(v.as_object().at("digest").as_string())] = v.as_object();
  boost::json::array layers;
  for (const auto& l : layer_store_->list()) {
    if (l.store.empty()) continue;
    auto it = counted.find(l.digest);
    if (it != counted.end()) {
      it->second["name"] = l.name;
      it->second["store"] = l.store;
      layers.push_back(it->second);
      continue;
    }
    layers.push_back(boost::json::object{{"digest", l.digest}, {"name", l.name}, {"store", l.store},
                                         {"image_bytes", l.size}, {"fetched_bytes", 0}, {"hits", 0}, {"misses", 0},
                                         {"fetch_errors", 0},
                                         {"fetch_ms", boost::json::object{{"p50", nullptr}, {"p90", nullptr}, {"p99", nullptr}}}});
  }
  st["layers"] = std::move(layers);
  if (!st.at("running").as_bool()) {
    // No loader: what the cache directory holds (fetched data kept from earlier loaders).
    uint64_t bytes = 0, blobs = 0;
    const std::string dir = lazy::cache_dir(root_);
    for (const auto& name : sys::list_dir(dir)) {
      if (name.size() != 64) continue;
      struct stat sb;
      if (::stat((dir + "/" + name).c_str(), &sb) != 0) continue;
      bytes += static_cast<uint64_t>(sb.st_blocks) * 512;
      ++blobs;
    }
    st["pid"] = 0;
    st["fetcher_pid"] = 0;
    st["started"] = 0;
    st["cache"] = {{"dir", dir}, {"bytes", bytes}, {"max_bytes", options_.loader.cache_max_bytes}, {"blobs", blobs}};
  }
  if (!st.contains("settings"))
    st["settings"] = {{"cache_max_bytes", options_.loader.cache_max_bytes}, {"fetch_unit", options_.loader.fetch_unit},
                      {"fetch_concurrency", options_.loader.fetch_concurrency},
                      {"fill_timeout_ms", options_.loader.fill_timeout_ms}};
  return boost::json::serialize(st);
}

}  // namespace sandlet
