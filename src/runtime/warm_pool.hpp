// A warm pool: sandboxes whose spec-independent half of a start (Backend::prepare) is done ahead, so that a
// create only does the second half. For any backend with kCapPrepareAhead; keyed by (backend, environment),
// and it prepares the last create's shape (memory, vCPUs, disk); whether a prepared sandbox fits another
// shape is the backend's fits() (a VM's is fixed at launch):
// the pool follows the environment asked for last — a rollout that creates the same one over and over gets
// sandboxes with its root filesystem staged; when consecutive creates ask for different ones (many tasks
// interleaved), staged sandboxes would be thrown away unused, so it prepares generic ones (everything but
// the root filesystem), which fit any environment. Started by a runtime's second create (a process that
// creates one sandbox pays nothing). Hits and misses are counted.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "backends/backend.hpp"
#include "runtime/record.hpp"

namespace sandlet {

class WarmPool final {
 public:
  struct Entry {
    SandboxRecord record;  // state pooled, written
    std::unique_ptr<BackendSandbox> impl;
  };
  // Makes one pooled sandbox on `backend`, staged for `stage_for` (null: generic), keeping `digests` (store
  // layers) mounted while it stages. Throws on failure (the pool backs off and retries).
  using Prepare = std::function<Entry(Backend& backend, const Spec* stage_for, const Shape& shape,
                                      const std::vector<std::string>& digests)>;
  // Disposes of entries that will not be used (on a worker: dropping a prepared sandbox kills it).
  using Discard = std::function<void(std::vector<Entry>)>;

  struct Stats {
    uint64_t hits = 0;       // creates handed a prepared sandbox
    uint64_t misses = 0;     // creates on a pool-capable backend that found none fitting
    uint64_t prepared = 0;   // sandboxes the pool prepared
    uint64_t discarded = 0;  // prepared ones thrown away (other environment, died while waiting, close)
    size_t ready = 0;        // prepared and waiting now
    size_t target = 0;       // how many it keeps ready (0 = off)
    bool staged = false;     // preparing for the last environment asked for (else generic)
    std::string backend;     // the backend it prepares for ("" before the first create)
    Shape shape;             // the shape it prepares (the last create's)
  };

  WarmPool(size_t target, Prepare prepare, Discard discard);
  ~WarmPool() { stop(); }
  WarmPool(const WarmPool&) = delete;
  WarmPool& operator=(const WarmPool&) = delete;

  // For a create of `spec` (layers resolved) on `backend`: a fitting prepared sandbox, or none. Steers the
  // pool toward this (backend, environment); `digests` are the spec's store layers.
  std::optional<Entry> take(Backend& backend, const Spec& spec, const std::vector<std::string>& digests);
  // Joins the pool's thread and discards what it holds. Idempotent.
  void stop();
  // Store layers the pool keeps mounted for its key while the runtime lives.
  std::vector<std::string> kept_digests() const;
  Stats stats() const;

 private:
  void loop();

  const size_t target_;
  Prepare prepare_;
  Discard discard_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Entry> ready_;
  Backend* backend_ = nullptr;  // the key: backend ...
  std::optional<Spec> key_;     // ... and the spec asked for last
  bool staged_ = false;         // stage for key_ (the last two creates asked for it) or prepare generic
  std::vector<std::string> key_digests_;
  size_t creates_ = 0;
  bool stopping_ = false;
  Stats stats_;
  std::thread thread_;
};

}  // namespace sandlet
