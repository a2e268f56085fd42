// The runtime: the facade that wires its parts together — the state directory (state_dir, sandbox_dirs),
// the backends of this host (backends/registry), the event loop, a worker pool for blocking create and
// reclaim work, the registry of this process's sandboxes, the warm pool and the layer store. Every sandbox
// goes through one lifecycle (lifecycle.hpp); `end` is the one way a sandbox ends.
#pragma once
#include <sys/stat.h>

#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/thread_pool.hpp>
#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "backends/backend.hpp"
#include "image/layer_mounts.hpp"
#include "image/layer_store.hpp"
#include "lazy/loader_client.hpp"
#include "lazy/loader_settings.hpp"
#include "runtime/audit/audit_log.hpp"
#include "runtime/audit/expired_logs.hpp"
#include "runtime/event_loop.hpp"
#include "runtime/layers.hpp"
#include "runtime/record.hpp"
#include "registry/image_pull.hpp"
#include "runtime/registry.hpp"
#include "runtime/sandbox.hpp"
#include "runtime/sandbox_dirs.hpp"
#include "runtime/sandbox_owner.hpp"
#include "runtime/snapshot/snapshots.hpp"
#include "runtime/state_dir.hpp"
#include "runtime/warm_pool.hpp"
#include "spec/spec.hpp"

namespace sandlet {

class Metrics;  // runtime/metrics/metrics.hpp
struct MetricFamily;
class AdmissionGate;  // runtime/metrics/admission_gate.hpp
class MetricsPublisher;  // runtime/metrics/metrics_publisher.hpp
struct AdmissionOptions;

struct RuntimeOptions {
  unsigned worker_threads = 2;
  bool gc_on_open = true;
  size_t warm_pool = 2;  // prepared sandboxes kept ready (from the second create on); 0 = off
  bool create_soon = false;  // a create follows the open at once: start its slowest part meanwhile
  size_t snapshot_max_depth = 16;  // snapshots stacked on each other before the chain is merged into one (>= 2)
  std::string store;  // default store URL of push and pull ("" = $SANDLET_STORE)
  std::string registries;  // OCI registries: JSON (registry/registry_config.hpp); "" = $SANDLET_REGISTRIES
  lazy::LoaderSettings loader;  // for the node's loader, if this runtime starts it
  AuditOptions audit;           // rotation of the root's audit log (audit_log.hpp)
};

// A one-shot run (Runtime::run_once): one command in a new sandbox, with the caller's descriptors as its
// standard streams; the sandbox is gone when the run returns.
struct RunOnceParams {
  std::vector<std::string> argv;
  std::vector<std::string> env;  // "K=V" added to the spec's environment
  std::string cwd, user;         // empty = the spec's
  double timeout_s = 0;          // 0 = none; on expiry every process of the sandbox is killed
  int stdio[3] = {-1, -1, -1};   // the caller's descriptors (borrowed); -1 = /dev/null inside
  int cancel_fd = -1;            // readable = kill everything and fail with CANCELLED; -1 = none
};

struct BackendStatus {
  std::string name;
  std::string summary;        // what it is for (the registry's line)
  bool available = false;
  std::string reason;         // why not ("" when available)
  uint32_t capabilities = 0;  // Capability bits (0 when unavailable)
  std::string details_json;   // the backend's own facts, a JSON object (e.g. a VM's accelerator)
};

// The outcome of a pause or resume by label or id (Runtime::pause_jobs; JSON in sandlet_jobs.h).
struct JobPauseResult {
  size_t matched = 0;   // sandboxes the selector or id list named (running or paused)
  size_t changed = 0;   // paused (or resumed) by this call
  size_t already = 0;   // were in the wanted state already
  std::vector<std::pair<std::string, std::string>> failed;  // id, error message
  uint64_t reclaimed_bytes = 0;  // memory given back after the freeze (cgroup v2 memory.reclaim)
  uint64_t elapsed_ns = 0;
};

struct ListedSandbox {
  SandboxRecord record;
  std::string state;  // "running", "paused", "creating", "dead", ...
  std::string json;   // the record's public view (public_record_json)
};

class Runtime final : public SandboxOwner, public std::enable_shared_from_this<Runtime> {
 public:
  static std::shared_ptr<Runtime> open(const std::string& root, const RuntimeOptions& options);
  ~Runtime() override;
  // Ends owned sandboxes made here, stops the loop and the workers. Idempotent; never throws.
  void close() noexcept;
  bool closed() const override { return closed_; }

