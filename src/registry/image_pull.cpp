#include "registry/image_pull.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <future>
#include <map>
#include <mutex>
#include <thread>

#include "common/error.hpp"
#include "image/oci.hpp"
#include "image/sha256.hpp"
#include "image/store_files.hpp"
#include "registry/registry_client.hpp"
#include "sys/fs_util.hpp"

namespace sandlet::registry {
namespace {

constexpr uint64_t kMaxConfigBytes = 8u << 20;

// <store>/pulled/<blob hex> -> the store layer a registry blob became (a layer's digest names its content, so
// the mapping holds on any parent); used only while the store still has that layer.
std::string pulled_record(const image::LayerStore& store, const std::string& blob_digest) {
  return store.dir() + "/pulled/" + blob_digest.substr(7);
}

std::optional<std::string> layer_of_blob(const image::LayerStore& store, const std::string& blob_digest) {
  auto text = sys::read_file_if_exists(pulled_record(store, blob_digest), 256);
  if (!text) return std::nullopt;
  std::string digest = text->substr(0, text->find('\n'));
  if (!store.find(digest)) return std::nullopt;
  return digest;
}

std::map<std::string, std::string> env_map(const std::vector<std::string>& env) {
  std::map<std::string, std::string> out;
  for (const auto& kv : env)
    if (size_t eq = kv.find('='); eq != std::string::npos && eq > 0) out[kv.substr(0, eq)] = kv.substr(eq + 1);
  return out;
}

class Puller {
 public:
  Puller(image::LayerStore& store, const RegistryConfig& config, const ImageRef& ref, const ImagePullOptions& o)
      : store_(store), config_(config), ref_(ref), o_(o), client_(config, ref.registry) {}

  ImagePullResult run() {
    const auto t0 = std::chrono::steady_clock::now();
    r_.reference = ref_.canonical();
    r_.environment = o_.name.empty() ? r_.reference : o_.name;
    image::check_env_name(r_.environment, "environment name");
    r_.platform = config_.platform.empty() ? host_platform() : config_.platform;
    sys::mkdir_p(store_.dir() + "/pulled", 0755);
    // One pull of an image at a time per store: a second waits, then finds it there.
    image::FileLock hold(store_.dir() + "/pulled/." + image::to_hex(image::sha256(r_.reference)) + ".lock");
    if (!ref_.digest.empty() && already_here(ref_.digest)) return finish(t0);
    report({"manifest", 0, 0, 0, 0});
    FetchedManifest top = client_.manifest(ref_.repository, ref_.reference());
    r_.endpoint = top.endpoint;
    r_.manifest_digest = top.digest;
    if (already_here(top.digest)) return finish(t0);
    FetchedManifest m = std::move(top);
    if (image::is_image_index(m.media_type)) {
      const auto choice = image::pick_platform(m.body, r_.platform, "the index of " + r_.reference);
      m = client_.manifest(ref_.repository, choice.digest);
      if (image::is_image_index(m.media_type))
        throw Error(Code::kUnimplemented, r_.reference + ": an image index nested in an index");
    }
    image::ImageManifest manifest = image::parse_image_manifest(m.body, m.media_type, "the manifest of " + r_.reference);
    if (manifest.image.layers.empty()) throw Error(Code::kInvalidArgument, r_.reference + ": the image has no layers");
    const std::string config = client_.blob(ref_.repository, manifest.config_digest, kMaxConfigBytes);
    image::parse_image_config(config, "the config of " + r_.reference, manifest.image);
    import_layers(manifest.image);
    image::EnvImage from;
    from.reference = r_.reference;
    from.manifest_digest = r_.manifest_digest;
    from.platform = r_.platform;
    from.entrypoint = manifest.image.entrypoint;
    from.cmd = manifest.image.cmd;
    const image::EnvVersion v = store_.env_create(r_.environment, r_.layers, env_map(manifest.image.env),
                                                  manifest.image.workdir, manifest.image.user, from);
    r_.version = v.version;
    r_.new_version = true;
    return finish(t0);
  }

 private:
  // The environment already holds this image (same manifest, its layers still in the store).
  bool already_here(const std::string& manifest_digest) {
    if (!store_.env_exists(r_.environment)) return false;
    const image::EnvVersion v = store_.env_resolve(r_.environment);
    // The same reference (an index's digest, for a multi-platform image) for the same platform.
    if (v.image.manifest_digest != manifest_digest || v.image.platform != r_.platform) return false;
    for (const auto& l : v.layers)
      if (!store_.find(l)) return false;
    r_.version = v.version;
    r_.layers = v.layers;
    r_.layers_reused = v.layers.size();
    r_.manifest_digest = manifest_digest;
    return true;
  }

  ImagePullResult finish(std::chrono::steady_clock::time_point t0) {
    r_.bytes_fetched = bytes_ + client_.bytes_received();
    if (r_.endpoint.empty()) r_.endpoint = client_.last_endpoint();
    r_.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    report({"done", r_.layers.size(), r_.layers.size(), r_.bytes_fetched, 0});
    return r_;
  }

  void report(const PullProgress& p) {
    if (!o_.progress) return;
    std::lock_guard<std::mutex> lock(progress_mutex_);
    o_.progress(p);
  }

