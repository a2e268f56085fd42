#include "runtime/runtime.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <cstdlib>
#include <future>
#include <deque>

#include "common/error.hpp"
#include "runtime/sandbox.hpp"
#include "runtime/state_dir.hpp"
#include "sys/fs_util.hpp"

namespace asio = boost::asio;

namespace sandlet {

Runtime::Runtime(const RuntimeOptions& options)
    : options_(options), workers_(options.worker_threads ? options.worker_threads : 2) {}

std::shared_ptr<Runtime> Runtime::open(const std::string& root_arg, const RuntimeOptions& options) {
  std::string root = root_arg;
  if (root.empty()) {
    const char* env = std::getenv("SANDLET_ROOT");
    root = env && *env ? env : "/var/lib/sandlet";
  }
  if (root.front() != '/') throw Error(Code::kInvalidArgument, "runtime root must be an absolute path: " + root);
  while (root.size() > 1 && root.back() == '/') root.pop_back();

  // The network namespace is the costliest part of a create and needs nothing from the rest of the open:
  // a caller about to create (a one-shot run) gets it made while the open does its file-system work.
  // (First thing: before the runtime's own threads are started.)
  auto netns = std::make_unique<container::NetnsPool>(4);
  if (options.create_soon && ::geteuid() == 0) netns->prefetch_first();
  std::shared_ptr<Runtime> rt(new Runtime(options));
  rt->host_.netns = std::move(netns);
  rt->host_.root = root;
  rt->host_.close_in_background = [raw = rt.get()](std::vector<sys::UniqueFd> fds) {
    auto held = std::make_shared<std::vector<sys::UniqueFd>>(std::move(fds));
    raw->run_on_workers([held] { held->clear(); });
  };
  sys::mkdir_p(root, 0700);
  // Sandboxes' agent sockets live here: only the runtime's user may reach them.
  if (::chmod(root.c_str(), 0700) < 0) throw_errno("chmod " + root);
  rt->state_ = prepare_state(root);
  rt->host_.init_cache_dir = rt->state_.tmpfs_base;
  rt->slots_ = std::make_unique<container::SlotTable>(rt->state_.slots);
  rt->layer_store_ = std::make_unique<image::LayerStore>(root + "/layers");
  rt->layer_mounts_ = std::make_unique<image::LayerMounts>(*rt->layer_store_, root + "/layers/mounts");
  // One descriptor per sandbox this process creates (its exit watcher) plus one per exec in flight: the
  // customary 1024 soft limit would cap a trainer at a few hundred sandboxes. Like the Go runtime, raise
  // the soft limit to the hard one.
  struct rlimit nofile;
  if (::getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur < nofile.rlim_max) {
    nofile.rlim_cur = nofile.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &nofile);
  }

  bool have_cgroups = false;
  try {
    rt->host_.cgroups = sys::CgroupSystem::detect();
    have_cgroups = true;
  } catch (const Error&) {
  }
  for (const auto& entry : backend_registry()) {
    BackendStatus st{entry.name, false, entry.probe()};
    st.available = st.reason.empty();
    if (st.available) rt->backend_impls_[entry.name] = entry.factory(rt->host_);
    rt->backends_.push_back(std::move(st));
  }
  if (have_cgroups && ::geteuid() == 0) rt->host_.cgroups.prepare();

  rt->work_.emplace(asio::make_work_guard(rt->io_));
  rt->loop_ = std::thread([raw = rt.get()] {
    for (;;) {
      try {
        raw->io_.run();
        break;
      } catch (...) {
        // A handler threw past its own guard: keep the loop alive; the handler's caller got its error.
      }
    }
  });
  // Known without waiting for the thread to run: nothing reaches the loop before this open returns.
  rt->loop_thread_id_ = rt->loop_.get_id();
  if (options.gc_on_open) rt->gc(/*release_idle_cgroups=*/false);
  return rt;
}

Runtime::~Runtime() { close(); }