  const std::string& root() const { return root_; }
  const std::vector<BackendStatus>& backends() const { return statuses_; }
  uint32_t backend_capabilities(const std::string& name) const override;

  std::shared_ptr<Sandbox> create(const Spec& spec);
  using CreateDone = std::function<void(std::exception_ptr, std::shared_ptr<Sandbox>)>;
  void create_async(Spec spec, CreateDone done);
  std::shared_ptr<Sandbox> attach(const std::string& id);
  // Runs one command in a new sandbox made from `spec` (owned) and ends it (runtime/run_once.cpp); blocks
  // the calling thread. The sandbox's init starts the command itself: no agent round trip. A command that
  // cannot be started is an error (NOT_FOUND / PERMISSION_DENIED), as with exec.
  ExecOutcome run_once(const Spec& spec, const RunOnceParams& params);
  // run_once on a backend without kCapOneShot: create, one exec, destroy (runtime/run_via_agent.cpp).
  ExecOutcome run_via_agent(const Spec& spec, const RunOnceParams& params);
  // The same without blocking: `done` runs on the loop thread (invalid input throws here instead).
  using RunDone = std::function<void(std::exception_ptr, ExecOutcome)>;
  void run_once_async(Spec spec, RunOnceParams params, RunDone done);
  // run_via_agent on a thread of its own (checked input); `done` runs on the loop thread. close() joins
  // these threads once it has ended the owned sandboxes, which ends their runs.
  void run_via_agent_async(Spec spec, RunOnceParams params, RunDone done);
  std::vector<ListedSandbox> list(const std::string& label_filter);
  // Sweeps what crashed or expired runs left (gc_verdict). `release_idle`: also node-level structures
  // kept between runtimes when nothing uses them (an explicit gc; the sweep at open keeps them).
  size_t gc(bool release_idle = true);
  // Counters of this runtime (warm pool hits and misses, ...), as JSON (documented in sandlet.h).
  std::string stats_json() const;
  // Platform metrics (runtime/metrics/metrics_view.cpp; formats in sandlet_metrics.h): this runtime's counters and
  // histograms, its warm pool, and the root's sandboxes of every process by state and label.
  // `node`: this runtime's counters and histograms summed with those every other live runtime on the root
  // published (runtime/metrics/metrics_publisher.hpp: each writes its own at most once a second).
  std::vector<MetricFamily> metrics_families(bool node = false);
  std::string metrics_text(bool node = false);
  std::string metrics_json(bool node = false);
  // Where further metric sources register (Metrics::add_source).
  Metrics& metrics() { return *metrics_; }
  // Node admission for the creates of this runtime (runtime/metrics/admission.hpp); options with no bound = off.
  // A create waits for room before it is handed to a worker (create: in the caller's thread; create_async:
  // on a thread of its own), latency-sensitive first (spec label "sandlet/priority" = "latency").
  void set_admission(const AdmissionOptions& options);

  // The layer store of this root and the node-wide layer mounts (src/image).
  image::LayerStore& layer_store() { return *layer_store_; }
  image::LayerMounts& layer_mounts() { return *layer_mounts_; }
  // Store layers used by live sandboxes of this root (any process), for gc and removal decisions.
  std::set<std::string> layers_in_use() { return layers_->in_use(); }

  // Remote stores and lazy layers (runtime/store_ops.cpp; JSON results as documented in sandlet_store.h).
  // `store` "" = the runtime's (options, else $SANDLET_STORE).
  std::string layer_push(const std::string& ref, const std::string& store);
  std::string layer_pull(const std::string& ref, const std::string& store, bool lazy);
  std::string loader_status();
  // Registry images (runtime/image_pulls.cpp; JSON result documented in sandlet_store.h at sandlet_image_pull):
  // pulls `ref` ("docker://..." or a reference) into the store as environment `name` ("" = its canonical name).
  std::string image_pull(const std::string& ref, const std::string& name,
                         const std::function<void(const registry::PullProgress&)>& progress = nullptr);
  // The store's environment for `text` (a local name, or a registry image pulled as the policy says), for
  // callers that name environments the way a spec does; `bare_names_are_images` as a recipe's FROM reads them.
  std::string resolve_environment(const std::string& text, bool bare_names_are_images = false);
  // `spec` with its environment made local (resolve_environment), on the calling thread: create and run_once
  // call it before handing the create to a worker; INVALID_ARGUMENT naming the field when nothing matches.
  Spec with_local_environment(const Spec& spec);
  // The store URL to use: `given`, else the runtime's, else $SANDLET_STORE; INVALID_ARGUMENT when none or bad.
  std::string store_url(const std::string& given) const;

