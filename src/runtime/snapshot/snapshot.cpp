// Snapshots::take: a sandbox's changes as a store layer (pack_diff), and its machine state when asked. The backend hands over its writable
// layer twice — while the sandbox runs, then frozen (BackendSandbox::snapshot); src/snapshot packs it into a
// private staging tmpfs each time; the store imports the second pass's tree after the thaw. Per sandbox, the
// last snapshot's manifest (what it saw) makes the next one incremental.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <mutex>

#include <boost/json.hpp>

#include "common/error.hpp"
#include "image/store_files.hpp"
#include "runtime/snapshot/snapshots.hpp"
#include "snapshot/pack.hpp"
#include "sys/fs_util.hpp"
#include "sys/mount_api.hpp"

namespace sandlet {
namespace {

constexpr const char* kManifestFile = "snapshot.manifest";
constexpr const char* kHeadFile = "snapshot.head";  // the last snapshot's digest: kept while the sandbox lives

uint64_t steady_ns() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count());
}

// The layers below a sandbox's changes, lowest first, as its record names them (store digests, host
// directories as paths; a spec of host directories only has no resolved list: its layers are those).
std::vector<std::string> stack_of(const SandboxRecord& rec) {
  std::vector<std::string> out;
  for (const auto& l : rec.layers) out.push_back(l.digest.empty() ? l.ref : l.digest);
  if (out.empty()) out = rec.spec.layers;
  return out;
}

// A private tmpfs for the two passes (attached nowhere: a crash cannot leave it behind). Each pass may hold
// the whole writable layer.
sys::UniqueFd staging_tmpfs(uint64_t disk) {
  sys::UniqueFd fs = sys::FsContext("tmpfs").set("size", std::to_string(2 * disk + (64u << 20))).set("mode", "0700").mount(0);
  for (const char* d : {"running", "frozen"})
    if (::mkdirat(fs.get(), d, 0700) != 0) throw_errno(std::string("snapshot: make staging ") + d);
  return fs;
}

sys::UniqueFd open_dir_at(int at, const char* name) {
  sys::UniqueFd d(::openat(at, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!d) throw_errno(std::string("snapshot: open staging ") + name);
  return d;
}

}  // namespace