void Runtime::check_not_on_loop(const char* what) const {
  if (on_loop_thread())
    throw Error(Code::kFailedPrecondition,
                std::string(what) + ": blocking call from a completion callback (use the _async form)");
}

void Runtime::close() {
  if (closed_) return;
  stop_warm_pool();
  std::vector<SandboxRecord> owned;
  {
    std::lock_guard lock(mutex_);
    if (closed_) return;
    closed_ = true;
    for (auto& [id, child] : children_) {
      // (Already destroyed ones are being reclaimed by a worker; joined below.)
      if (child.record.spec.lifetime == Lifetime::kOwned && !reclaiming_.count(id)) owned.push_back(child.record);
      if (auto h = handles_.find(id); h != handles_.end())
        if (auto sb = h->second.lock()) sb->destroy_mark_only();
    }
  }
  for (const auto& rec : owned) {
    try {
      teardown(rec);
    } catch (...) {
      // Best effort: whatever remains is swept by the next runtime or `sandlet gc`.
    }
  }
  // Stop watching children (detached ones live on), let in-flight calls finish, stop the loop.
  asio::post(io_, [this] {
    std::lock_guard lock(mutex_);
    for (auto& [id, child] : children_) {
      boost::system::error_code ignored;
      child.watcher->cancel(ignored);
    }
  });
  kill_one_shots();  // asynchronous ones conclude on the loop, which cannot stop before they do
  work_.reset();
  if (loop_.joinable()) loop_.join();
  workers_.join();  // reclaims in flight have waited for their sandbox's exit
  end_one_shots();
  host_.netns.reset();
  // Reap what has exited but was not reaped by the (now stopped) watchers; detached ones still running
  // are left alone and reparented when this process exits.
  std::lock_guard lock(mutex_);
  for (auto& [id, child] : children_) {
    siginfo_t info;
    ::waitid(P_PIDFD, static_cast<id_t>(child.watcher->native_handle()), &info, WEXITED | WNOHANG | __WALL);
    boost::system::error_code ignored;
    child.watcher->close(ignored);
  }
  children_.clear();
  // Layer mounts nobody uses any more (this process's sandboxes are gone; other processes' records count).
  // (A runtime whose open failed half way has no layer mounts and no state to release.)
  try {
    if (layer_mounts_) layer_mounts_->release_unused(nullptr, [this] { return layers_in_use(); });
  } catch (const Error&) {
  }
  release_state_if_empty(state_);
  // The "sandlet" parent cgroups stay for the next runtime (as a container engine's do): making and
  // removing four of them cost a one-shot `sandlet run` ~0.4 ms. An explicit gc removes them when idle.
}

std::shared_ptr<Sandbox> Runtime::create(const Spec& spec) {
  check_not_on_loop("sandbox create");
  if (closed_) throw Error(Code::kFailedPrecondition, "runtime is closed");
  // Always on a runtime worker: the parent-death signal that ties an owned sandbox to this process fires
  // when the *thread* that cloned it exits, and a caller's thread may be short-lived.
  std::promise<std::shared_ptr<Sandbox>> promise;
  auto future = promise.get_future();
  run_on_workers([this, &spec, &promise] {
    try {
      promise.set_value(create_blocking(spec));
    } catch (...) {
      promise.set_exception(std::current_exception());
    }
  });
  // After the worker is on its way (starting a thread first delays its wake-up).
  host_.netns->prefetch_first();
  return future.get();
}

void Runtime::create_async(Spec spec, CreateDone done) {
  if (closed_) throw Error(Code::kFailedPrecondition, "runtime is closed");
  run_on_workers([this, spec = std::move(spec), done = std::move(done)]() mutable {
    std::exception_ptr error;
    std::shared_ptr<Sandbox> sb;
    try {
      sb = create_blocking(spec);
    } catch (...) {
      error = std::current_exception();
    }
    // Completions run on the loop thread, like every other callback.
    asio::post(io_, [done = std::move(done), error, sb = std::move(sb)]() mutable { done(error, std::move(sb)); });
  });
  host_.netns->prefetch_first();
}