  // Logs kept of sandboxes (runtime/audit/expired_logs.hpp; JSON documented in sandlet.h at sandlet_runtime_logs):
  // those of a live sandbox or of one that expired under on_expiry "keep_logs" (NOT_FOUND for neither);
  // the summaries of the expired ones still kept; forget_expired drops one's (NOT_FOUND when none).
  std::string logs_json(const std::string& id);
  std::string expired_json();
  void forget_expired(const std::string& id);

  // SandboxOwner (what handles use).
  boost::asio::io_context& io() override { return loop_.io(); }
  void check_not_on_loop(const char* what) const override { loop_.check_not_on_loop(what); }
  void in_background(std::function<void()> fn) override;
  void end(const SandboxRecord& rec, const std::shared_ptr<BackendSandbox>& impl, const char* reason) override;
  std::shared_ptr<AuditLog> audit() override { return audit_; }
  void exec_began(const std::string& id) override;
  void exec_ended(const std::string& id) override;
  void forget(const std::string& id) override;
  void persist(const SandboxRecord& rec) override;
  bool record_paused(const std::string& id) override;
  std::string output_log_path(const std::string& id) const override;
  // Pauses (`pause`) or resumes every sandbox of the root (any process's) whose labels match every
  // "k=v" of `selector` ("k=v[,k2=v2]"), or whose id is in `ids` (runtime/job_pause.cpp). The freezes
  // run in parallel; each one persists the record and is audited as "pause"/"resume".
  JobPauseResult pause_jobs(const std::string& selector, const std::vector<std::string>& ids, bool pause);
  void long_call(std::function<std::string()> work, std::function<void(std::exception_ptr, std::string)> done) override;
  // Snapshot, restore and fork: the snapshot service (runtime/snapshot/snapshots.hpp).
  SnapshotResult snapshot(const SandboxRecord& rec, BackendSandbox& impl, const SnapshotOptions& options) override;
  ForkResult fork_from(const SandboxRecord& parent, SnapshotResult snap, const ForkOptions& options) override;
  // n sandboxes restored from the snapshot `layer` (a store reference), each from `base` (its layers are
  // replaced by the snapshot's chain) with the child identity of sandlet.h; blocks until all are ready or failed.
  ForkResult fork_snapshot(const std::string& layer, const Spec& base, const ForkOptions& options);
  // A new sandbox from a snapshot's artifact (Snapshots::restore_async).
  void restore_async(const SnapshotArtifact& artifact, Spec spec, CreateDone done);

 private:
  explicit Runtime(const RuntimeOptions& options);
  void open_backends(bool create_soon);  // makes and probes every registry row
  void start_backends();
  Backend& backend_for(const Spec& spec);
  Backend* backend_named(const std::string& name);

  // Creating (runtime/create.cpp).
  struct Started {
    SandboxRecord rec;
    std::shared_ptr<BackendSandbox> impl;
  };
  // `resume`: a snapshot's machine state the backend resumes instead of starting fresh (never pooled).
  Started start_sandbox(const Spec& spec, OneShot* one_shot, const MachineState* resume = nullptr);
  // create_async's work; `resume` as start_sandbox's.
  void create_async_resuming(Spec spec, std::shared_ptr<const MachineState> resume, CreateDone done);
  void audit_create_failed(const std::string& id, const Spec& spec, std::exception_ptr error) noexcept;
  std::shared_ptr<Sandbox> create_blocking(const Spec& spec, const MachineState* resume = nullptr);
  // create_blocking, timed for the metrics from `requested_ns` (monotonic), when the caller asked.
  // `admission_key`: its node reservation ("" = none), released if the create fails.
  std::shared_ptr<Sandbox> create_measured(const Spec& spec, uint64_t requested_ns, const std::string& admission_key,
                                           const MachineState* resume = nullptr);
  SandboxRecord new_record(const std::string& backend, SandboxState state);
  WarmPool::Entry prepare_pooled(Backend& backend, const Spec* stage_for, const Shape& shape,
                                 const std::vector<std::string>& digests);
  void watch_exit(const SandboxRecord& rec, const std::shared_ptr<BackendSandbox>& impl);
  void on_exit(const std::string& id);

