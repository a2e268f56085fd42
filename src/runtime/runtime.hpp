// The runtime: a state directory, an event loop thread (Boost.Asio) that drives every agent connection,
// a small worker pool for blocking create/destroy work, and the registry of sandboxes this process made.
#pragma once
#include <boost/asio.hpp>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "backends/backend.hpp"
#include "image/layer_mounts.hpp"
#include "image/layer_store.hpp"
#include "runtime/record.hpp"
#include "runtime/sandbox.hpp"
#include "backends/container/slots.hpp"
#include "runtime/state_dir.hpp"
#include "spec/spec.hpp"
#include "sys/fd.hpp"

namespace sandlet {

class Sandbox;

struct RuntimeOptions {
  unsigned worker_threads = 2;
  bool gc_on_open = true;
  size_t warm_pool = 2;  // prepared container sandboxes kept ready (from the second create on); 0 = off
  bool create_soon = false;  // a create follows the open at once: make its network namespace meanwhile
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
  bool available = false;
  std::string reason;
};

struct ListedSandbox {
  SandboxRecord record;
  std::string state;  // "running", "creating", "dead"
  std::string json;   // the record plus "state"
};

class Runtime final : public std::enable_shared_from_this<Runtime> {
 public:
  static std::shared_ptr<Runtime> open(const std::string& root, const RuntimeOptions& options);
  ~Runtime();
  // Destroys owned sandboxes made here, stops the loop and the workers. Idempotent.
  void close();
  bool closed() const { return closed_; }

  const std::string& root() const { return host_.root; }
  const std::vector<BackendStatus>& backends() const { return backends_; }

  std::shared_ptr<Sandbox> create(const Spec& spec);
  using CreateDone = std::function<void(std::exception_ptr, std::shared_ptr<Sandbox>)>;
  void create_async(Spec spec, CreateDone done);
  std::shared_ptr<Sandbox> attach(const std::string& id);
  // Runs one command in a new sandbox made from `spec` (owned) and destroys it (killed and hidden when
  // this returns; host state reclaimed on a worker, as destroy() does); blocks the calling thread. The sandbox's init starts the command itself: no agent round trip (runtime/run_once.cpp).
  // A command that cannot be started is an error (NOT_FOUND / PERMISSION_DENIED), as with exec.
  ExecOutcome run_once(const Spec& spec, const RunOnceParams& params);
  // The same without blocking: `done` runs on the loop thread (invalid input throws here instead).
  using RunDone = std::function<void(std::exception_ptr, ExecOutcome)>;
  void run_once_async(Spec spec, RunOnceParams params, RunDone done);
  std::vector<ListedSandbox> list(const std::string& label_filter);
  // Sweeps what crashed or expired runs left. `release_idle_cgroups`: also remove the node's "sandlet"
  // parent groups when no sandbox group is left in them (an explicit gc; the sweep at open keeps them).
  size_t gc(bool release_idle_cgroups = true);

  // The layer store of this root and the node-wide layer mounts (src/image).
  image::LayerStore& layer_store() { return *layer_store_; }
  image::LayerMounts& layer_mounts() { return *layer_mounts_; }
  // Store layers used by live sandboxes of this root (any process), for gc and removal decisions.
  std::set<std::string> layers_in_use();

  // Internals used by Sandbox.
  boost::asio::io_context& io() { return io_; }
  bool on_loop_thread() const { return std::this_thread::get_id() == loop_thread_id_; }
  void check_not_on_loop(const char* what) const;
  std::string sandbox_dir(const std::string& id) const { return host_.root + "/sandboxes/" + id; }
  // Tears a sandbox down (kill, wait, remove cgroups, slot, directory). Safe to call more than once.
  void teardown(const SandboxRecord& rec);
  // Kills the sandbox and hides it now; reclaims its host resources on a worker (close() waits for it).
  void destroy(const SandboxRecord& rec);
  std::string retired_dir(const std::string& id) const { return host_.root + "/sandboxes/.reclaim-" + id; }
  void forget(const std::string& id);
  void remember_handle(const std::string& id, const std::shared_ptr<Sandbox>& sb);
  template <class F>
  void run_on_workers(F&& f) {
    boost::asio::post(workers_, std::forward<F>(f));
  }