SandboxRecord Runtime::new_record(const std::string& backend, SandboxState state) {
  SandboxRecord rec;
  rec.id = sys::random_hex(6);
  rec.backend = backend;
  rec.state = state;
  rec.created_at = sys::now_unix_seconds();
  rec.owner_pid = ::getpid();
  rec.owner_start = sys::own_start_time();
  std::string dir = sandbox_dir(rec.id);
  if (::mkdir(dir.c_str(), 0700) < 0) {
    // Another runtime on this root may have released the tmpfs state directory when it closed.
    if (errno != ENOENT) throw_errno("mkdir " + dir);
    prepare_state(host_.root);
    if (::mkdir(dir.c_str(), 0700) < 0) throw_errno("mkdir " + dir);
  }
  try {
    rec.slot = slots_->claim(dir);
    rec.uid_base = container::SlotTable::uid_base(rec.slot);
    // Recorded before any kernel object exists, so a crash from here on is visible to gc.
    sys::write_file_atomic(dir + "/record.json", rec.to_json());
  } catch (...) {
    discard(rec);
    throw;
  }
  return rec;
}

void Runtime::discard(const SandboxRecord& rec) {
  try {
    sys::kill_and_remove_cgroups(rec.cgroups.v2.empty() ? sys::cgroup_paths_for(host_.cgroups, rec.id) : rec.cgroups);
    slots_->release(rec.slot, sandbox_dir(rec.id));
    sys::remove_tree(sandbox_dir(rec.id));
  } catch (...) {
    // Whatever remains is gc's: the record says who made it.
  }
}

std::optional<Runtime::WarmEntry> Runtime::take_warm(const Spec& spec, const std::vector<LayerUse>& layers) {
  if (spec.backend != "container") return std::nullopt;
  std::optional<WarmEntry> hit;
  std::vector<WarmEntry> stale;
  {
    std::lock_guard lock(warm_mutex_);
    // The pool follows the environment asked for last: a rollout that creates the same one over and over
    // gets sandboxes staged with its root filesystem. When consecutive creates ask for different ones (many
    // tasks interleaved), staged sandboxes would be thrown away unused, so the pool prepares generic ones
    // (everything but the root filesystem), which fit any environment.
    warm_staged_ = warm_key_ && warm_key_->layers == spec.layers && warm_key_->limits.disk == spec.limits.disk;
    warm_key_ = spec;
    warm_key_digests_.clear();
    for (const auto& l : layers) {
      if (!l.digest.empty()) warm_key_digests_.push_back(l.digest);
    }
    // A warm pool only for processes that create more than one sandbox.
    if (++creates_ == 2 && !warm_stop_ && options_.warm_pool > 0) warm_thread_ = std::thread([this] { warm_loop(); });
    while (!warm_.empty()) {
      WarmEntry e = std::move(warm_.front());
      warm_.pop_front();
      if (!e.prepared->fits(spec) || !sys::process_alive(e.rec.init_pid, e.rec.init_start)) {
        stale.push_back(std::move(e));  // another environment, or its init died while waiting
        continue;
      }
      hit = std::move(e);
      break;
    }
    warm_cv_.notify_one();
  }
  if (!stale.empty()) {
    auto doomed = std::make_shared<std::vector<WarmEntry>>(std::move(stale));
    run_on_workers([this, doomed] {
      for (auto& e : *doomed) {
        e.prepared.reset();
        discard(e.rec);
      }
    });
  }
  return hit;
}