  // Ending (runtime/end.cpp): end() = retire now + reclaim on a worker.
  // running/paused/creating -> ending; audited as "destroy" with `reason` (extra fields in `audit_extra`;
  // nullptr: not audited).
  void retire(const SandboxRecord& rec, BackendSandbox& impl, const char* reason,
              boost::json::object audit_extra = {});
  bool reclaim(const SandboxRecord& rec, const std::shared_ptr<BackendSandbox>& impl) noexcept;  // -> reclaimed
  // A create that failed: drops what the backend made, removes the directory, releases layers.
  void abandon(const SandboxRecord& rec, std::unique_ptr<BackendSandbox> impl) noexcept;

  // One-shot runs (runtime/run_once.cpp).
  OneShot one_shot_of(const Spec& spec, const RunOnceParams& params);
  Started start_one_shot(const Spec& spec, OneShot& one_shot);
  void audit_one_shot(const SandboxRecord& rec, const RunOnceParams& params, double begin_wall, const ExecOutcome* out,
                      std::exception_ptr error) noexcept;

  std::string state_of(const SandboxRecord& rec, BackendSandbox* impl) const;

  RuntimeOptions options_;
  std::string root_;
  std::shared_ptr<AuditLog> audit_;
  StateLayout state_;
  std::unique_ptr<SandboxDirs> dirs_;
  std::map<std::string, std::unique_ptr<Backend>> backends_;  // the available ones, started
  std::vector<BackendStatus> statuses_;
  std::unique_ptr<image::LayerStore> layer_store_;
  registry::RegistryConfig registry_config_;
  std::unique_ptr<image::LayerMounts> layer_mounts_;
  std::unique_ptr<lazy::LoaderClient> loader_;  // the node's loader of lazy layers (started on first use)
  void wire_lazy_layers();                      // store_ops.cpp
  std::unique_ptr<LayerUsage> layers_;
  std::unique_ptr<Snapshots> snapshots_;
  std::unique_ptr<ExpiredLogs> expired_;  // logs kept of sandboxes that expired (runtime/audit/expired_logs.hpp)
  EventLoop loop_;
  std::unique_ptr<boost::asio::thread_pool> workers_;  // started once the backends are (see open)
  Registry registry_;
  std::unique_ptr<WarmPool> pool_;
  std::unique_ptr<Metrics> metrics_;  // made by the constructor
  // This runtime's counters under <root>/metrics, for the node-wide view (runtime/metrics/metrics_publisher.hpp).
  std::unique_ptr<MetricsPublisher> publisher_;
  std::unique_ptr<AdmissionGate> admission_;  // node admission of this runtime's creates (made with metrics_)
  std::mutex persist_mutex_;
  // record_paused's memo per sandbox: the record file as last read (it is only ever replaced by rename, so
  // a new write is a new inode and times) and whether it said "paused": an unchanged file is not parsed again.
  struct RecordStamp {
    ino_t ino = 0;
    int64_t mtime_ns = 0, ctime_ns = 0;
    off_t size = 0;
    bool paused = false;
    static RecordStamp of(const struct stat& st, bool paused);
  };
  std::mutex stamps_mutex_;
  std::unordered_map<std::string, RecordStamp> record_stamps_;
  // The memo for a record this runtime just wrote (`written`: its stat), so that the first exec does not
  // parse it back.
  void remember_record(const std::string& id, const struct stat& written, bool paused);
  void forget_record(const std::string& id) noexcept;  // the sandbox ended (end.cpp)
  // closed_ is set, and the workers stop taking work, under close_mutex_: what is posted to the loop or
  // the workers before is sure to run; after, callers run it themselves.
  mutable std::mutex close_mutex_;
  bool workers_closed_ = false;
  struct LongCall {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> finished;
  };
  std::vector<LongCall> long_calls_;  // long_call threads (guarded by close_mutex_), joined by close()
  std::vector<LongCall> agent_runs_;  // run_via_agent_async threads (guarded by close_mutex_)
  // Readable once close() has ended the owned sandboxes: runs through the agent stop waiting for their
  // caller to take output (runtime/run_via_agent.cpp), so that close() can join them.
  sys::UniqueFd closing_;
  static void join_all(std::vector<LongCall>& calls) noexcept;
  void signal_closing() noexcept;
  // Runs `body` on a new thread kept in `threads` (long_calls_ or agent_runs_; close() joins them);
  // FAILED_PRECONDITION once closed.
  void start_tracked(std::vector<LongCall>& threads, std::function<void()> body);
  std::atomic<bool> closed_{false};
};

}  // namespace sandlet
