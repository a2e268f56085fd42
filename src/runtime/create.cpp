// Creating a sandbox: resolve its layers, take a prepared one from the warm pool or prepare one, finish it
// with the spec, record it running, watch its exit. Every step before "running" is undone on failure, and
// a crash at any step leaves a record (or a directory) that gc_verdict handles.
#include <unistd.h>

#include <boost/json.hpp>

#include "common/error.hpp"
#include "common/fault_point.hpp"
#include "runtime/audit/audit_records.hpp"
#include "runtime/metrics/admission_gate.hpp"
#include "runtime/metrics/metrics.hpp"
#include "runtime/runtime.hpp"
#include "sys/fs_util.hpp"

namespace sandlet {
namespace json = boost::json;


SandboxRecord Runtime::new_record(const std::string& backend, SandboxState state) {
  SandboxRecord rec;
  rec.id = sys::random_hex(6);
  rec.backend = backend;
  rec.state = state;
  rec.created_at = sys::now_unix_seconds();
  rec.owner_pid = ::getpid();
  rec.owner_start = sys::own_start_time();
  dirs_->create(rec);  // recorded before any kernel object exists: a crash from here on is visible to gc
  return rec;
}

WarmPool::Entry Runtime::prepare_pooled(Backend& backend, const Spec* stage_for, const Shape& shape,
                                        const std::vector<std::string>& digests) {
  // Store layers of the key stay mounted while staging clones them (another process may unmount); a
  // backend that takes the layers' images gets those instead (the key's layers name the store's digests).
  std::vector<sys::UniqueFd> holds;
  std::vector<LayerImage> images;
  const bool take_images = stage_for && (backend.capabilities() & kCapLayerImages);
  std::vector<LayerUse> scratch_layers;
  if (take_images) {
    SandboxRecord scratch;
    layers_->resolve(*stage_for, scratch, holds, &images);
    scratch_layers = std::move(scratch.layers);
  } else {
    holds.resize(digests.size());
    for (size_t i = 0; i < digests.size(); ++i) layer_mounts_->acquire(digests[i], &holds[i]);
  }
  WarmPool::Entry e;
  e.record = new_record(backend.name(), SandboxState::kPooled);
  // A VM launched ahead already reads its layers' images: its record names them, so that another
  // process's gc (which reads records) does not detach a lazy one under it.
  if (take_images) e.record.layers = scratch_layers;
  try {
    e.impl = backend.prepare({e.record.id, dirs_->dir(e.record.id), stage_for, nullptr, shape, take_images ? &images : nullptr});
    e.record.backend_state = e.impl->state();
    dirs_->write(e.record);
  } catch (...) {
    abandon(e.record, std::move(e.impl));
    throw;
  }
  return e;
}

Runtime::Started Runtime::start_sandbox(const Spec& requested, OneShot* one_shot, const MachineState* resume) {
  if (closed_) throw Error(Code::kFailedPrecondition, "runtime is closed");
  // Layers by capability: a backend with store_layers stacks the store's layers as mounted directories
  // (resolve mounts them); one that takes images (layer_images) gets them unmounted, from its first user on.
  Backend& backend = backend_for(requested);
  const uint32_t caps = backend.capabilities();
  const bool images = caps & kCapLayerImages;
  if (!(caps & kCapStoreLayers) && !images && LayerUsage::has_store_refs(requested))
    throw Error(Code::kUnimplemented, "layers of the layer store are not supported by the " + requested.backend + " backend");
  SandboxRecord resolution;
  std::vector<sys::UniqueFd> layer_holds;  // released when this create returns or fails
  std::vector<LayerImage> layer_images;
  const Spec spec = layers_->resolve(requested, resolution, layer_holds, images ? &layer_images : nullptr);
  struct ReleaseOnFailure {
    LayerUsage& layers;
    SandboxRecord& resolution;
    std::vector<sys::UniqueFd>& holds;
    bool done = false;
    ~ReleaseOnFailure() {
      if (done) return;
      holds.clear();
      layers.release_of(resolution);
    }
  } release_on_failure{*layers_, resolution, layer_holds};
  validate_spec(spec);
  if (one_shot && !(caps & kCapOneShot))
    throw Error(Code::kUnimplemented, "one-shot runs are not supported by the " + spec.backend + " backend");
  if (resume && resume->backend != spec.backend)
    throw Error(Code::kInvalidArgument, "invalid spec field 'backend': a machine state of the " + resume->backend +
                                            " backend, which alone resumes it");
  if (resume && !(caps & kCapMachineState))
    throw Error(Code::kUnimplemented, "the " + spec.backend + " backend cannot resume a machine state here");

  // The spec-independent half from the warm pool, or made now.
  SandboxRecord rec;
  std::unique_ptr<BackendSandbox> impl;
  std::optional<WarmPool::Entry> warm;
  if ((caps & kCapPrepareAhead) && !resume) {
    std::vector<std::string> digests;
    for (const auto& l : resolution.layers)
      if (!l.digest.empty()) digests.push_back(l.digest);
    warm = pool_->take(backend, spec, digests);
  }
  if (warm) {
    rec = std::move(warm->record);
    impl = std::move(warm->impl);
  } else {
    rec = new_record(spec.backend, SandboxState::kCreating);
    fault_point("runtime.record");
    try {
      // A FnCall pool's sandbox gets other limits per call (set_limits): it is prepared as a pooled one
      // is, without knowing its limits, so that every controller's group exists (hybrid cgroup hosts).
      const bool limits_change = spec.labels.count("sandlet.pool") && spec.labels.at("sandlet.pool") == "fncall";
      Backend::PrepareRequest request{rec.id, dirs_->dir(rec.id), nullptr, limits_change ? nullptr : &spec.limits,
                                      Shape::of(spec.limits)};
      request.resume = resume;
      impl = backend.prepare(request);
    } catch (...) {
      audit_create_failed(rec.id, spec, std::current_exception());
      abandon(rec, nullptr);
      throw;
    }
  }
  rec.spec = spec;
  rec.environment = resolution.environment;
  rec.layers = resolution.layers;
  rec.created_at = sys::now_unix_seconds();
  rec.deadline = rec.created_at + spec.max_lifetime_s;
  {
    json::object fields = audit_create_fields(rec);
    // Each relaxation the spec asked for is also an event of its own, so that a query finds them.
    const json::array relaxations = fields["policy"].as_object()["seccomp"].as_object()["relaxations"].as_array();
    audit_->write("create", rec.id, spec.labels, std::move(fields));
    for (const json::value& r : relaxations)
      audit_->policy(rec.id, spec.labels, std::string(r.as_object().at("name").as_string()), r.as_object());
  }
  const uint64_t finish_start = sys::now_monotonic_ns();

  try {
    fault_point("runtime.prepared");
    if (images) impl->set_layer_images(std::move(layer_images));
    impl->finish(spec, one_shot);
    fault_point("runtime.finished");
    check_transition(rec.id, rec.state, SandboxState::kRunning);
    rec.state = SandboxState::kRunning;
    rec.backend_state = impl->state();
    struct stat written = {};
    dirs_->write(rec, &written);
    if (!one_shot) remember_record(rec.id, written, false);  // a one-shot sandbox takes no exec
    fault_point("runtime.running");
  } catch (...) {
    audit_create_failed(rec.id, spec, std::current_exception());
    abandon(rec, std::move(impl));
    throw;
  }
  audit_->write("running", rec.id, spec.labels,
                {{"backend", rec.backend},
                 {"warm", warm.has_value()},
                 {"finish_ms", static_cast<double>(sys::now_monotonic_ns() - finish_start) / 1e6},
                 {"one_shot", one_shot != nullptr}});
  release_on_failure.done = true;
  return Started{std::move(rec), std::shared_ptr<BackendSandbox>(std::move(impl))};
}

void Runtime::audit_create_failed(const std::string& id, const Spec& spec, std::exception_ptr error) noexcept {
  try {
    audit_->write("destroy", id, spec.labels,
                  {{"reason", end_reason::kCreateFailed}, {"backend", spec.backend}, {"error", audit_error(error)}});
  } catch (...) {
  }
}

std::shared_ptr<Sandbox> Runtime::create_blocking(const Spec& spec, const MachineState* resume) {
  Started started = start_sandbox(spec, nullptr, resume);
  auto sb = std::make_shared<Sandbox>(weak_from_this(), started.rec, started.impl, true);
  registry_.remember(started.rec.id, sb);
  watch_exit(started.rec, started.impl);
  if (closed_) {
    // A create that ran while close() waited for it, or raced with close() after its list of sandboxes to
    // end: an owned sandbox ends with its runtime; a detached one lives on, its exit watch stopped as the
    // others' are (posted again in case close() already did).
    if (started.rec.spec.lifetime == Lifetime::kOwned) {
      end(started.rec, started.impl, end_reason::kRuntimeClosed);
      throw Error(Code::kFailedPrecondition, "runtime closed while sandbox " + started.rec.id + " was being created");
    }
    loop_.post([this] { registry_.cancel_watchers(); });
  }
  return sb;
}

std::shared_ptr<Sandbox> Runtime::create_measured(const Spec& spec, uint64_t requested_ns, const std::string& admission_key,
                                                  const MachineState* resume) {
  metrics_->create_started(requested_ns, sys::now_monotonic_ns());
  std::shared_ptr<Sandbox> sb;
  try {
    sb = create_blocking(spec, resume);
  } catch (...) {
    metrics_->create_done(requested_ns, sys::now_monotonic_ns(), false, std::string());
    admission_->admitted(admission_key, std::string(), false);
    throw;
  }
  metrics_->create_done(requested_ns, sys::now_monotonic_ns(), true, sb->id());
  admission_->admitted(admission_key, sb->id(), true);
  return sb;
}

// The sandbox's exit (destroyed, idle or max lifetime, crash) is seen on the loop thread through its
// backend object's exit descriptor (exit_watch.hpp).
void Runtime::watch_exit(const SandboxRecord& rec, const std::shared_ptr<BackendSandbox>& impl) {
  Registry::Entry entry;
  entry.record = rec;
  entry.impl = impl;
  if (impl->exit_fd() >= 0) entry.watcher = std::make_unique<ExitWatch>(loop_.io(), impl);
  const std::string id = rec.id;
  registry_.add(std::move(entry));
  registry_.with_watcher(id, [this, id](boost::asio::posix::stream_descriptor& w) {
    w.async_wait(boost::asio::posix::stream_descriptor::wait_read, [this, id](boost::system::error_code ec) {
      if (!ec) on_exit(id);
    });
  });
}

void Runtime::on_exit(const std::string& id) {
  std::shared_ptr<BackendSandbox> impl = registry_.impl(id);
  if (!impl) return;
  if (!impl->ended()) {
    // A readiness without an exit (the reactor may report a stale one): the sandbox runs on; keep watching.
    registry_.with_watcher(id, [this, id](boost::asio::posix::stream_descriptor& w) {
      w.async_wait(boost::asio::posix::stream_descriptor::wait_read, [this, id](boost::system::error_code ec) {
        if (!ec) on_exit(id);
      });
    });
    return;
  }
  registry_.mark_ended(id);
  SandboxRecord rec;
  rec.id = id;  // the registry's own record is the one used
  end(rec, impl, end_reason::kExited);
}

}  // namespace sandlet