// Keeps options_.warm_pool container sandboxes prepared (namespaces, cgroup, uid range, init waiting for its
// configuration), so that a create only does the spec-dependent half.
void Runtime::warm_loop() {
  auto impl = backend_impls_.find("container");
  if (impl == backend_impls_.end()) return;
  std::unique_lock lock(warm_mutex_);
  for (;;) {
    warm_cv_.wait(lock, [this] { return warm_stop_ || warm_.size() < options_.warm_pool; });
    if (warm_stop_) return;
    std::optional<Spec> key = warm_staged_ ? warm_key_ : std::nullopt;
    std::vector<std::string> key_digests = warm_staged_ ? warm_key_digests_ : std::vector<std::string>();
    lock.unlock();
    std::optional<WarmEntry> entry;
    try {
      // Store layers of the key stay mounted while staging clones them (another process may unmount).
      std::vector<sys::UniqueFd> holds(key_digests.size());
      for (size_t i = 0; i < key_digests.size(); ++i) layer_mounts_->acquire(key_digests[i], &holds[i]);
      WarmEntry e;
      e.rec = new_record("container", SandboxState::kPooled);
      try {
        // Staged for the environment asked for last (its root filesystem ready too), or generic.
        e.prepared = impl->second->prepare(e.rec, sandbox_dir(e.rec.id), key ? &*key : nullptr, nullptr);
      } catch (...) {
        discard(e.rec);
        throw;
      }
      sys::write_file_atomic(sandbox_dir(e.rec.id) + "/record.json", e.rec.to_json());
      entry = std::move(e);
    } catch (...) {
      // Creates fall back to preparing their own and report errors there; back off a little.
      lock.lock();
      warm_cv_.wait_for(lock, std::chrono::seconds(1), [this] { return warm_stop_; });
      continue;
    }
    lock.lock();
    warm_.push_back(std::move(*entry));
  }
}

void Runtime::stop_warm_pool() {
  {
    std::lock_guard lock(warm_mutex_);
    warm_stop_ = true;
  }
  warm_cv_.notify_all();
  if (warm_thread_.joinable()) warm_thread_.join();
  std::deque<WarmEntry> left;
  {
    std::lock_guard lock(warm_mutex_);
    left.swap(warm_);
  }
  for (auto& e : left) {
    e.prepared.reset();  // kills the waiting init, removes its cgroups
    discard(e.rec);
  }
}

std::shared_ptr<Sandbox> Runtime::create_blocking(const Spec& spec) {
  Started started = start_sandbox(spec, nullptr);
  const SandboxRecord& rec = started.rec;
  auto sb = std::make_shared<Sandbox>(shared_from_this(), rec, true);
  {
    std::lock_guard lock(mutex_);
    remember_handle(rec.id, sb);
  }
  watch_child(rec, std::move(started.pidfd));
  return sb;
}

