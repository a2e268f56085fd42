// Node admission: a budget (sandbox count, memory, pids and CPU share from the specs, concurrent initialisations)
// shared by every process that uses one runtime root. The reservations live in one small file under the
// root, read and rewritten under flock(2); each entry carries its process's pid and start time, so that
// what a dead process reserved is dropped by whoever reads the file next. A request that does not fit
// waits in this process's queue — latency-sensitive before batch, then first come — until it fits or its
// deadline passes; a waiting latency request is also written to the file, so that batch requests of other
// processes do not overtake it. UNAVAILABLE names the resource that did not fit (or the full queue).
#pragma once
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>

namespace sandlet {

struct AdmissionOptions {
  uint64_t max_sandboxes = 0;  // 0 = unbounded (each bound on its own)
  uint64_t max_memory = 0;     // bytes, the sum of admitted specs' memory limits
  uint64_t max_pids = 0;       // the sum of admitted specs' pids limits
  uint64_t max_cpu_millis = 0; // the sum of admitted specs' CPU limits, in thousandths of a CPU (may be
                               // above the node's CPUs: most sandboxes use a fraction of what they ask)
  uint64_t max_initializing = 0;  // creates between admission and usable (or failed), node-wide
  double timeout_s = 30;          // how long a request may wait
  size_t max_queue = 1024;        // waiting requests of this process beyond which a request fails at once
  bool enabled() const { return max_sandboxes || max_memory || max_pids || max_cpu_millis || max_initializing; }
};

enum class AdmissionPriority { kLatency = 0, kBatch = 1 };

struct AdmissionRequest {
  std::string key;  // unique per reservation (node-wide): e.g. the runtime's pid, a counter
  uint64_t memory = 0;
  uint64_t pids = 0;
  uint64_t cpu_millis = 0;
  AdmissionPriority priority = AdmissionPriority::kBatch;
};

class NodeAdmission final {
 public:
  // `path`: the node's reservation file (created if missing).
  NodeAdmission(std::string path, AdmissionOptions options);
  ~NodeAdmission();
  NodeAdmission(const NodeAdmission&) = delete;
  NodeAdmission& operator=(const NodeAdmission&) = delete;

  // Blocks until `req` fits; then it is reserved (and counted as initialising). Throws UNAVAILABLE naming
  // the resource when the deadline passes or the queue is full, INVALID_ARGUMENT when it can never fit.
  // Returns the seconds it waited.
  double admit(const AdmissionRequest& req);
  // The create of `key` finished (usable or failed): it no longer counts as initialising.
  void initialised(const std::string& key);
  // Drops the reservation of `key` (the sandbox ended or its create failed).
  void release(const std::string& key);
  // Node-wide use now: {"sandboxes", "memory", "pids", "cpu_millis", "initializing", "waiting_latency"} (dead
  // entries dropped).
  std::map<std::string, uint64_t> usage();
  size_t waiting() const;
  // Every waiting and later admit fails with FAILED_PRECONDITION (the runtime is closing).
  void cancel();
  const AdmissionOptions& options() const { return options_; }

 private:
  struct Entry {
    std::string key;
    int64_t pid = 0;
    uint64_t start = 0;
    uint64_t memory = 0, pids = 0, cpu_millis = 0;
    bool initializing = false;
    bool waiting = false;  // a latency request waiting (reserves nothing; holds batch requests back)
  };
  using Entries = std::map<std::string, Entry>;
  // Runs `fn` on the file's live entries under an exclusive lock; writes them back when it returns true.
  void with_file(const std::function<bool(Entries&)>& fn);
  // "" when `req` fits into `entries` now, else the resource that does not.
  std::string missing(const Entries& entries, const AdmissionRequest& req) const;

  const std::string path_;
  const AdmissionOptions options_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  uint64_t next_ticket_ = 0;
  bool cancelled_ = false;
  std::map<std::pair<int, uint64_t>, std::string> queue_;  // (priority, ticket) -> key: this process's waiters
};

}  // namespace sandlet