  // Downloads the blobs the store lacks (up to parallel_downloads at once, each with a client of its own) and
  // imports layer i as soon as it and every layer below it are there.
  void import_layers(image::OciImage& img) {
    const size_t n = img.layers.size();
    std::vector<std::optional<std::string>> known(n);
    for (size_t i = 0; i < n; ++i) known[i] = layer_of_blob(store_, img.layers[i].digest);
    const std::string tmp = store_.dir() + "/tmp/" + sys::random_hex(8);
    sys::mkdir_p(tmp, 0700);
    image::FileLock tmp_hold(tmp + "/lock");  // the store's sweep leaves a held tmp dir alone
    std::vector<std::promise<void>> done(n);
    std::vector<std::shared_future<void>> ready;
    for (auto& p : done) ready.push_back(p.get_future().share());
    std::mutex next_mutex;
    size_t next = 0;
    std::atomic<bool> stop{false};
    std::exception_ptr first_error;  // the failure that stopped the others (theirs are CANCELLED)
    auto worker = [&] {
      RegistryClient client(config_, ref_.registry);
      client.set_cancelled([&] { return stop.load(); });
      for (;;) {
        size_t i;
        {
          std::lock_guard<std::mutex> lock(next_mutex);
          if (next == n || stop) break;
          i = next++;
        }
        try {
          if (!known[i]) {
            image::OciLayerRef& layer = img.layers[i];
            layer.blob_path = tmp + "/" + layer.digest.substr(7);
            if (layer.size < 0) throw Error(Code::kInvalidArgument, r_.reference + ": layer " + std::to_string(i) + " has no size");
            uint64_t shown = 0;  // progress at most once a MiB (a callback per 64 KiB read would cost more than it tells)
            client.blob_to_file(ref_.repository, layer.digest, static_cast<uint64_t>(layer.size), layer.blob_path,
                                [&, i](uint64_t got, uint64_t total) {
                                  // Another layer failed: this download is of no use any more.
                                  if (stop) throw Error(Code::kCancelled, r_.reference + ": pull stopped");
                                  if (got != total && got - shown < (1u << 20) && got >= shown) return;
                                  shown = got;
                                  report({"download", i, n, got, total});
                                });
          }
          done[i].set_value();
        } catch (const Error& e) {
          if (e.code() != Code::kCancelled) {
            std::lock_guard<std::mutex> lock(next_mutex);
            if (!first_error) first_error = std::current_exception();
          }
          stop = true;
          done[i].set_exception(std::current_exception());
        } catch (...) {
          {
            std::lock_guard<std::mutex> lock(next_mutex);
            if (!first_error) first_error = std::current_exception();
          }
          stop = true;
          done[i].set_exception(std::current_exception());
        }
      }
      std::lock_guard<std::mutex> lock(next_mutex);
      bytes_ += client.bytes_received();
    };
    const size_t threads = std::max<size_t>(1, std::min(o_.parallel_downloads, n));
    std::vector<std::thread> pool;
    try {
      for (size_t t = 0; t < threads; ++t) pool.emplace_back(worker);
      for (size_t i = 0; i < n; ++i) {
        ready[i].get();
        image::ImportOptions per;
        per.parent = r_.layers.empty() ? "" : r_.layers.back();
        bool existed = false;
        if (known[i]) {
          r_.layers.push_back(*known[i]);
          ++r_.layers_reused;
          continue;
        }
        report({"import", i, n, 0, 0});
        const image::LayerInfo l =
            store_.import_oci_layer(img.layers[i], r_.reference + " layer " + std::to_string(i), per, &existed);
        sys::write_file_atomic(pulled_record(store_, img.layers[i].digest), l.digest + "\n", 0644);
        ::unlink(img.layers[i].blob_path.c_str());
        r_.layers.push_back(l.digest);
        ++r_.blobs_fetched;
      }
    } catch (...) {
      stop = true;
      for (auto& t : pool) t.join();
      sys::remove_tree(tmp);
      // A layer whose download was stopped because another failed reports CANCELLED: the first real error wins.
      if (first_error) std::rethrow_exception(first_error);
      throw;
    }
    for (auto& t : pool) t.join();
    sys::remove_tree(tmp);
  }

  image::LayerStore& store_;
  const RegistryConfig& config_;
  const ImageRef& ref_;
  const ImagePullOptions& o_;
  RegistryClient client_;
  ImagePullResult r_;
  std::mutex progress_mutex_;
  uint64_t bytes_ = 0;
};

}  // namespace

ImagePullResult pull_image(image::LayerStore& store, const RegistryConfig& config, const ImageRef& ref,
                           const ImagePullOptions& options) {
  return Puller(store, config, ref, options).run();
}

std::string resolve_environment(image::LayerStore& store, const RegistryConfig& config, const std::string& text,
                                bool bare_names_are_images, const ImagePullOptions& options) {
  const bool forced = has_docker_scheme(text);
  if (!forced) {
    if (store.env_exists(text)) return text;
    // A bare word ("myenv") is a local name unless the caller reads names as images (FROM does, as Docker).
    const bool marked = text.find_first_of("/:@") != std::string::npos;
    if (!looks_like_image_ref(text) || (!marked && !bare_names_are_images)) return text;
  }
  const ImageRef ref = parse_image_ref(text, "image reference");
  const std::string name = options.name.empty() ? ref.canonical() : options.name;
  const bool have = store.env_exists(name);
  if (have && config.pull != PullPolicy::kAlways) return name;
  if (!have && config.pull == PullPolicy::kNever)
    throw Error(Code::kNotFound, "'" + text + "' is no local environment, and the image " + ref.canonical() +
                                     " is not in the store while the pull policy is 'never' (pull it with "
                                     "'sandlet layer pull docker://" + ref.canonical() + "')");
  ImagePullOptions o = options;
  o.name = name;
  try {
    return pull_image(store, config, ref, o).environment;
  } catch (const Error& e) {
    if (forced || (e.code() != Code::kNotFound && e.code() != Code::kUnavailable && e.code() != Code::kPermissionDenied))
      throw;
    throw Error(Code::kNotFound, "'" + text + "' is no local environment, and pulling it as " + ref.canonical() +
                                     " failed: " + e.what());
  }
}

}  // namespace sandlet::registry
