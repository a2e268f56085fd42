#include "runtime/runtime.hpp"

#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <cstdlib>
#include <future>

#include "backends/registry.hpp"
#include "common/error.hpp"
#include "runtime/audit/audit_records.hpp"
#include "runtime/metrics/admission_gate.hpp"
#include "runtime/metrics/metrics_publisher.hpp"
#include "runtime/metrics/metrics.hpp"
#include "sys/fs_util.hpp"

namespace json = boost::json;

namespace sandlet {

Runtime::Runtime(const RuntimeOptions& options)
    : options_(options), metrics_(std::make_unique<Metrics>()), closing_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
  if (!closing_) throw_errno("eventfd");
}

std::shared_ptr<Runtime> Runtime::open(const std::string& root_arg, const RuntimeOptions& options) {
  std::string root = root_arg;
  if (root.empty()) {
    const char* env = std::getenv("SANDLET_ROOT");
    root = env && *env ? env : "/var/lib/sandlet";
  }
  if (root.front() != '/') throw Error(Code::kInvalidArgument, "runtime root must be an absolute path: " + root);
  while (root.size() > 1 && root.back() == '/') root.pop_back();

  std::shared_ptr<Runtime> rt(new Runtime(options));
  rt->root_ = root;
  rt->admission_ = std::make_unique<AdmissionGate>(root, *rt->metrics_);
  // First thing, before the runtime's own threads start: a caller about to create gets the slowest part
  // of it (a container's network namespace) made while the open does its file-system work.
  rt->open_backends(options.create_soon);
  rt->workers_ = std::make_unique<boost::asio::thread_pool>(options.worker_threads ? options.worker_threads : 2);
  sys::mkdir_p(root, 0700);
  // Sandboxes' agent sockets live here: only the runtime's user may reach them.
  if (::chmod(root.c_str(), 0700) < 0) throw_errno("chmod " + root);
  // Beside the state, never under <root>/sandboxes or the layers (what a sandbox may be given).
  rt->audit_ = std::make_shared<AuditLog>(AuditLog::dir_of_root(root), options.audit);
  rt->state_ = prepare_state(root);
  rt->dirs_ = std::make_unique<SandboxDirs>(root);
  rt->registry_config_ = registry::registry_config_from_env_or(options.registries, "runtime option 'registries'");
  rt->layer_store_ = std::make_unique<image::LayerStore>(root + "/layers");
  rt->layer_mounts_ = std::make_unique<image::LayerMounts>(*rt->layer_store_, root + "/layers/mounts");
  rt->wire_lazy_layers();
  rt->layers_ = std::make_unique<LayerUsage>(*rt->layer_store_, *rt->layer_mounts_, *rt->dirs_,
                                             [raw = rt.get()](const std::string& except) {
                                               auto used = raw->registry_.layers_in_use(except);
                                               if (raw->pool_)
                                                 for (const auto& d : raw->pool_->kept_digests()) used.insert(d);
                                               return used;
                                             });
  rt->layers_->set_environment_resolver([raw = rt.get()](const std::string& text) { return raw->resolve_environment(text); });
  rt->expired_ = std::make_unique<ExpiredLogs>(root, *rt->dirs_, rt->audit_, [raw = rt.get()](const SandboxRecord& rec) {
    std::shared_ptr<BackendSandbox> impl;
    if (Backend* backend = raw->backend_named(rec.backend)) {
      try {
        impl = backend->adopt(rec.id, raw->dirs_->dir(rec.id), rec.backend_state);
      } catch (const Error&) {
      }
    }
    return raw->state_of(rec, impl.get());
  });
  Snapshots::Wiring snapshot_wiring{*rt->layer_store_, *rt->layer_mounts_, *rt->layers_, *rt->dirs_, rt->audit_,
                                    options.snapshot_max_depth, root + "/machines"};
  snapshot_wiring.capabilities = [raw = rt.get()](const std::string& b) { return raw->backend_capabilities(b); };
  snapshot_wiring.create = [raw = rt.get()](Spec spec, std::shared_ptr<const MachineState> resume, CreateDone done) {
    raw->create_async_resuming(std::move(spec), std::move(resume), std::move(done));
  };
  snapshot_wiring.check_not_on_loop = [raw = rt.get()](const char* what) { raw->check_not_on_loop(what); };
  snapshot_wiring.in_background = [raw = rt.get()](std::function<void()> fn) { raw->in_background(std::move(fn)); };
  rt->snapshots_ = std::make_unique<Snapshots>(std::move(snapshot_wiring));
  // One descriptor per sandbox this process creates (its exit watcher) plus one per exec in flight: the
  // customary 1024 soft limit would cap a trainer at a few hundred sandboxes. Like the Go runtime, raise
  // the soft limit to the hard one.
  struct rlimit nofile;
  if (::getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur < nofile.rlim_max) {
    nofile.rlim_cur = nofile.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &nofile);
  }
  rt->start_backends();
  rt->pool_ = std::make_unique<WarmPool>(
      options.warm_pool,
      [raw = rt.get()](Backend& b, const Spec* stage_for, const Shape& shape, const std::vector<std::string>& digests) {
        return raw->prepare_pooled(b, stage_for, shape, digests);
      },
      [raw = rt.get()](std::vector<WarmPool::Entry> doomed) {
        auto held = std::make_shared<std::vector<WarmPool::Entry>>(std::move(doomed));
        raw->in_background([raw, held] {
          for (auto& e : *held) raw->abandon(e.record, std::move(e.impl));
        });
      });
  rt->loop_.start();
  rt->publisher_ = std::make_unique<MetricsPublisher>(root, *rt->metrics_, rt->loop_.io(),
                                                      [raw = rt.get()] { return raw->closed_.load(); });
  rt->publisher_->start();
  if (options.gc_on_open) rt->gc(/*release_idle=*/false);
  return rt;
}