Runtime::Started Runtime::start_sandbox(const Spec& requested, OneShot* one_shot) {
  if (closed_) throw Error(Code::kFailedPrecondition, "runtime is closed");
  SandboxRecord resolution;
  std::vector<sys::UniqueFd> layer_holds;  // released when this create returns or fails
  const Spec spec = resolve_layers(requested, resolution, layer_holds);
  struct ReleaseOnFailure {
    Runtime* rt;
    SandboxRecord& resolution;
    std::vector<sys::UniqueFd>& holds;
    bool done = false;
    ~ReleaseOnFailure() {
      if (done) return;
      holds.clear();
      rt->release_layers_of(resolution);  // never throws
    }
  } release_on_failure{this, resolution, layer_holds};
  validate_spec(spec);
  auto impl = backend_impls_.find(spec.backend);
  if (impl == backend_impls_.end()) {
    for (const auto& b : backends_)
      if (b.name == spec.backend)
        throw Error(Code::kUnimplemented, "backend '" + spec.backend + "' is not available on this host: " + b.reason);
    throw Error(Code::kInvalidArgument, "invalid spec field 'backend': unknown backend '" + spec.backend + "'");
  }

  // The spec-independent half from the warm pool, or made now.
  SandboxRecord rec;
  std::unique_ptr<Backend::Prepared> prepared;
  if (auto warm = take_warm(spec, resolution.layers)) {
    rec = std::move(warm->rec);
    prepared = std::move(warm->prepared);
  } else {
    rec = new_record(spec.backend, SandboxState::kCreating);
    try {
      prepared = impl->second->prepare(rec, sandbox_dir(rec.id), nullptr, &spec.limits);
    } catch (...) {
      discard(rec);
      throw;
    }
  }
  rec.spec = spec;
  rec.environment = resolution.environment;
  rec.layers = resolution.layers;
  rec.created_at = sys::now_unix_seconds();
  rec.deadline = rec.created_at + spec.max_lifetime_s;

  sys::UniqueFd pidfd;
  try {
    pidfd = impl->second->finish(std::move(prepared), rec, one_shot);
    rec.state = SandboxState::kRunning;
    sys::write_file_atomic(sandbox_dir(rec.id) + "/record.json", rec.to_json());
  } catch (...) {
    if (pidfd) {
      ::syscall(SYS_pidfd_send_signal, pidfd.get(), SIGKILL, nullptr, 0);
      siginfo_t info;
      ::waitid(P_PIDFD, static_cast<id_t>(pidfd.get()), &info, WEXITED | __WALL);
    }
    discard(rec);
    throw;
  }

  release_on_failure.done = true;
  return Started{std::move(rec), std::move(pidfd)};
}

// Never throws: close() calls it, and a close() cut short would leave its threads running.
void Runtime::kill_init(const SandboxRecord& rec) noexcept {
  try {
    sys::UniqueFd pidfd(static_cast<int>(::syscall(SYS_pidfd_open, rec.init_pid, 0)));
    if (pidfd && sys::process_start_time(rec.init_pid) == std::optional<uint64_t>(rec.init_start))
      ::syscall(SYS_pidfd_send_signal, pidfd.get(), SIGKILL, nullptr, 0);
  } catch (...) {
  }
}

// One-shot runs in flight: their sandboxes end; their callers' threads (or the loop, for asynchronous
// ones) see it and reclaim them.
void Runtime::kill_one_shots() {
  std::lock_guard lock(mutex_);
  for (const auto& [id, rec] : one_shots_) kill_init(rec);
}

// Every started one-shot is registered by now (the workers are joined): wait until all are reclaimed.
void Runtime::end_one_shots() {
  kill_one_shots();
  std::unique_lock lock(mutex_);
  one_shots_done_.wait(lock, [this] { return one_shots_.empty() && one_shot_reclaims_ == 0; });
}

void Runtime::watch_child(const SandboxRecord& rec, sys::UniqueFd pidfd) {
  const std::string id = rec.id;
  std::lock_guard lock(mutex_);
  auto watcher = std::make_unique<asio::posix::stream_descriptor>(io_, pidfd.release());
  arm_watcher(*watcher, id);
  Child child;
  child.watcher = std::move(watcher);
  child.record = rec;
  children_[id] = std::move(child);
}

// Runs on the loop thread when a sandbox this process started has exited (destroyed, idle/max lifetime,
// crash): reap it, then clean its host state on a worker.
void Runtime::arm_watcher(asio::posix::stream_descriptor& watcher, const std::string& id) {
  watcher.async_wait(asio::posix::stream_descriptor::wait_read, [this, id](boost::system::error_code ec) {
    if (!ec) on_child_exit(id);
  });
}

void Runtime::on_child_exit(const std::string& id) {
  SandboxRecord rec;
  {
    std::lock_guard lock(mutex_);
    auto it = children_.find(id);
    if (it == children_.end()) return;
    siginfo_t info = {};
    int rc = ::waitid(P_PIDFD, static_cast<id_t>(it->second.watcher->native_handle()), &info,
                      WEXITED | WNOHANG | __WALL);
    if (rc == 0 && info.si_pid == 0) {
      // Readiness without an exit (the reactor may report one): the sandbox runs on; keep watching.
      arm_watcher(*it->second.watcher, id);
      return;
    }
    rec = std::move(it->second.record);
    children_.erase(it);
    if (auto h = handles_.find(id); h != handles_.end())
      if (auto sb = h->second.lock()) sb->destroy_mark_only();
    if (reclaiming_.count(id)) return;  // destroy() is already reclaiming it
    reclaiming_.insert(id);
  }
  run_on_workers([this, rec = std::move(rec)] {
    try {
      teardown(rec);
    } catch (...) {
    }
  });
}

