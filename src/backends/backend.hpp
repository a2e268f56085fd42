// The backend contract. A backend is a factory of per-sandbox objects (BackendSandbox), and that object
// owns the sandbox's whole life on the host: the start in two halves, the channel to its in-sandbox agent,
// kill, reclaim, pause/resume, snapshot/fork hooks. The runtime (src/runtime) is generic: it keeps the
// record, the registry, the lifecycle state machine, the warm pool and the event loop, and calls no kernel
// interface on a backend's behalf. A backend never parses user input (it gets a validated Spec) and never
// includes runtime headers. Adding a backend = one folder under src/backends/ + one row in registry.cpp.
#pragma once
#include <boost/json/object.hpp>
#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "spec/spec.hpp"
#include "sys/fd.hpp"

namespace sandlet {

// What a backend supports beyond what every backend must do (start, agent channel, kill, reclaim).
// A hook a backend lacks throws UNIMPLEMENTED naming the backend (BackendSandbox's defaults do).
enum Capability : uint32_t {
  kCapPrepareAhead = 1u << 0,  // prepare() needs no spec: the runtime may keep a warm pool
  kCapOneShot = 1u << 1,       // finish() can run one command itself and report its exit (run_once)
  kCapPause = 1u << 2,         // pause()/resume()
  kCapSnapshot = 1u << 3,      // snapshot()
  kCapFork = 1u << 4,          // never set by a backend: the runtime adds it to every backend with kCapSnapshot
                               // (a fork is one snapshot and N restores, on every backend)
  kCapStoreLayers = 1u << 5,   // stacks the layer store's mounted EROFS layers (spec.layers as directories)
  kCapLayerImages = 1u << 6,   // takes the layers' EROFS images themselves (VMs: block devices)
  kCapSetLimits = 1u << 7,     // set_limits(): a running sandbox's cpus, memory and pids change in place
  kCapReuseCheck = 1u << 8,    // reuse_mark()/unchanged_since(): FnCall may give a sandbox to a next call
  kCapMachineState = 1u << 9,  // save_machine(), and prepare() resuming one: snapshots carry memory and device
                               // state (VM backends)
};
// "prepare_ahead,one_shot,..." for messages and the backend list.
std::string capability_names(uint32_t caps);

// Generic facts the runtime hands every backend once its state is ready (Backend::start).
struct BackendContext {
  std::string root;        // the runtime root
  std::string node_state;  // a private, root-only directory on tmpfs shared by the node's runtimes ("" = none)
  // Runs `fn` on a runtime worker (slow closes and other clean-up off a create's critical path).
  std::function<void(std::function<void()>)> in_background;
};

// The command of a one-shot sandbox (Runtime::run_once): the sandbox starts it itself right after its
// start-up, reports its exit on `report`, and ends.
struct OneShot {
  std::vector<std::string> argv;
  std::vector<std::string> env;  // "K=V" over the (resolved) spec's environment
  std::string cwd, user;         // empty = the spec's
  uint64_t timeout_ms = 0;       // 0 = none
  int stdio[3] = {-1, -1, -1};   // the caller's descriptors (borrowed); -1 = /dev/null inside
  sys::UniqueFd report;          // filled by finish(): one kExit or kError frame arrives there
};

// The shape a sandbox is prepared with: fixed at launch for a VM (its RAM, vCPUs and disk), applied at
// finish for a container (whose fits() then ignores it). Part of the warm pool's key.
struct Shape {
  uint64_t memory = 0;  // bytes; 0 = the backend's default
  double cpus = 0;      // 0 = the backend's default
  uint64_t disk = 0;    // bytes; 0 = the backend's default
  static Shape of(const Limits& l) { return {l.memory, l.cpus, l.disk}; }
  bool operator==(const Shape& o) const { return memory == o.memory && cpus == o.cpus && disk == o.disk; }
};

// How the spec's layers reach a backend (PrepareRequest/finish): the runtime resolves them once, and a
// backend with kCapStoreLayers gets mounted directories (Spec::layers rewritten to them), one with
// kCapLayerImages gets the images below (Spec::layers left as the store named them).
struct LayerImage {
  std::string digest;             // the layer's content digest (64 hex); "" for a host directory
  std::string meta_path;          // its EROFS image (metadata, and data unless `blobs`), verified
  std::vector<std::string> blobs; // extra devices of a chunked image, in device order, verified
  bool lazy = false;              // blobs fill on first read (the node's loader)
  std::string host_dir;           // a spec's host directory, as it named it (the backend packs it)
  bool toolkit = false;           // the spec's toolkit (last of the list, never part of the root)
};

// The machine part of a snapshot (VM backends): memory and device state in files, pinned to what can
// read it back. The files are hostile input on restore: a backend checks the checksum and every size.
struct MachineState {
  static constexpr uint32_t kFormatVersion = 1;
  uint32_t format_version = kFormatVersion;
  std::string backend;     // who wrote it (only that backend restores it)
  std::string vmm;         // e.g. "qemu 7.2.22": another VMM version refuses it
  std::string machine;     // the machine type and shape, e.g. "microvm,mem=512M,cpus=1"
  std::string dir;         // where its files are (owned by the snapshot)
  std::string sha256;      // of the files, in the backend's order
};

// A sandbox's changes since it started, as its backend hands them to a snapshot: a directory in the form
// of an OverlayFS upper layer (whiteouts, opaque directories), whose owners are host ids, id 0 inside being
// `id_base`. Hostile input: everything in it was written by the sandbox.
struct WritableLayer {
  int dir_fd = -1;
  uint32_t id_base = 0;
  uint32_t id_count = 0;
  // While frozen: inode numbers of files some process of the sandbox maps shared and writable (their
  // writes change no time stamp), or `all_mapped` when they could not all be listed.
  std::set<uint64_t> mapped_shared_writable;
  bool all_mapped = false;
};

// One sandbox, as its backend sees it. Made by Backend::prepare (a start's first half) or Backend::adopt
// (from its record: a sandbox of another process, or one to reclaim after a crash). Thread-safety: every
// method may be called from any thread; kill() concurrently with anything.
class BackendSandbox {
 public:
  virtual ~BackendSandbox() = default;
  // Dropping one whose finish() has not succeeded destroys everything it made; dropping a finished one
  // leaves the sandbox running (its record says how to reach and reclaim it).