// Every row of the registry: made (construction is cheap; a backend's own set-up waits for the runtime's
// state, in start_backends), told first thing when a create follows, then probed.
void Runtime::open_backends(bool create_soon) {
  std::vector<std::unique_ptr<Backend>> made;
  for (const auto& entry : backend_registry()) {
    made.push_back(entry.factory ? entry.factory(root_) : nullptr);
    if (create_soon && made.back()) made.back()->expect_create();
  }
  const auto& table = backend_registry();
  for (size_t i = 0; i < table.size(); ++i) {
    BackendProbe probe = table[i].probe();
    BackendStatus st{table[i].name, table[i].summary, false, std::move(probe.reason), 0,
                     json::serialize(probe.details)};
    if (probe.available && !made[i] && !table[i].calls_only) st.reason = "not built into this version of sandlet";
    if (probe.available && made[i]) backends_[st.name] = std::move(made[i]);
    statuses_.push_back(std::move(st));
  }
}

void Runtime::start_backends() {
  BackendContext context;
  context.root = root_;
  context.node_state = state_.tmpfs_base;
  context.in_background = [this](std::function<void()> fn) { in_background(std::move(fn)); };
  for (auto& st : statuses_) {
    auto it = backends_.find(st.name);
    if (it == backends_.end()) continue;
    try {
      it->second->start(context);
      st.available = true;
      st.capabilities = it->second->capabilities() & ~kCapFork;
      // A fork is one snapshot and N restores: every backend that snapshots forks.
      if (st.capabilities & kCapSnapshot) st.capabilities |= kCapFork;
    } catch (const std::exception& e) {
      st.reason = e.what();
      backends_.erase(it);
    }
  }
  // A calls-only row (fncall) pools sandboxes of the backends that can prepare them ahead.
  json::array pooled_on;
  for (const auto& st : statuses_)
    if (st.available && (st.capabilities & kCapPrepareAhead)) pooled_on.emplace_back(st.name);
  for (auto& st : statuses_) {
    const BackendEntry* entry = find_backend_entry(st.name);
    if (!entry || !entry->calls_only || !st.reason.empty()) continue;
    st.available = !pooled_on.empty();
    if (!st.available) st.reason = "no backend that can prepare sandboxes ahead is available here";
    json::object details = json::parse(st.details_json).as_object();
    details["pools_on"] = pooled_on;
    st.details_json = json::serialize(details);
  }
}

Backend* Runtime::backend_named(const std::string& name) {
  auto it = backends_.find(name);
  return it == backends_.end() ? nullptr : it->second.get();
}