 private:
  explicit Runtime(const RuntimeOptions& options);
  std::shared_ptr<Sandbox> create_blocking(const Spec& spec);
  // A started sandbox: its record (written, state running) and the pidfd of its top process.
  struct Started {
    SandboxRecord rec;
    sys::UniqueFd pidfd;
  };
  Started start_sandbox(const Spec& spec, OneShot* one_shot);
  // One-shot runs (runtime/run_once.cpp).
  OneShot one_shot_of(const Spec& spec, const RunOnceParams& params);
  Started start_one_shot(const Spec& spec, OneShot& one_shot);
  void end_one_shot(Started started);
  void kill_init(const SandboxRecord& rec) noexcept;  // SIGKILL to its init, if it is still that process
  void kill_one_shots();                     // every one-shot in flight (close)
  void end_one_shots();                      // waits until none is left (close)
  SandboxRecord new_record(const std::string& backend, SandboxState state);
  void discard(const SandboxRecord& rec);
  struct WarmEntry {
    SandboxRecord rec;
    std::unique_ptr<Backend::Prepared> prepared;
  };
  std::optional<WarmEntry> take_warm(const Spec& spec, const std::vector<LayerUse>& layers);
  void warm_loop();
  void stop_warm_pool();
  void watch_child(const SandboxRecord& rec, sys::UniqueFd pidfd);
  // `own_pidfd`: a pidfd of the init that this process holds and has not reaped (then no pid check).
  sys::UniqueFd kill_and_retire(const SandboxRecord& rec, const sys::UniqueFd* own_pidfd = nullptr);
  void reclaim(const SandboxRecord& rec, sys::UniqueFd pidfd);
  size_t finish_reclaim(const std::string& id);
  void on_child_exit(const std::string& id);
  void arm_watcher(boost::asio::posix::stream_descriptor& watcher, const std::string& id);
  std::optional<SandboxRecord> load_record(const std::string& id) const;
  // Resolves an environment and store references into mounted layer directories (see runtime/layers.cpp).
  // `holds` keep the layers mounted until the create is done (see LayerMounts::acquire).
  Spec resolve_layers(const Spec& spec, SandboxRecord& rec, std::vector<sys::UniqueFd>& holds);
  // After a sandbox that used store layers is gone: unmounts those no live sandbox still uses.
  void release_layers_of(const SandboxRecord& rec);
  std::string state_of(const SandboxRecord& rec) const;

  HostContext host_;
  RuntimeOptions options_;
  std::vector<BackendStatus> backends_;
  std::map<std::string, std::unique_ptr<Backend>> backend_impls_;
  StateLayout state_;
  std::unique_ptr<container::SlotTable> slots_;
  std::unique_ptr<image::LayerStore> layer_store_;
  std::unique_ptr<image::LayerMounts> layer_mounts_;

  boost::asio::io_context io_;
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> work_;
  std::thread loop_;
  std::thread::id loop_thread_id_;
  boost::asio::thread_pool workers_;

  std::mutex mutex_;
  // Sandboxes this process created and is the parent of: their pidfds, watched for exit.
  struct Child {
    std::unique_ptr<boost::asio::posix::stream_descriptor> watcher;
    SandboxRecord record;
  };
  std::map<std::string, Child> children_;
  // Live handles by id, so attach in this process shares the creating handle's object.
  std::map<std::string, std::weak_ptr<Sandbox>> handles_;
  size_t handles_swept_size_ = 0;
  std::set<std::string> reclaiming_;  // ids whose resources a worker is reclaiming
  // One-shot runs in flight (their callers' threads wait on them): close() kills them and waits.
  std::map<std::string, SandboxRecord> one_shots_;
  size_t one_shot_reclaims_ = 0;  // ended one-shots whose host state a worker is still reclaiming
  std::condition_variable one_shots_done_;

  // Warm pool: prepared container sandboxes (see warm_loop); options_.warm_pool of them.
  std::mutex warm_mutex_;
  std::condition_variable warm_cv_;
  std::deque<WarmEntry> warm_;
  std::optional<Spec> warm_key_;  // the environment the pool prepares for (the last one asked for)
  bool warm_staged_ = false;      // stage for warm_key_ (the last two creates asked for it) or prepare generic
  std::vector<std::string> warm_key_digests_;  // its store layers: kept mounted while this runtime lives
  size_t creates_ = 0;
  bool warm_stop_ = false;
  std::thread warm_thread_;
  std::atomic<bool> closed_{false};
};

}  // namespace sandlet