  // --- start ---
  // True when finish() can complete this prepared sandbox for `spec` without redoing work it did ahead.
  virtual bool fits(const Spec& spec) const { return true; }
  // The second half: completes the start with `spec` (validated; layers resolved to directories). With
  // `one_shot`, the sandbox runs that command instead of serving its agent (needs kCapOneShot). Throws; on
  // failure this object still owns what it made (dropping it destroys that).
  virtual void finish(const Spec& spec, OneShot* one_shot) = 0;

  // --- record ---
  // The backend's section of the sandbox record; the runtime stores it and never interprets it.
  virtual boost::json::object state() const = 0;

  // --- the sandbox as it runs ---
  // Whether its top process still runs (never fooled by a reused pid).
  virtual bool alive() const = 0;
  // A new stream connected to the in-sandbox agent (for one request). UNAVAILABLE when nothing answers.
  virtual sys::UniqueFd connect() const = 0;
  // A descriptor that becomes readable when the sandbox ends, for sandboxes started by this object
  // (owned by this object; -1 for adopted ones, which are not this process's to watch).
  virtual int exit_fd() const { return -1; }
  // After exit_fd() was readable: true when the sandbox has really ended (a readiness can be stale).
  virtual bool ended() { return !alive(); }

  // --- the end ---
  // Kills every process of the sandbox: nothing of it runs when this returns. Idempotent; never throws.
  virtual void kill() noexcept = 0;
  // After kill(): waits until the kernel is done and frees every host resource of the sandbox (uid range,
  // cgroups, ...). Idempotent and restartable from adopt() after a crash. Throws when something could not
  // be freed yet (gc retries from the record).
  virtual void reclaim() = 0;

  // --- optional hooks (see Capability) ---
  // Freezes every process (memory stays); resume() thaws them.
  virtual void pause();
  virtual void resume();
  // Of a paused sandbox: gives back to the host what memory the kernel can drop; returns the bytes.
  virtual uint64_t reclaim_memory() { return 0; }
  // Calls `running` with the sandbox's writable layer while it runs on, then holds every process of it
  // still, calls `frozen` with the layer, and lets it run on again (a sandbox paused before stays paused).
  // Returns how long the sandbox was held still, in nanoseconds.
  virtual uint64_t snapshot(const std::function<void(const WritableLayer&)>& running,
                            const std::function<void(const WritableLayer&)>& frozen);
  // Of a sandbox held still by snapshot() (from its `frozen` call): its machine state into `dir`, an empty
  // directory the runtime made and keeps with the snapshot (kCapMachineState). A snapshot is an artifact:
  // its file changes (the writable layer above) and this; a restore resumes it through Backend::prepare
  // (PrepareRequest::resume), and a fork is one snapshot and N restores.
  virtual MachineState save_machine(const std::string& dir);
  // kCapLayerImages: the spec's layers as images, lowest first, before finish() (Spec::layers then name
  // them as the store does: digests, or host directories), then its toolkit's (LayerImage::toolkit).
  virtual void set_layer_images(std::vector<LayerImage> images) { unimplemented("layer images"); }
  // Changes a running sandbox's cpus, memory and pids limits (kCapSetLimits): what `limits` sets is
  // applied, what it leaves 0 goes back to unlimited. INVALID_ARGUMENT names a field the host refused.
  virtual void set_limits(const Limits& limits);