Backend& Runtime::backend_for(const Spec& spec) {
  if (Backend* b = backend_named(spec.backend)) return *b;
  const BackendEntry* entry = find_backend_entry(spec.backend);
  if (!entry)
    throw Error(Code::kInvalidArgument, "invalid spec field 'backend': unknown backend '" + spec.backend +
                                            "' (known: " + backend_names() + ")");
  if (entry->calls_only)
    throw Error(Code::kInvalidArgument, "invalid spec field 'backend': '" + spec.backend + "': " + entry->calls_only);
  for (const auto& st : statuses_)
    if (st.name == spec.backend)
      throw Error(Code::kUnimplemented, "backend '" + spec.backend + "' is not available on this host: " + st.reason);
  throw Error(Code::kUnimplemented, "backend '" + spec.backend + "' is not available on this host");
}

uint32_t Runtime::backend_capabilities(const std::string& name) const {
  for (const auto& st : statuses_)
    if (st.name == name) return st.capabilities;
  return 0;
}

Runtime::~Runtime() { close(); }

void Runtime::in_background(std::function<void()> fn) {
  {
    std::lock_guard lock(close_mutex_);
    if (!workers_closed_) {
      boost::asio::post(*workers_, std::move(fn));
      return;
    }
  }
  fn();
}

// Never throws: a close() cut short would leave its threads running over freed state.
void Runtime::close() noexcept {
  {
    std::lock_guard lock(close_mutex_);
    if (closed_.exchange(true)) return;
  }
  try {
    if (pool_) pool_->stop();
    // Creates waiting for node admission give up now (their long calls are joined next).
    if (admission_) admission_->cancel_waiting();
    // Long calls (snapshots, forks) end first: they may wait for creates on the workers and the loop.
    std::vector<LongCall> long_calls;
    {
      std::lock_guard lock(close_mutex_);
      long_calls.swap(long_calls_);
    }
    join_all(long_calls);
    // Creates and reclaims in flight finish first, while the loop still runs their completions; from here
    // on, work handed to the workers runs on the caller's thread.
    {
      std::lock_guard lock(close_mutex_);
      workers_closed_ = true;
    }
    if (workers_) workers_->join();
    registry_.mark_ended("");
    // Owned sandboxes end with their runtime (all killed first, then reclaimed: the kernel tears them down
    // meanwhile); detached ones live on (their exit watchers stop below).
    std::vector<std::pair<SandboxRecord, std::shared_ptr<BackendSandbox>>> owned;
    for (auto& [rec, impl] : registry_.live(/*one_shots=*/false)) {
      SandboxRecord claimed;
      std::shared_ptr<BackendSandbox> obj;
      if (rec.spec.lifetime == Lifetime::kOwned && registry_.begin_end(rec.id, &claimed, &obj)) {
        try {
          retire(claimed, *obj, end_reason::kRuntimeClosed);
        } catch (...) {
          obj->kill();  // its record stays for gc; nothing of it may run on
        }
        owned.emplace_back(std::move(claimed), std::move(obj));
      }
    }
    for (auto& [rec, impl] : owned) reclaim(rec, impl);
    // Runs through the agent in flight saw their sandbox end; they stop waiting for their caller to take
    // output, and their completions go to the loop, still running.
    signal_closing();
    std::vector<LongCall> agent_runs;
    {
      std::lock_guard lock(close_mutex_);
      agent_runs.swap(agent_runs_);
    }
    join_all(agent_runs);
    loop_.post([this] { registry_.cancel_watchers(); });
    // One-shot runs in flight end (their callers see it; asynchronous ones conclude on the loop, which
    // cannot stop before they do).
    for (auto& [rec, impl] : registry_.live(/*one_shots=*/true)) impl->kill();
    // An armed publish is cancelled: the loop would otherwise run (and close wait) until its timer fired.
    if (publisher_) publisher_->stop();
    loop_.stop();
    registry_.wait_one_shots_done();
    registry_.close_watchers();
    // Layer mounts nobody uses any more (this process's sandboxes are gone; other processes' records count).
    if (layers_) layers_->release_unused();
    release_state_if_empty(state_);
    if (publisher_) publisher_->unpublish();
    // Node-level structures (the container backend's "sandlet" parent cgroups) stay for the next runtime,
    // as a container engine's do; an explicit gc removes them when idle. The backend objects themselves go
    // with the Runtime object: a call on another thread that began before this close may still use them.
  } catch (...) {
    // Whatever failed above, no thread of ours may outlive the runtime.
    signal_closing();
    std::vector<LongCall> left;
    {
      std::lock_guard lock(close_mutex_);
      left.swap(long_calls_);
      for (auto& c : agent_runs_) left.push_back(std::move(c));
      agent_runs_.clear();
    }
    join_all(left);
  }
}

