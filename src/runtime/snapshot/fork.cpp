// Restore and fork. A restore makes a new sandbox from a snapshot's artifact: its files by stacking the
// snapshot's chain (the same create on every backend), its machine state by the backend that wrote it.
// A fork is one snapshot, then n restores at once, each child with a defined identity of its own
// (sandlet.h, "Fork children"): new id and hostname, the parent's labels plus lineage labels, a fresh
// SANDLET_SEED and /etc/machine-id; spec, limits and network policy as the parent's. Files are forked;
// processes and memory only with a machine state.
#include <condition_variable>
#include <mutex>

#include <boost/json.hpp>

#include "common/error.hpp"
#include "runtime/sandbox.hpp"
#include "runtime/snapshot/snapshots.hpp"
#include "sys/fs_util.hpp"

namespace sandlet {
namespace {

// "<first label of the parent's>-<index>", within the 63 characters of a label.
std::string child_hostname(const std::string& parent, size_t index) {
  std::string suffix = "-" + std::to_string(index);
  std::string label = parent.substr(0, parent.find('.'));
  if (label.size() + suffix.size() > 63) label.resize(63 - suffix.size());
  while (!label.empty() && label.back() == '-') label.pop_back();
  return (label.empty() ? "sandbox" : label) + suffix;
}

}  // namespace

void check_fork_count(size_t n) {
  if (n < 1 || n > kMaxForkChildren)
    throw Error(Code::kInvalidArgument, "invalid fork field 'n': " + std::to_string(n) + " (1.." +
                                            std::to_string(kMaxForkChildren) + ")");
}

void Snapshots::restore_async(const SnapshotArtifact& artifact, Spec spec, CreateDone done) {
  if (artifact.layer.stack.empty())
    throw Error(Code::kInvalidArgument, "restore: layer " + artifact.layer.digest + " is not a snapshot");
  spec.environment.clear();
  spec.layers = {artifact.layer.digest};  // restores its whole chain (runtime/layers.cpp)
  std::shared_ptr<const MachineState> resume;
  if (artifact.machine) {
    const MachineState& m = *artifact.machine;
    if (m.format_version != MachineState::kFormatVersion)
      throw Error(Code::kInvalidArgument, "restore: machine state of format " + std::to_string(m.format_version) +
                                              " (this version reads " + std::to_string(MachineState::kFormatVersion) + ")");
    if (m.backend != spec.backend)
      throw Error(Code::kInvalidArgument, "invalid spec field 'backend': the snapshot's machine state was written by the " +
                                              m.backend + " backend, which alone resumes it");
    if (!(w_.capabilities(spec.backend) & kCapMachineState))
      throw Error(Code::kUnimplemented, "the " + spec.backend + " backend cannot resume a machine state here");
    resume = std::make_shared<const MachineState>(m);
  }
  w_.create(std::move(spec), std::move(resume), std::move(done));
}

ForkResult Snapshots::fork_from(const SandboxRecord& parent, SnapshotResult snap, const ForkOptions& options) {
  ForkResult out;
  out.snapshot = std::move(snap);
  Spec base = parent.spec;  // as resolved at its create: the environment's defaults are in it
  fork_children(out.snapshot.artifact(), base, parent.id, options, out);
  audit_fork(parent.id, parent.spec.labels, out);
  return out;
}

ForkResult Snapshots::fork_snapshot(const std::string& layer, const Spec& base, const ForkOptions& options) {
  w_.check_not_on_loop("fork");
  check_fork_count(options.n);
  if (options.machine)
    throw Error(Code::kInvalidArgument, "invalid fork field 'machine': a stored snapshot carries files only");
  ForkResult out;
  try {
    out.snapshot.layer = w_.store.inspect(layer);
  } catch (const Error& e) {
    throw Error(e.code(), "fork: unknown snapshot '" + layer + "': " + e.what(), e.err_no());
  }
  if (out.snapshot.layer.stack.empty())
    throw Error(Code::kInvalidArgument, "fork: layer " + out.snapshot.layer.digest + " is not a snapshot");
  out.snapshot.existed = true;
  fork_children(out.snapshot.artifact(), base, "", options, out);
  audit_fork("", base.labels, out);
  return out;
}

// One "fork" record on the parent (none when forked from a stored snapshot): the snapshot and the children;
// each child also has its own create/running records.
void Snapshots::audit_fork(const std::string& parent_id, const std::map<std::string, std::string>& labels,
                         const ForkResult& out) noexcept {
  try {
    boost::json::array children;
    size_t failed = 0;
    for (size_t i = 0; i < out.children.size(); ++i) {
      if (out.children[i]) children.push_back(boost::json::value(out.children[i]->id()));
      else ++failed;
    }
    w_.audit->write("fork", parent_id, labels,
                  {{"snapshot", out.snapshot.layer.digest},
                   {"n", out.children.size()},
                   {"children", std::move(children)},
                   {"failed", failed}});
  } catch (...) {
  }
}

void Snapshots::fork_children(const SnapshotArtifact& artifact, const Spec& base, const std::string& parent_id,
                              const ForkOptions& options, ForkResult& out) {
  check_fork_count(options.n);
  const size_t n = options.n;
  const image::LayerInfo& snap = artifact.layer;
  std::vector<Spec> specs(n, base);
  for (size_t i = 0; i < n; ++i) {
    Spec& s = specs[i];
    s.environment.clear();
    s.layers = {snap.digest};  // what restore_async sets too: validated below as the children will be
    for (const auto& [k, v] : options.labels) spec_set_label(s, k, v);
    if (!parent_id.empty()) spec_set_label(s, "sandlet.parent", parent_id);
    spec_set_label(s, "sandlet.snapshot", snap.digest);
    spec_set_label(s, "sandlet.fork_index", std::to_string(i));
    s.hostname = child_hostname(base.hostname, i);
    s.env["SANDLET_SEED"] = sys::random_hex(8);
    if (!options.copy_secrets) s.secrets.clear();
    if (options.detached) s.lifetime = Lifetime::kDetached;
  }
  validate_spec(specs[0]);  // the same for every child: bad input fails the call before anything is made

  out.children.assign(n, nullptr);
  out.errors.assign(n, nullptr);
  std::mutex m;
  std::condition_variable cv;
  size_t pending = n;
  auto finished = [&] {
    std::lock_guard<std::mutex> lock(m);
    if (--pending == 0) cv.notify_all();
  };
  for (size_t i = 0; i < n; ++i) {
    try {
      restore_async(artifact, specs[i], [&, i](std::exception_ptr err, std::shared_ptr<Sandbox> sb) {
        out.errors[i] = err;
        out.children[i] = std::move(sb);
        if (!out.children[i]) return finished();
        // A machine id of its own, where the image has /etc (written through the child's agent).
        auto written = [&, i](std::exception_ptr e, std::string, uint32_t) {
          if (e) {
            try {
              std::rethrow_exception(e);
            } catch (const Error& err) {
              if (err.code() != Code::kNotFound) out.errors[i] = e;
            } catch (...) {
              out.errors[i] = e;
            }
          }
          finished();
        };
        try {
          out.children[i]->write_file_async("/etc/machine-id", sys::random_hex(16) + "\n", 0444, written);
        } catch (...) {
          written(std::current_exception(), std::string(), 0);
        }
      });
    } catch (...) {
      out.errors[i] = std::current_exception();
      finished();
    }
  }
  std::unique_lock<std::mutex> lock(m);
  cv.wait(lock, [&] { return pending == 0; });
  // A child whose identity could not be completed is not handed out half made.
  for (size_t i = 0; i < n; ++i) {
    if (out.errors[i] && out.children[i]) {
      try {
        out.children[i]->destroy();
      } catch (...) {
      }
      out.children[i].reset();
    }
  }
}

}  // namespace sandlet