SnapshotResult Snapshots::take(const SandboxRecord& rec, BackendSandbox& impl, const SnapshotOptions& options) {
  w_.check_not_on_loop("snapshot");
  const uint64_t t0 = steady_ns();
  snapshot::check_excludes(options.exclude, "snapshot field 'exclude'");
  if (!options.name.empty()) image::check_layer_name(options.name, "snapshot field 'name'");
  const uint32_t caps = w_.capabilities(rec.backend);
  if (!(caps & kCapSnapshot))
    throw Error(Code::kUnimplemented, "snapshots are not supported by the " + rec.backend + " backend");
  if (options.machine && !(caps & kCapMachineState))
    throw Error(Code::kUnimplemented, "invalid snapshot field 'machine': the " + rec.backend +
                                          " backend keeps no machine state (its snapshots carry files only)");

  const std::string dir = w_.dirs.dir(rec.id);
  // One snapshot of a sandbox at a time, from any thread or process (flock: each open is its own holder).
  image::FileLock one_at_a_time(dir + "/snapshot.lock");

  // Incremental when the last snapshot is still in the store; else every change since the start.
  std::optional<snapshot::Manifest> previous;
  std::vector<std::string> stack = stack_of(rec);
  if (!options.full) {
    if (auto text = sys::read_file_if_exists(dir + "/" + kManifestFile, snapshot::kMaxManifestBytes)) {
      std::optional<snapshot::Manifest> m;
      try {
        m = snapshot::decode_manifest(*text, dir + "/" + kManifestFile);
      } catch (const Error&) {
        // Damaged (or from another version): this snapshot is a full one and writes a new manifest.
      }
      if (m) {
        if (auto last = w_.store.find(m->layer)) {
          stack = last->stack;
          stack.push_back(last->digest);
          previous = std::move(m);
        }
      }
    }
  }
  SnapshotResult result;
  stack = flatten_if_deep(std::move(stack), options.max_depth ? options.max_depth : w_.default_max_depth,
                          &result.flattened);

  snapshot::PackOptions pack;
  pack.exclude = options.exclude;
  if (options.default_excludes)
    pack.exclude.insert(pack.exclude.end(), default_snapshot_excludes().begin(), default_snapshot_excludes().end());
  pack.previous = previous ? &*previous : nullptr;
  pack.max_file_size = rec.spec.limits.disk;

  // The machine state goes where the snapshot keeps it, made empty now and removed if the snapshot fails.
  std::string machine_dir;
  struct RemoveOnFailure {
    std::string* dir;
    bool done = false;
    ~RemoveOnFailure() {
      if (!done && !dir->empty()) sys::remove_tree(*dir);
    }
  } remove_machine_on_failure{&machine_dir};
  if (options.machine) {
    sys::mkdir_p(w_.machine_root, 0700);
    machine_dir = w_.machine_root + "/" + sys::random_hex(8);
    if (::mkdir(machine_dir.c_str(), 0700) != 0) throw_errno("snapshot: make " + machine_dir);
  }

  sys::UniqueFd staging = staging_tmpfs(rec.spec.limits.disk);
  sys::UniqueFd running_dir = open_dir_at(staging.get(), "running");
  sys::UniqueFd frozen_dir = open_dir_at(staging.get(), "frozen");
  snapshot::PassResult first, final_pass;
  result.frozen_ns = impl.snapshot(
      [&](const WritableLayer& layer) {
        pack.id_base = layer.id_base;
        pack.id_count = layer.id_count;
        first = snapshot::pack_pass(layer.dir_fd, running_dir.get(), pack, -1, nullptr);
      },
      [&](const WritableLayer& layer) {
        pack.mapped_shared_writable = layer.mapped_shared_writable;
        static const snapshot::CopyIndex kNothingToReuse;
        final_pass = snapshot::pack_pass(layer.dir_fd, frozen_dir.get(), pack, running_dir.get(),
                                         layer.all_mapped ? &kNothingToReuse : &first.copied);
        if (options.machine) result.machine = impl.save_machine(machine_dir);  // the same instant as the files
      });
  running_dir.reset();

  image::ImportOptions import;
  import.role = "diff";
  import.name = options.name;
  import.parent = stack.empty() || !image::is_store_ref(stack.back()) ? "" : stack.back();
  import.stack = stack;
  const std::string tree = "/proc/self/fd/" + std::to_string(staging.get()) + "/frozen";
  result.layer = w_.store.import_tree(tree, "snapshot of sandbox " + rec.id, import, &result.existed);
  result.entries = final_pass.entries;
  result.bytes = final_pass.bytes;

  final_pass.manifest.layer = result.layer.digest;
  const std::string manifest = snapshot::encode_manifest(final_pass.manifest);
  if (manifest.empty())
    ::unlink((dir + "/" + kManifestFile).c_str());  // too large to keep: the next snapshot is a full one
  else
    sys::write_file_atomic(dir + "/" + kManifestFile, manifest, 0600);
  sys::write_file_atomic(dir + "/" + kHeadFile, result.layer.digest + "\n", 0600);
  // The staging tmpfs goes with its last descriptor; its dissolution waits for an RCU grace period.
  auto held = std::make_shared<sys::UniqueFd>(std::move(staging));
  w_.in_background([held] { held->reset(); });
  remove_machine_on_failure.done = true;
  result.total_ns = steady_ns() - t0;
  w_.audit->write("snapshot", rec.id, rec.spec.labels,
                {{"layer", result.layer.digest},
                 {"name", options.name},
                 {"full", options.full},
                 {"existed", result.existed},
                 {"entries", result.entries},
                 {"bytes", result.bytes},
                 {"flattened", result.flattened},
                 {"machine", result.machine ? boost::json::value(result.machine->machine) : boost::json::value(nullptr)},
                 {"frozen_ms", static_cast<double>(result.frozen_ns) / 1e6}});
  return result;
}

// Past `max_depth` snapshots stacked on each other, the snapshots of the chain are merged into
// one layer (the store's merge: the same view), so a restore stacks few layers however long the chain.
std::vector<std::string> Snapshots::flatten_if_deep(std::vector<std::string> stack, size_t max_depth, bool* flattened) {
  size_t first_snapshot = stack.size();
  while (first_snapshot > 0) {
    const std::string& ref = stack[first_snapshot - 1];
    if (!image::is_store_ref(ref)) break;
    auto l = w_.store.find(ref);
    if (!l || l->stack.empty()) break;
    --first_snapshot;
  }
  const size_t depth = stack.size() - first_snapshot;
  if (depth < max_depth || depth < 2) return stack;
  std::vector<std::string> chain(stack.begin() + static_cast<long>(first_snapshot), stack.end());
  std::vector<std::string> base(stack.begin(), stack.begin() + static_cast<long>(first_snapshot));
  image::ImportOptions merged_opts;
  merged_opts.role = "diff";
  merged_opts.stack = base;
  std::vector<sys::UniqueFd> holds;
  image::LayerInfo merged = w_.store.merge(chain, merged_opts, [&](const std::string& digest) {
    holds.emplace_back();
    return w_.mounts.acquire(digest, &holds.back());
  });
  holds.clear();
  w_.layers.release_unused();
  base.push_back(merged.digest);
  *flattened = true;
  return base;
}

}  // namespace sandlet