void Runtime::signal_closing() noexcept {
  const uint64_t one = 1;
  (void)!::write(closing_.get(), &one, sizeof one);
}

void Runtime::join_all(std::vector<LongCall>& calls) noexcept {
  for (auto& c : calls) {
    try {
      if (c.thread.joinable()) c.thread.join();
    } catch (...) {
    }
  }
}

void Runtime::long_call(std::function<std::string()> work, std::function<void(std::exception_ptr, std::string)> done) {
  start_tracked(long_calls_, [this, work = std::move(work), done = std::move(done)]() mutable {
    std::exception_ptr err;
    std::string result;
    try {
      result = work();
    } catch (...) {
      err = std::current_exception();
    }
    loop_.post([done = std::move(done), err, result = std::move(result)] { done(err, result); });
  });
}

void Runtime::start_tracked(std::vector<LongCall>& threads, std::function<void()> body) {
  std::lock_guard lock(close_mutex_);
  if (closed_) throw Error(Code::kFailedPrecondition, "runtime is closed");
  // Finished threads are joined as new ones start: only those in flight (and just finished) exist.
  for (auto it = threads.begin(); it != threads.end();) {
    if (!it->finished->load()) {
      ++it;
      continue;
    }
    it->thread.join();
    it = threads.erase(it);
  }
  auto finished = std::make_shared<std::atomic<bool>>(false);
  threads.reserve(threads.size() + 1);  // no allocation may fail once the thread runs
  std::thread t([finished, body = std::move(body)] {
    body();
    finished->store(true);
  });
  threads.push_back({std::move(t), std::move(finished)});
}

std::shared_ptr<Sandbox> Runtime::create(const Spec& given) {
  check_not_on_loop("sandbox create");
  if (closed_) throw Error(Code::kFailedPrecondition, "runtime is closed");
  const Spec spec = with_local_environment(given);  // a registry image is pulled here, not on a worker
  // Always on a runtime worker: the parent-death signal that ties an owned sandbox to this process fires
  // when the *thread* that cloned it exits, and a caller's thread may be short-lived.
  std::promise<std::shared_ptr<Sandbox>> promise;
  auto future = promise.get_future();
  const uint64_t requested = sys::now_monotonic_ns();
  const std::string key = admission_->admit(spec);  // waits here, not on a worker: workers reclaim what frees room
  in_background([this, &spec, &promise, requested, &key] {
    try {
      promise.set_value(create_measured(spec, requested, key));
    } catch (...) {
      promise.set_exception(std::current_exception());
    }
  });
  // After the worker is on its way (starting a thread first delays its wake-up).
  if (Backend* b = backend_named(spec.backend)) b->expect_create();
  return future.get();
}

void Runtime::create_async(Spec spec, CreateDone done) { create_async_resuming(std::move(spec), nullptr, std::move(done)); }

void Runtime::create_async_resuming(Spec spec, std::shared_ptr<const MachineState> resume, CreateDone done) {
  if (closed_) throw Error(Code::kFailedPrecondition, "runtime is closed");
  const std::string backend = spec.backend;
  const uint64_t requested = sys::now_monotonic_ns();
  auto start = [this, requested, resume](Spec spec, CreateDone done, std::string key) {
    in_background([this, spec = std::move(spec), done = std::move(done), requested, key, resume]() mutable {
      std::exception_ptr error;
      std::shared_ptr<Sandbox> sb;
      try {
        sb = create_measured(spec, requested, key, resume.get());
      } catch (...) {
        error = std::current_exception();
      }
      // Completions run on the loop thread, like every other callback.
      loop_.post([done = std::move(done), error, sb = std::move(sb)]() mutable { done(error, std::move(sb)); });
    });
  };
  if (admission_->current()) {
    // Waiting for room takes a thread of its own (never a worker, nor the loop).
    auto shared_spec = std::make_shared<Spec>(std::move(spec));
    auto shared_done = std::make_shared<CreateDone>(std::move(done));
    long_call([this, shared_spec] { return admission_->admit(*shared_spec); },
              [start, shared_spec, shared_done](std::exception_ptr error, std::string key) {
                if (error) return (*shared_done)(error, nullptr);
                start(std::move(*shared_spec), std::move(*shared_done), std::move(key));
              });
  } else {
    start(std::move(spec), std::move(done), std::string());
  }
  if (Backend* b = backend_named(backend)) b->expect_create();
}