  // FnCall's reuse check, made by the host and never trusted to the guest (kCapReuseCheck): a mark of what
  // a call could leave behind (processes, files, IPC objects) taken when the sandbox is clean, and whether
  // the sandbox is still as marked after a call. Opaque to the runtime.
  struct ReuseMark {
    virtual ~ReuseMark() = default;
  };
  virtual std::unique_ptr<ReuseMark> reuse_mark() const;
  virtual bool unchanged_since(const ReuseMark& clean) const;
  // Replaces the sandbox's network allowlist (`allow`; docs/NETWORK.md) in one step: every later
  // connect, send and packet is checked against the new set only.
  virtual void net_update(const NetworkPolicy& policy);
  // Network denial counters and the last denials (sandlet_sandbox_net_stats_json).
  virtual boost::json::object net_stats() const;
  // Seccomp denial counters and the last denials after `after_seq` (sandlet_sandbox_seccomp_stats_json);
  // readable after kill(), until reclaim().
  virtual boost::json::object seccomp_stats(uint64_t after_seq = 0) const;

 protected:
  explicit BackendSandbox(std::string backend) : backend_(std::move(backend)) {}
  [[noreturn]] void unimplemented(const char* what) const;
  const std::string backend_;
};

// Whether this host can run a backend, and why not; `details` holds the backend's own facts (a VM
// backend's accelerator and why it was chosen), shown by the backend list and `sandlet doctor`.
struct BackendProbe {
  bool available = false;
  std::string reason;  // "" when available
  boost::json::object details;

  static BackendProbe yes(boost::json::object details = {}) { return {true, "", std::move(details)}; }
  static BackendProbe no(std::string why, boost::json::object details = {}) {
    return {false, std::move(why), std::move(details)};
  }
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual const char* name() const = 0;
  virtual uint32_t capabilities() const = 0;

  // Called once the runtime's state is in place, before any sandbox call. Throws when this host cannot run
  // the backend after all (the runtime then reports it unavailable with that message).
  virtual void start(const BackendContext& context) = 0;
  // A create is about to follow (the runtime's first, or its open said so): start the slow,
  // spec-independent work it will need now, in the background. May be called before start().
  virtual void expect_create() {}

  struct PrepareRequest {
    std::string id;                   // the sandbox's id
    std::string dir;                  // its directory (exists; the backend may put files there)
    const Spec* stage_for = nullptr;  // the spec it will most likely be finished with (may be null): the
                                      // parts that depend only on its environment may be done now too
    const Limits* limits = nullptr;   // the limits it will certainly get (null when pooled), so that
                                      // nothing unneeded is made
    Shape shape;                      // the shape it will most likely be finished with (pooled: the last
                                      // create's); a backend whose shape is fixed at launch uses it, and
                                      // its fits() refuses a spec of another shape
    const std::vector<LayerImage>* images = nullptr;  // kCapLayerImages with stage_for: its layers' images
    // kCapMachineState: the machine state of a snapshot this sandbox resumes instead of starting fresh
    // (written by this backend: MachineState::backend; never pooled). Hostile input: the backend checks
    // its version, VMM, machine, checksum and every size before it uses it, and refuses what it cannot read.
    const MachineState* resume = nullptr;
  };
  // The spec-independent half of a start (the runtime may do it ahead of time, in a warm pool). Throws; on
  // failure nothing the backend made is left behind.
  virtual std::unique_ptr<BackendSandbox> prepare(const PrepareRequest& request) = 0;
  // Rebuilds a sandbox's object from its record: `state` is what state() returned (empty when a crash came
  // before the record held it), `dir` the directory it was prepared in. Cheap: no kernel object is made.
  virtual std::unique_ptr<BackendSandbox> adopt(const std::string& id, const std::string& dir,
                                                const boost::json::object& state) = 0;
  // gc: node-wide leftovers no record accounts for. `release_idle`: an explicit gc, which also removes
  // node-level structures kept between runtimes when nothing uses them.
  virtual void sweep(bool release_idle) {}
};

}  // namespace sandlet
