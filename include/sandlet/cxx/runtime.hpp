// sandlet C++ wrapper: sandlet::Runtime (open, create, run, list, gc, forks of snapshots, the layer store
// and environments, remote stores and lazy layers, builds).
// Part of sandlet.hpp (C++17 or later); may be included alone.
#ifndef SANDLET_CXX_RUNTIME_HPP
#define SANDLET_CXX_RUNTIME_HPP

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "sandlet/cxx/error.hpp"
#include "sandlet/cxx/options.hpp"
#include "sandlet/cxx/results.hpp"
#include "sandlet/cxx/sandbox.hpp"
#include "sandlet/cxx/spec.hpp"
#include "sandlet/sandlet.h"

namespace sandlet {
inline namespace cxx {  // see sandlet/cxx/error.hpp

class Runtime {
 public:
  using CreateCallback = std::function<void(const Error* err, Sandbox sb)>;

  Runtime() noexcept = default;  // empty; valid() == false
  explicit Runtime(sandlet_runtime_t* rt) noexcept : rt_(rt) {}  // adopts a C handle

  // Opens (creating if needed) the runtime rooted at `root`; NULL means $SANDLET_ROOT, else /var/lib/sandlet.
  static Runtime open(const char* root = nullptr, const RuntimeOptions& options = RuntimeOptions()) {
    sandlet_runtime_options_t c = SANDLET_RUNTIME_OPTIONS_INIT;
    c.worker_threads = options.worker_threads;
    c.skip_gc_on_open = options.skip_gc_on_open ? 1 : 0;
    c.disable_warm_pool = options.disable_warm_pool ? 1 : 0;
    c.create_soon = options.create_soon ? 1 : 0;
    c.store = options.store.empty() ? nullptr : options.store.c_str();
    c.registries = options.registries.empty() ? nullptr : options.registries.c_str();
    c.cache_max_bytes = options.cache_max_bytes;
    c.fetch_unit = options.fetch_unit;
    c.fetch_concurrency = options.fetch_concurrency;
    c.fill_timeout_ms = options.fill_timeout_ms;
    c.audit_keep = options.audit_keep;
    c.audit_max_bytes = options.audit_max_bytes;
    sandlet_runtime_t* rt = nullptr;
    detail::check(sandlet_runtime_open(root, &c, &rt));
    return Runtime(rt);
  }
  static Runtime open(const std::string& root, const RuntimeOptions& options = RuntimeOptions()) {
    return open(root.c_str(), options);
  }

  Runtime(Runtime&& o) noexcept : rt_(std::exchange(o.rt_, nullptr)) {}
  Runtime& operator=(Runtime&& o) noexcept {
    if (this != &o) {
      sandlet_runtime_close(rt_);
      rt_ = std::exchange(o.rt_, nullptr);
    }
    return *this;
  }
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;
  ~Runtime() { sandlet_runtime_close(rt_); }

  bool valid() const noexcept { return rt_ != nullptr; }
  explicit operator bool() const noexcept { return valid(); }
  sandlet_runtime_t* get() const noexcept { return rt_; }
  sandlet_runtime_t* release() noexcept { return std::exchange(rt_, nullptr); }

  // Destroys every `owned` sandbox this runtime created and waits for in-flight callbacks.
  // Must not be called from a callback (nor may the destructor run there).
  void close() noexcept { sandlet_runtime_close(std::exchange(rt_, nullptr)); }

  std::string root() const {
    const char* s = sandlet_runtime_root(rt_);
    return s != nullptr ? std::string(s) : std::string();
  }

  std::vector<BackendInfo> backends() const {
    const sandlet_backend_info_t* first = nullptr;
    size_t n = 0, elem_size = 0;
    detail::check(sandlet_runtime_backends(rt_, &first, &n, &elem_size));
    std::vector<BackendInfo> out;
    out.reserve(n);
    for (size_t i = 0; i < n; ++i) {
      const sandlet_backend_info_t* info = SANDLET_ARRAY_AT(sandlet_backend_info_t, first, elem_size, i);
      BackendInfo b;
      b.name = info->name != nullptr ? info->name : "";
      b.available = info->available != 0;
      b.capabilities = info->capabilities;
      b.reason = info->reason != nullptr ? info->reason : "";
      b.details_json = "{}";
      if (SANDLET_HAS_FIELD(sandlet_backend_info_t, summary, elem_size) && info->summary != nullptr)
        b.summary = info->summary;
      if (SANDLET_HAS_FIELD(sandlet_backend_info_t, details_json, elem_size) && info->details_json != nullptr)
        b.details_json = info->details_json;
      out.push_back(std::move(b));
    }
    return out;
  }

  // Every kernel feature the library uses on this host, as JSON (see sandlet_runtime_features_json).
  std::string features_json() const {
    char* out = nullptr;
    detail::check(sandlet_runtime_features_json(rt_, &out));
    return detail::take_string(out);
  }

  // The audit log's live file (sandlet_audit.h); read it with sandlet::AuditReader.
  std::string audit_path() const {
    const char* s = sandlet_runtime_audit_path(rt_);
    return s != nullptr ? std::string(s) : std::string();
  }

  // Counters of this runtime (warm pool hits and misses, ...) as JSON (sandlet_runtime_stats_json).
  std::string stats_json() const {
    char* out = nullptr;
    detail::check(sandlet_runtime_stats_json(rt_, &out));
    return detail::take_string(out);
  }

  // Sweeps what crashed or expired runs left behind; returns how many sandboxes were removed.
  size_t gc() {
    size_t removed = 0;
    detail::check(sandlet_runtime_gc(rt_, &removed));
    return removed;
  }

  // All sandboxes under this root (from every process); label_filter is "" or "key=value".
  std::vector<SandboxInfo> list(const std::string& label_filter = std::string()) const {
    sandlet_sandbox_list_t* l = nullptr;
    detail::check(sandlet_runtime_list(rt_, label_filter.empty() ? nullptr : label_filter.c_str(), &l));
    std::unique_ptr<sandlet_sandbox_list_t, void (*)(sandlet_sandbox_list_t*)> guard(l, &sandlet_sandbox_list_delete);
    std::vector<SandboxInfo> out;
    const size_t n = sandlet_sandbox_list_count(l);
    out.reserve(n);
    for (size_t i = 0; i < n; ++i) {
      SandboxInfo s;
      const char* v = sandlet_sandbox_list_id(l, i);
      s.id = v != nullptr ? v : "";
      v = sandlet_sandbox_list_state(l, i);
      s.state = v != nullptr ? v : "";
      v = sandlet_sandbox_list_json(l, i);
      s.json = v != nullptr ? v : "";
      out.push_back(std::move(s));
    }
    return out;
  }

  // What is kept of a live or expired sandbox (sandlet_runtime_logs), the expired ones still kept
  // (sandlet_runtime_expired), and dropping one's (sandlet_runtime_forget_expired); JSON as in sandlet.h.
  std::string logs(const std::string& id) const {
    char* out = nullptr;
    detail::check(sandlet_runtime_logs(rt_, id.c_str(), &out));
    return detail::take_string(out);
  }
  std::string expired() const {
    char* out = nullptr;
    detail::check(sandlet_runtime_expired(rt_, &out));
    return detail::take_string(out);
  }
  void forget_expired(const std::string& id) { detail::check(sandlet_runtime_forget_expired(rt_, id.c_str())); }

  Sandbox create(const Spec& spec) {
    sandlet_sandbox_t* sb = nullptr;
    detail::check(sandlet_sandbox_create(rt_, spec.get(), &sb));
    return Sandbox(sb);
  }

  // Creates a sandbox, runs one command in it with the given descriptors, destroys it (sandlet_run).
  ExecResult run(const Spec& spec, const RunOptions& opts) {
    detail::CRunOptions c(opts);
    sandlet_exec_result_t* r = nullptr;
    detail::check(sandlet_run(rt_, spec.get(), c.get(), &r));
    return ExecResult::take(r);
  }
  // The same without blocking (sandlet_run_async): `cb` runs once, on the event-loop thread.
  using RunCallback = std::function<void(const Error* err, ExecResult result)>;
  void run_async(const Spec& spec, const RunOptions& opts, RunCallback cb) {
    detail::CRunOptions c(opts);
    auto ctx = std::make_unique<RunCallback>(std::move(cb));
    detail::check(sandlet_run_async(rt_, spec.get(), c.get(), &run_trampoline, ctx.get()));
    ctx.release();  // owned by the trampoline from here on
  }
  // `cb` gets the error (NULL on success, valid only during the call) or the new sandbox. If the request
  // cannot even be queued this throws and `cb` is never called.
  void create_async(const Spec& spec, CreateCallback cb) {
    auto ctx = std::make_unique<CreateCallback>(std::move(cb));
    detail::check(sandlet_sandbox_create_async(rt_, spec.get(), &create_trampoline, ctx.get()));
    ctx.release();  // owned by the trampoline from here on
  }

  // n children restored from snapshot layer `snapshot` (a store reference), each with `base` (nullptr: the
  // default spec; its layers and environment are replaced by the snapshot's chain); sandlet_snapshot_fork.
  // NOT_FOUND for an unknown snapshot, INVALID_ARGUMENT for a layer that is not one. Blocks.
  ForkResult fork_snapshot(const std::string& snapshot, const Spec* base, const ForkOptions& opts) {
    detail::CForkOptions c(opts);
    sandlet_fork_result_t* r = nullptr;
    detail::check(sandlet_snapshot_fork(rt_, snapshot.c_str(), base != nullptr ? base->get() : nullptr, c.get(), &r));
    return ForkResult::take(r);
  }

  // ---- layer store and environments (blocking; results are the C ABI's JSON documents) ----

  // Imports a directory, tar / tar.gz / tar.zst, OCI layout or `docker save` tarball.
  // Returns {"layers":[...],"existed":[...],"environment":"..."}.
  std::string layer_import(const std::string& path, const LayerImportOptions& options = LayerImportOptions()) {
    detail::CLayerOptions c(options);
    char* out = nullptr;
    detail::check(sandlet_layer_import(rt_, path.c_str(), c.get(), &out));
    return detail::take_string(out);
  }
  // Writes a layer to a file layer_import reads on any node (see sandlet_layer_export); returns
  // {"digest","path","bytes","files","compression"}.
  std::string layer_export(const std::string& ref, const std::string& path,
                           const LayerExportOptions& options = LayerExportOptions()) {
    const sandlet_layer_export_options_t c = detail::c_export_options(options);
    char* out = nullptr;
    detail::check(sandlet_layer_export(rt_, ref.c_str(), path.c_str(), &c, &out));
    return detail::take_string(out);
  }
  std::string layer_list() { return json_call(&sandlet_layer_list); }
  std::string layer_inspect(const std::string& ref) {
    char* out = nullptr;
    detail::check(sandlet_layer_inspect(rt_, ref.c_str(), &out));
    return detail::take_string(out);
  }
  void layer_remove(const std::string& ref) { detail::check(sandlet_layer_remove(rt_, ref.c_str())); }
  std::string layer_gc() { return json_call(&sandlet_layer_gc); }
  std::string layer_merge(const std::vector<std::string>& refs,
                          const LayerImportOptions& options = LayerImportOptions()) {
    std::vector<const char*> c_refs;
    for (const auto& r : refs) c_refs.push_back(r.c_str());
    detail::CLayerOptions c(options);
    char* out = nullptr;
    detail::check(sandlet_layer_merge(rt_, c_refs.data(), c_refs.size(), c.get(), &out));
    return detail::take_string(out);
  }
  // `defaults_json` empty or {"env":{...},"workdir":"/abs","user":"uid[:gid]"}; returns the version's JSON.
  std::string env_create(const std::string& name, const std::vector<std::string>& layers,
                         const std::string& defaults_json = std::string()) {
    std::vector<const char*> c_layers;
    for (const auto& l : layers) c_layers.push_back(l.c_str());
    char* out = nullptr;
    detail::check(sandlet_env_create(rt_, name.c_str(), c_layers.data(), c_layers.size(),
                                     defaults_json.empty() ? nullptr : defaults_json.c_str(), &out));
    return detail::take_string(out);
  }
  std::string env_list() { return json_call(&sandlet_env_list); }
  void env_remove(const std::string& name) { detail::check(sandlet_env_remove(rt_, name.c_str())); }

  // ---- remote stores and lazy layers (sandlet_store.h; blocking; results are its JSON documents) ----
  // `store`: a URL; nullopt = the runtime's (RuntimeOptions::store, else $SANDLET_STORE; neither set is
  // INVALID_ARGUMENT). An empty URL is INVALID_ARGUMENT too.

  // Pushes layer `ref` with the layers it needs; returns {"digest","store","layers",...}.
  std::string layer_push(const std::string& ref, const std::optional<std::string>& store = std::nullopt) {
    char* out = nullptr;
    detail::check(sandlet_layer_push(rt_, ref.c_str(), store ? store->c_str() : nullptr, &out));
    return detail::take_string(out);
  }
  // Pulls layer `ref` (a digest or a name the store holds); `lazy`: metadata only, data on first read.
  // Returns {"digest","store","layers","lazy","eager_reason","bytes_fetched","image_bytes"}.
  std::string layer_pull(const std::string& ref, const std::optional<std::string>& store = std::nullopt,
                         bool lazy = false) {
    char* out = nullptr;
    detail::check(sandlet_layer_pull(rt_, ref.c_str(), store ? store->c_str() : nullptr,
                                     lazy ? SANDLET_PULL_LAZY : 0u, &out));
    return detail::take_string(out);
  }
  // Pulls a registry image (sandlet_image_pull) into the store as environment `name` ("" = its canonical
  // reference). `progress` (may be empty) runs on the pulling threads. Returns the result JSON.
  std::string image_pull(const std::string& ref, const std::string& name = "",
                         std::function<void(const char* phase, size_t layer, size_t layers, uint64_t bytes,
                                            uint64_t total)> progress = nullptr) {
    char* out = nullptr;
    auto tramp = [](void* user, const char* phase, size_t layer, size_t layers, uint64_t bytes, uint64_t total) {
      (*static_cast<decltype(progress)*>(user))(phase, layer, layers, bytes, total);
    };
    detail::check(sandlet_image_pull(rt_, ref.c_str(), name.empty() ? nullptr : name.c_str(),
                                     progress ? +tramp : nullptr, progress ? &progress : nullptr, &out));
    return detail::take_string(out);
  }
  // The node's loader, its cache and every lazy layer (sandlet_loader_status); starts no loader.
  std::string loader_status() { return json_call(&sandlet_loader_status); }

  // ---- builds (sandlet_build): returns the result JSON ----

  std::string build(const std::string& recipe, const std::string& context,
                    const BuildOptions& options = BuildOptions()) {
    detail::CBuildOptions c(options, &options.progress);
    char* out = nullptr;
    detail::check(sandlet_build(rt_, recipe.c_str(), context.c_str(), c.get(), &out));
    return detail::take_string(out);
  }
  // On a thread of the build's own (sandlet_build_async): `cb` runs once there with the error or the result
  // JSON; options.progress is called there too. If the build cannot be started this throws.
  using BuildCallback = std::function<void(const Error* err, std::string result_json)>;
  void build_async(const std::string& recipe, const std::string& context, const BuildOptions& options,
                   BuildCallback cb) {
    auto ctx = std::make_unique<BuildContext>();
    ctx->progress = options.progress;
    ctx->done = std::move(cb);
    detail::CBuildOptions c(options, &ctx->progress);
    detail::check(sandlet_build_async(rt_, recipe.c_str(), context.c_str(), c.get(), &build_trampoline, ctx.get()));
    ctx.release();  // owned by the trampoline from here on
  }

  // ---- job-level pause and resume (sandlet_jobs.h): every sandbox of the root whose labels match ----
  // `label_selector`: "k=v" or "k=v,k2=v2". Returns {"matched","paused"|"resumed","already","failed",
  // "reclaimed_bytes" (pause only),"elapsed_ns"}; a sandbox that could not be paused is listed in "failed".
  std::string pause_job(const std::string& label_selector) {
    char* out = nullptr;
    detail::check(sandlet_runtime_pause(rt_, label_selector.c_str(), &out));
    return detail::take_string(out);
  }
  std::string resume_job(const std::string& label_selector) {
    char* out = nullptr;
    detail::check(sandlet_runtime_resume(rt_, label_selector.c_str(), &out));
    return detail::take_string(out);
  }

  // Opens a handle on an existing sandbox by id (also one created by another process).
  Sandbox attach(const std::string& id) {
    sandlet_sandbox_t* sb = nullptr;
    detail::check(sandlet_sandbox_attach(rt_, id.c_str(), &sb));
    return Sandbox(sb);
  }

 private:
  std::string json_call(sandlet_error_t* (*fn)(sandlet_runtime_t*, char**)) {
    char* out = nullptr;
    detail::check(fn(rt_, &out));
    return detail::take_string(out);
  }

  struct BuildContext {
    std::function<void(const BuildEvent&)> progress;
    BuildCallback done;
  };
  static void build_trampoline(void* user_data, sandlet_error_t* err, char* result_json) noexcept {
    std::unique_ptr<BuildContext> ctx(static_cast<BuildContext*>(user_data));
    try {
      std::string json = detail::take_string(std::exchange(result_json, nullptr));
      if (err != nullptr) {
        Error e = Error::take(std::exchange(err, nullptr));
        if (ctx->done) ctx->done(&e, std::string());
      } else if (ctx->done) {
        ctx->done(nullptr, std::move(json));
      }
    } catch (...) {
      sandlet_error_delete(err);
      sandlet_free(result_json);
    }
  }

  static void run_trampoline(void* user_data, sandlet_error_t* err, sandlet_exec_result_t* result) noexcept {
    std::unique_ptr<RunCallback> cb(static_cast<RunCallback*>(user_data));
    try {
      if (err != nullptr) {
        sandlet_exec_result_delete(std::exchange(result, nullptr));  // NULL by contract; harmless otherwise
        Error e = Error::take(std::exchange(err, nullptr));
        if (*cb) (*cb)(&e, ExecResult());
      } else {
        ExecResult r = ExecResult::take(std::exchange(result, nullptr));
        if (*cb) (*cb)(nullptr, std::move(r));
      }
    } catch (...) {
      // Never unwind into C. Free whatever was not handed over yet.
      sandlet_error_delete(err);
      sandlet_exec_result_delete(result);
    }
  }

  static void create_trampoline(void* user_data, sandlet_error_t* err, sandlet_sandbox_t* sb) noexcept {
    std::unique_ptr<CreateCallback> cb(static_cast<CreateCallback*>(user_data));
    Sandbox owned(sb);  // closed on every path unless the callback moves it out
    try {
      if (err != nullptr) {
        Error e = Error::take(std::exchange(err, nullptr));
        if (*cb) (*cb)(&e, Sandbox());
      } else if (*cb) {
        (*cb)(nullptr, std::move(owned));
      }
    } catch (...) {
      sandlet_error_delete(err);
    }
  }

  sandlet_runtime_t* rt_ = nullptr;
};

}  // inline namespace cxx
}  // namespace sandlet

#endif  // SANDLET_CXX_RUNTIME_HPP