void Runtime::exec_began(const std::string& id) { metrics_->exec_began(id, sys::now_monotonic_ns()); }
void Runtime::exec_ended(const std::string& id) { metrics_->exec_ended(id, sys::now_monotonic_ns()); }

std::string Runtime::state_of(const SandboxRecord& rec, BackendSandbox* impl) const {
  if (rec.state == SandboxState::kCreating || rec.state == SandboxState::kPooled) return state_name(rec.state);
  return impl && impl->alive() ? state_name(rec.state) : "dead";
}

std::shared_ptr<Sandbox> Runtime::attach(const std::string& id) {
  if (closed_) throw Error(Code::kFailedPrecondition, "runtime is closed");
  if (!SandboxDirs::valid_id(id)) throw Error(Code::kInvalidArgument, "invalid sandbox id '" + id + "'");
  if (auto sb = registry_.handle(id)) return sb;
  auto rec = dirs_->load(id);
  if (!rec) throw Error(Code::kNotFound, "no sandbox '" + id + "' under " + root_);
  Backend* backend = backend_named(rec->backend);
  if (!backend) throw Error(Code::kUnimplemented, "sandbox " + id + ": backend '" + rec->backend + "' is not available here");
  std::shared_ptr<BackendSandbox> impl = backend->adopt(id, dirs_->dir(id), rec->backend_state);
  std::string state = state_of(*rec, impl.get());
  if (state != "running" && state != "paused")
    throw Error(Code::kFailedPrecondition, "sandbox " + id + " is not running (" + state + ")");
  auto sb = std::make_shared<Sandbox>(weak_from_this(), *rec, std::move(impl), false);
  registry_.remember(id, sb);
  audit_->write("attach", id, rec->spec.labels, {{"state", state}, {"owner_pid", static_cast<int64_t>(rec->owner_pid)}});
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
  for (const auto& id : dirs_->names()) {
    if (id.empty() || id[0] == '.') continue;  // being reclaimed
    std::optional<SandboxRecord> rec;
    try {
      rec = dirs_->load(id);
    } catch (const Error&) {
      continue;  // damaged: gc removes it
    }
    if (!rec || rec->state == SandboxState::kPooled) continue;  // not a sandbox anyone asked for yet
    if (!key.empty()) {
      auto it = rec->spec.labels.find(key);
      if (it == rec->spec.labels.end() || it->second != value) continue;
    }
    std::unique_ptr<BackendSandbox> impl;
    if (Backend* backend = backend_named(rec->backend)) {
      try {
        impl = backend->adopt(id, dirs_->dir(id), rec->backend_state);
      } catch (const Error&) {
      }
    }
    ListedSandbox item;
    item.state = state_of(*rec, impl.get());
    item.json = public_record_json(*rec, item.state.c_str());
    item.record = std::move(*rec);
    out.push_back(std::move(item));
  }
  std::sort(out.begin(), out.end(),
            [](const ListedSandbox& a, const ListedSandbox& b) { return a.record.created_at < b.record.created_at; });
  return out;
}

void Runtime::persist(const SandboxRecord& rec) {
  // The record is rewritten whole: one writer per process at a time (another process's writes race only
  // with a pause/resume of the same sandbox by two processes, which the last one wins).
  std::lock_guard lock(persist_mutex_);
  auto on_disk = dirs_->load(rec.id);
  if (!on_disk) throw Error(Code::kFailedPrecondition, "sandbox " + rec.id + " is gone");
  on_disk->state = rec.state;
  dirs_->write(*on_disk);
}