// Caller holds mutex_. Handles closed without destroy leave expired entries: sweep them now and then so
// that a long-running trainer's map stays the size of its live sandboxes.
void Runtime::remember_handle(const std::string& id, const std::shared_ptr<Sandbox>& sb) {
  if (handles_.size() >= 2 * handles_swept_size_ + 64) {
    std::erase_if(handles_, [](const auto& kv) { return kv.second.expired(); });
    handles_swept_size_ = handles_.size();
  }
  handles_[id] = sb;
}

void Runtime::forget(const std::string& id) {
  std::lock_guard lock(mutex_);
  handles_.erase(id);
}

sys::UniqueFd Runtime::kill_and_retire(const SandboxRecord& rec, const sys::UniqueFd* own_pidfd) {
  // Kill PID 1 (the kernel then kills its whole pid namespace) and the cgroup. A pidfd opened here is
  // checked against the recorded start time so that a reused pid is never signalled.
  sys::UniqueFd pidfd;
  if (own_pidfd && *own_pidfd) {
    ::syscall(SYS_pidfd_send_signal, own_pidfd->get(), SIGKILL, nullptr, 0);
  } else if (rec.init_pid > 0) {
    pidfd.reset(static_cast<int>(::syscall(SYS_pidfd_open, rec.init_pid, 0)));
    if (pidfd && sys::process_start_time(rec.init_pid) != std::optional<uint64_t>(rec.init_start)) pidfd.reset();
    if (pidfd) ::syscall(SYS_pidfd_send_signal, pidfd.get(), SIGKILL, nullptr, 0);
  }
  if (!rec.cgroups.v2.empty()) {
    int fd = ::open((rec.cgroups.v2 + "/cgroup.kill").c_str(), O_WRONLY | O_CLOEXEC);
    if (fd >= 0) {
      (void)!::write(fd, "1", 1);
      ::close(fd);
    }
  }
  // Out of sight: no longer listed or attachable, while its resources are reclaimed.
  ::rename(sandbox_dir(rec.id).c_str(), retired_dir(rec.id).c_str());
  return pidfd;
}

void Runtime::reclaim(const SandboxRecord& rec, sys::UniqueFd pidfd) {
  if (pidfd) {
    pollfd p{pidfd.get(), POLLIN, 0};
    while (::poll(&p, 1, 10000) < 0 && errno == EINTR) {
    }
  }
  bool cgroups_gone = sys::kill_and_remove_cgroups(rec.cgroups);
  if (rec.cgroups.v2.empty()) cgroups_gone = sys::kill_and_remove_cgroups(sys::cgroup_paths_for(host_.cgroups, rec.id));
  slots_->release(rec.slot, sandbox_dir(rec.id));
  sys::remove_tree(sandbox_dir(rec.id));
  if (cgroups_gone) sys::remove_tree(retired_dir(rec.id));  // else gc retries from the record kept there
  {
    std::lock_guard lock(mutex_);
    reclaiming_.erase(rec.id);
  }
  release_layers_of(rec);
  if (!cgroups_gone) throw Error(Code::kInternal, "sandbox " + rec.id + ": cgroup still busy after kill");
}

void Runtime::teardown(const SandboxRecord& rec) {
  if (rec.id.empty()) return;
  reclaim(rec, kill_and_retire(rec));
}

