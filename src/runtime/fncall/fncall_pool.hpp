// FnCall: short stateless calls in pooled, RUNNING sandboxes (of the backend the pool's spec names;
// containers by default). A call takes an idle sandbox of its environment (hand-over under a mutex), execs
// once, and gives the sandbox back only if its backend's host-side reuse check proves the call left nothing
// behind (for containers: processes, the writable layer, /dev, /dev/shm, SysV IPC); otherwise the sandbox
// is destroyed and a background thread makes a replacement. Pools are per environment, owned by one
// runtime; their sandboxes are ordinary owned sandboxes labelled {"sandlet.pool": "fncall"}, so closing the
// runtime ends them too.
#pragma once
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "runtime/agent/exec_outcome.hpp"
#include "runtime/sandbox.hpp"
#include "spec/spec.hpp"

namespace sandlet {

class Runtime;

// Sizing and reuse of one environment's pool. Timings are configurable so that tests can use short ones;
// the defaults are the operators' defaults of docs/FNCALL.md.
struct FncallPoolOptions {
  size_t min_idle = 0;               // idle containers kept ready (made in the background)
  size_t max_size = 8;               // containers at most (idle + in use); callers beyond wait
  bool reuse_reset = true;           // "reset" (reuse a clean container) or "replace" (always discard)
  double freeze_after_s = 30;        // an idle container is frozen after this long (thawed at take)
  double destroy_frozen_after_s = 300;  // a frozen one is destroyed after this long (down to min_idle)
  double scale_down_step = 0.2;      // fraction of the expired idle ones destroyed per tick
  double scale_up_factor = 0.5;      // pending > 2 x idle: make this fraction of idle more at once
};

struct CallRequest {
  std::string environment;  // a store environment ("name" or "name@N"), or ...
  std::string spec_json;    // ... a whole spec (layers, limits); exactly one of the two
  std::vector<std::string> argv;  // or:
  std::string script;             // run as /bin/sh -c SCRIPT
  std::string stdin_data;
  std::vector<std::string> env;   // "K=V"
  double cpus = 0;                // 0 = the pool's (its spec's) limits
  uint64_t memory = 0;
  uint64_t pids = 0;
  double timeout_s = 0;
  uint64_t output_limit = 0;      // 0 = the exec default
};

struct CallResult {
  ExecOutcome out;
  uint64_t queue_ns = 0;  // waiting for a container (hand-over, or creating a fresh one)
  uint64_t run_ns = 0;    // the exec, request to exit
  uint64_t total_ns = 0;
  bool reused = false;    // the container had served an earlier call
};

// The per-environment pools of one runtime.
class FncallPools final {
 public:
  explicit FncallPools(std::weak_ptr<Runtime> rt);
  ~FncallPools();
  FncallPools(const FncallPools&) = delete;
  FncallPools& operator=(const FncallPools&) = delete;

  // Blocks the calling thread (not the loop's). Bad input throws INVALID_ARGUMENT naming the field.
  CallResult call(const CallRequest& req);
  // Settings for the pool of `key` (an environment name or spec JSON, as in CallRequest); applies to the
  // pool from now on (an existing pool keeps its containers).
  void set_options(const std::string& key, const FncallPoolOptions& options);
  // {"pools": [{"key", "idle", "frozen", "in_use", "waiting", "created", "reused", "discarded", ...}]}
  std::string stats_json() const;
  // Joins the background thread and destroys every pooled container. Idempotent.
  void stop();

  struct Slot;
  struct Pool;

 private:
  Pool& pool_for(const std::string& key, bool is_spec, std::unique_lock<std::mutex>& lock);
  std::unique_ptr<Slot> make_slot(const Pool& pool);
  void loop();

  std::weak_ptr<Runtime> rt_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;  // the background thread
  std::map<std::string, std::unique_ptr<Pool>> pools_;
  std::map<std::string, FncallPoolOptions> options_;
  bool stopping_ = false;
  std::thread thread_;
};

// Validates a request (the fields named as in the C ABI); throws INVALID_ARGUMENT.
void check_call_request(const CallRequest& req);

}  // namespace sandlet