void Runtime::forget(const std::string& id) {
  registry_.forget(id);
  forget_record(id);
}

void Runtime::forget_record(const std::string& id) noexcept {
  std::lock_guard lock(stamps_mutex_);
  record_stamps_.erase(id);
}

Runtime::RecordStamp Runtime::RecordStamp::of(const struct stat& st, bool paused) {
  RecordStamp s;
  s.ino = st.st_ino;
  s.mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  s.ctime_ns = static_cast<int64_t>(st.st_ctim.tv_sec) * 1000000000 + st.st_ctim.tv_nsec;
  s.size = st.st_size;
  s.paused = paused;
  return s;
}

void Runtime::remember_record(const std::string& id, const struct stat& written, bool paused) {
  if (written.st_ino == 0) return;  // not known (write_file_atomic could not stat it)
  std::lock_guard lock(stamps_mutex_);
  record_stamps_[id] = RecordStamp::of(written, paused);
}

bool Runtime::record_paused(const std::string& id) {
  const std::string path = dirs_->dir(id) + "/" + SandboxDirs::kRecordFile;
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return false;
  RecordStamp now = RecordStamp::of(st, false);
  auto same = [&](const RecordStamp& s) {
    return s.ino == now.ino && s.mtime_ns == now.mtime_ns && s.ctime_ns == now.ctime_ns && s.size == now.size;
  };
  {
    std::lock_guard lock(stamps_mutex_);
    auto it = record_stamps_.find(id);
    if (it != record_stamps_.end() && same(it->second)) return it->second.paused;
  }
  try {
    auto rec = dirs_->load(id);
    now.paused = rec && rec->state == SandboxState::kPaused;
  } catch (const Error&) {
    return false;
  }
  std::lock_guard lock(stamps_mutex_);
  record_stamps_[id] = now;
  return now.paused;
}

std::string Runtime::stats_json() const {
  boost::json::object pool;
  WarmPool::Stats s = pool_ ? pool_->stats() : WarmPool::Stats();
  pool["target"] = s.target;
  pool["ready"] = s.ready;
  pool["hits"] = s.hits;
  pool["misses"] = s.misses;
  pool["prepared"] = s.prepared;
  pool["discarded"] = s.discarded;
  pool["staged"] = s.staged;
  pool["backend"] = s.backend;
  pool["shape"] = {{"memory", s.shape.memory}, {"cpus", s.shape.cpus}, {"disk", s.shape.disk}};
  AuditLog::Stats a = audit_ ? audit_->stats() : AuditLog::Stats();
  boost::json::object audit{{"path", audit_ ? audit_->path() : std::string()},
                            {"written", a.written},
                            {"failed", a.failed},
                            {"rotations", a.rotations},
                            {"truncated", a.truncated},
                            {"last_error", a.last_error}};
  return boost::json::serialize(boost::json::object{{"warm_pool", std::move(pool)}, {"audit", std::move(audit)}});
}

std::string Runtime::output_log_path(const std::string& id) const { return expired_->output_log_path(id); }
std::string Runtime::logs_json(const std::string& id) { return expired_->logs_json(id); }
std::string Runtime::expired_json() { return expired_->expired_json(); }
void Runtime::forget_expired(const std::string& id) { expired_->forget(id); }

void Runtime::set_admission(const AdmissionOptions& options) { admission_->set(options); }

SnapshotResult Runtime::snapshot(const SandboxRecord& rec, BackendSandbox& impl, const SnapshotOptions& options) {
  if (closed_) throw Error(Code::kFailedPrecondition, "runtime is closed");
  return snapshots_->take(rec, impl, options);
}

ForkResult Runtime::fork_from(const SandboxRecord& parent, SnapshotResult snap, const ForkOptions& options) {
  return snapshots_->fork_from(parent, std::move(snap), options);
}

ForkResult Runtime::fork_snapshot(const std::string& layer, const Spec& base, const ForkOptions& options) {
  return snapshots_->fork_snapshot(layer, base, options);
}

void Runtime::restore_async(const SnapshotArtifact& artifact, Spec spec, CreateDone done) {
  snapshots_->restore_async(artifact, std::move(spec), std::move(done));
}

}  // namespace sandlet