void Runtime::destroy(const SandboxRecord& rec) {
  if (rec.id.empty()) return;
  {
    std::lock_guard lock(mutex_);
    reclaiming_.insert(rec.id);
  }
  // Synchronous part: nothing of the sandbox runs any more. The rest (waiting for the kernel to finish
  // the kill, removing cgroups, directory, uid range) happens on a worker; close() waits for it.
  auto pidfd = std::make_shared<sys::UniqueFd>(kill_and_retire(rec));
  run_on_workers([this, rec, pidfd] {
    try {
      reclaim(rec, std::move(*pidfd));
    } catch (...) {
      // Left for gc: the record stays in the retired directory.
    }
  });
}

std::optional<SandboxRecord> Runtime::load_record(const std::string& id) const {
  auto text = sys::read_file_if_exists(sandbox_dir(id) + "/record.json", 1 << 20);
  if (!text) return std::nullopt;
  return SandboxRecord::from_json(*text);
}

std::string Runtime::state_of(const SandboxRecord& rec) const {
  bool alive = sys::process_alive(rec.init_pid, rec.init_start);
  if (rec.state == SandboxState::kCreating) return "creating";
  if (rec.state == SandboxState::kPooled) return "pooled";
  return alive ? "running" : "dead";
}

static bool valid_id(const std::string& id) {
  if (id.empty() || id.size() > 64) return false;
  for (char c : id)
    if (!std::isxdigit(static_cast<unsigned char>(c))) return false;
  return true;
}

std::shared_ptr<Sandbox> Runtime::attach(const std::string& id) {
  if (closed_) throw Error(Code::kFailedPrecondition, "runtime is closed");
  if (!valid_id(id)) throw Error(Code::kInvalidArgument, "invalid sandbox id '" + id + "'");
  {
    std::lock_guard lock(mutex_);
    if (auto h = handles_.find(id); h != handles_.end())
      if (auto sb = h->second.lock(); sb && !sb->destroyed()) return sb;
  }
  auto rec = load_record(id);
  if (!rec) throw Error(Code::kNotFound, "no sandbox '" + id + "' under " + host_.root);
  std::string state = state_of(*rec);
  if (state != "running") throw Error(Code::kFailedPrecondition, "sandbox " + id + " is not running (" + state + ")");
  auto sb = std::make_shared<Sandbox>(shared_from_this(), *rec, false);
  std::lock_guard lock(mutex_);
  remember_handle(id, sb);
  return sb;
}

std::vector<ListedSandbox> Runtime::list(const std::string& label_filter) {
  std::string key, value;
  if (!label_filter.empty()) {
    size_t eq = label_filter.find('=');
    if (eq == std::string::npos || eq == 0)
      throw Error(Code::kInvalidArgument, "label filter must be key=value, got '" + label_filter + "'");
    key = label_filter.substr(0, eq);
    value = label_filter.substr(eq + 1);
  }
  std::vector<ListedSandbox> out;
  for (const auto& id : sys::list_dir(host_.root + "/sandboxes")) {
    if (id.empty() || id[0] == '.') continue;  // being reclaimed
    std::optional<SandboxRecord> rec;
    try {
      rec = load_record(id);
    } catch (const Error&) {
      continue;  // damaged: gc removes it
    }
    if (!rec || rec->state == SandboxState::kPooled) continue;  // not a sandbox anyone asked for yet
    if (!key.empty()) {
      auto it = rec->spec.labels.find(key);
      if (it == rec->spec.labels.end() || it->second != value) continue;
    }
    ListedSandbox item;
    item.state = state_of(*rec);
    auto obj = boost::json::parse(rec->to_json()).as_object();
    obj["state"] = item.state;
    item.json = boost::json::serialize(obj);
    item.record = std::move(*rec);
    out.push_back(std::move(item));
  }
  std::sort(out.begin(), out.end(),
            [](const ListedSandbox& a, const ListedSandbox& b) { return a.record.created_at < b.record.created_at; });
  return out;
}

}  // namespace sandlet
