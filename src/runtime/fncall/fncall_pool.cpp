// The pools behind Runtime calls (fncall_pool.hpp). They run on any backend that can prepare sandboxes
// ahead, through the backend contract only: per-call limits are BackendSandbox::set_limits, and whether a
// sandbox goes back idle after a call is the backend's reuse check (reuse_mark / unchanged_since: made by
// the host, never trusted to the guest; the container's is in backends/container/container_reuse.cpp). A
// backend without that check never gets a sandbox back: every call then costs a fresh one.
#include "runtime/fncall/fncall_pool.hpp"

#include <algorithm>
#include <boost/json.hpp>
#include <cmath>

#include "common/error.hpp"
#include "runtime/runtime.hpp"

namespace json = boost::json;

namespace sandlet {

namespace {

using Clock = std::chrono::steady_clock;

uint64_t now_ns() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count());
}

}  // namespace

struct FncallPools::Slot {
  std::shared_ptr<Sandbox> sb;
  std::unique_ptr<BackendSandbox::ReuseMark> clean;  // as handed out the first time (null: never reused)
  uint64_t calls = 0;
  bool frozen = false;
  Clock::time_point idle_since = Clock::now();
};

struct FncallPools::Pool {
  std::string key;
  Spec spec;
  FncallPoolOptions options;
  std::deque<std::unique_ptr<Slot>> idle;  // most recently used at the back (taken first: warm caches)
  size_t in_use = 0, creating = 0, waiting = 0;
  std::condition_variable ready;
  uint64_t created = 0, reused = 0, discarded_dirty = 0, discarded_replace = 0, destroyed_idle = 0;
  std::vector<std::unique_ptr<Slot>> to_destroy;  // destroyed by the background thread
  // Hand-over times (ns) of the last kHandovers takes of an idle container, for the stats' percentiles.
  static constexpr size_t kHandovers = 4096;
  std::vector<uint64_t> handovers;
  size_t handover_next = 0;
  void note_handover(uint64_t ns) {
    if (handovers.size() < kHandovers) handovers.push_back(ns);
    else handovers[handover_next++ % kHandovers] = ns;
  }
  size_t total() const { return idle.size() + in_use + creating; }
};

FncallPools::FncallPools(std::weak_ptr<Runtime> rt) : rt_(std::move(rt)) {}
FncallPools::~FncallPools() { stop(); }

void check_call_request(const CallRequest& req) {
  if (req.environment.empty() == req.spec_json.empty())
    throw Error(Code::kInvalidArgument, "invalid call field 'environment': give exactly one of environment and spec");
  if (req.argv.empty() == req.script.empty())
    throw Error(Code::kInvalidArgument, "invalid call field 'argv': give exactly one of argv and script");
  if (!req.argv.empty() && req.argv[0].empty())
    throw Error(Code::kInvalidArgument, "invalid call field 'argv': the command is empty");
  if (req.timeout_s < 0 || !std::isfinite(req.timeout_s))
    throw Error(Code::kInvalidArgument, "invalid call field 'timeout': must be >= 0");
  if (req.cpus < 0 || !std::isfinite(req.cpus) || (req.cpus > 0 && (req.cpus < 0.01 || req.cpus > 1024)))
    throw Error(Code::kInvalidArgument, "invalid call field 'cpus': 0 or 0.01 .. 1024");
  if (req.memory != 0 && req.memory < (4ull << 20))
    throw Error(Code::kInvalidArgument, "invalid call field 'memory': 0 or at least 4 MiB");
  if (req.pids == 1) throw Error(Code::kInvalidArgument, "invalid call field 'pids': 0 or at least 2");
  for (const auto& e : req.env)
    if (e.find('=') == std::string::npos || e[0] == '=')
      throw Error(Code::kInvalidArgument, "invalid call field 'env': entry '" + e + "' is not K=V");
}

FncallPools::Pool& FncallPools::pool_for(const std::string& key, bool is_spec, std::unique_lock<std::mutex>&) {
  auto it = pools_.find(key);
  if (it != pools_.end()) return *it->second;
  auto pool = std::make_unique<Pool>();
  pool->key = key;
  if (is_spec) {
    pool->spec = parse_spec_json(key);
  } else {
    spec_set_environment(pool->spec, key);
  }
  if (pool->spec.lifetime != Lifetime::kOwned)
    throw Error(Code::kInvalidArgument, "invalid spec field 'lifetime': a call's container is owned");
  pool->spec.labels["sandlet.pool"] = "fncall";
  if (auto o = options_.find(key); o != options_.end()) pool->options = o->second;
  if (!thread_.joinable()) thread_ = std::thread([this] { loop(); });
  auto& ref = *pool;
  pools_.emplace(key, std::move(pool));
  return ref;
}

std::unique_ptr<FncallPools::Slot> FncallPools::make_slot(const Pool& pool) {
  auto rt = rt_.lock();
  if (!rt || rt->closed()) throw Error(Code::kFailedPrecondition, "runtime is closed");
  auto slot = std::make_unique<Slot>();
  slot->sb = rt->create(pool.spec);
  try {
    if (slot->sb->can_check_reuse()) slot->clean = slot->sb->reuse_mark();
  } catch (...) {
    slot->sb->destroy();
    throw;
  }
  return slot;
}

CallResult FncallPools::call(const CallRequest& req) {
  check_call_request(req);
  const uint64_t begin = now_ns();
  const bool is_spec = !req.spec_json.empty();
  const std::string key = is_spec ? req.spec_json : req.environment;

  std::unique_ptr<Slot> slot;
  Pool* pool = nullptr;
  bool make = false;
  {
    std::unique_lock lock(mutex_);
    if (stopping_) throw Error(Code::kFailedPrecondition, "runtime is closed");
    pool = &pool_for(key, is_spec, lock);
    ++pool->waiting;
    if (pool->idle.empty()) wake_.notify_one();  // the background thread scales up when many wait
    for (;;) {
      if (stopping_) {
        --pool->waiting;
        throw Error(Code::kFailedPrecondition, "runtime is closed");
      }
      if (!pool->idle.empty()) {
        slot = std::move(pool->idle.back());
        pool->idle.pop_back();
        break;
      }
      if (pool->total() < pool->options.max_size) {
        make = true;
        ++pool->creating;
        break;
      }
      pool->ready.wait(lock);
    }
    --pool->waiting;
    ++pool->in_use;
    if (make) --pool->creating;
  }
  auto give_up = [&] {
    std::lock_guard lock(mutex_);
    --pool->in_use;
    pool->ready.notify_one();
  };
  try {
    if (make) {
      slot = make_slot(*pool);
      std::lock_guard lock(mutex_);
      ++pool->created;
    } else if (slot->frozen) {
      slot->sb->resume();
      slot->frozen = false;
    }
  } catch (...) {
    give_up();
    throw;
  }

  CallResult result;
  result.reused = slot->calls > 0;
  result.queue_ns = now_ns() - begin;
  if (!make) {
    std::lock_guard lock(mutex_);
    pool->note_handover(result.queue_ns);
  }
  const Limits& base = pool->spec.limits;
  const bool own_limits = req.cpus > 0 || req.memory > 0 || req.pids > 0;
  bool keep = pool->options.reuse_reset;
  std::exception_ptr error;
  try {
    if (own_limits) {
      Limits per_call = base;
      if (req.memory) per_call.memory = req.memory;
      if (req.pids) per_call.pids = req.pids;
      if (req.cpus > 0) per_call.cpus = req.cpus;
      slot->sb->set_limits(per_call);
    }
    ExecParams p;
    p.argv = req.argv.empty() ? std::vector<std::string>{"/bin/sh", "-c", req.script} : req.argv;
    p.env = req.env;
    p.stdin_data = req.stdin_data;
    p.timeout_s = req.timeout_s;
    p.output_limit = req.output_limit;
    const uint64_t run_begin = now_ns();
    result.out = slot->sb->exec(std::move(p));
    result.run_ns = now_ns() - run_begin;
  } catch (...) {
    error = std::current_exception();
    keep = false;
  }
  // Back to the pool's own limits; a sandbox whose limits cannot be put back is not reused (the call's
  // result stands).
  if (own_limits && keep) try {
      slot->sb->set_limits(base);
    } catch (...) {
      keep = false;
    }
  ++slot->calls;
  const bool replace_only = !pool->options.reuse_reset;
  if (keep) keep = slot->clean && slot->sb->unchanged_since(*slot->clean);
  {
    std::lock_guard lock(mutex_);
    --pool->in_use;
    if (keep && !stopping_) {
      if (result.reused) ++pool->reused;
      slot->idle_since = Clock::now();
      pool->idle.push_back(std::move(slot));
    } else {
      if (replace_only)
        ++pool->discarded_replace;
      else
        ++pool->discarded_dirty;
      pool->to_destroy.push_back(std::move(slot));
      wake_.notify_one();
    }
    pool->ready.notify_one();
  }
  result.total_ns = now_ns() - begin;
  result.out.duration_ns = result.run_ns;
  if (error) std::rethrow_exception(error);
  return result;
}

// The background thread: destroys discarded containers, makes replacements (min_idle, and more when callers
// pile up), freezes idle ones and destroys long-frozen ones in steps.
void FncallPools::loop() {
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    std::vector<std::unique_ptr<Slot>> doomed;
    Pool* grow = nullptr;
    size_t grow_by = 0;
    std::vector<Slot*> to_freeze;
    const auto now = Clock::now();
    for (auto& [key, pool] : pools_) {
      for (auto& s : pool->to_destroy) doomed.push_back(std::move(s));
      pool->to_destroy.clear();
      const auto& o = pool->options;
      size_t want = o.min_idle;
      // Scale up: callers waiting beyond twice the idle count get 50% of idle more (at least one).
      if (pool->waiting > 2 * pool->idle.size())
        want = std::max(want, pool->idle.size() + std::max<size_t>(1, static_cast<size_t>(std::ceil(pool->idle.size() * o.scale_up_factor))));
      if (!grow && pool->idle.size() + pool->creating < want && pool->total() < o.max_size) {
        grow = pool.get();
        grow_by = std::min(want - pool->idle.size() - pool->creating, o.max_size - pool->total());
      }
      // Freeze, and destroy long-frozen ones down to min_idle in steps.
      size_t expired = 0;
      for (auto& s : pool->idle) {
        const double idle_s = std::chrono::duration<double>(now - s->idle_since).count();
        if (!s->frozen && idle_s >= o.freeze_after_s) to_freeze.push_back(s.get());
        if (s->frozen && idle_s >= o.freeze_after_s + o.destroy_frozen_after_s) ++expired;
      }
      if (expired && pool->idle.size() > o.min_idle) {
        size_t n = std::max<size_t>(1, static_cast<size_t>(std::ceil(pool->idle.size() * o.scale_down_step)));
        n = std::min({n, expired, pool->idle.size() - o.min_idle});
        // The oldest are at the front.
        for (size_t i = 0; i < n; ++i) {
          doomed.push_back(std::move(pool->idle.front()));
          pool->idle.pop_front();
          ++pool->destroyed_idle;
        }
      }
    }
    if (grow) grow->creating += grow_by;
    // Frozen under the lock, so that no caller can take a container between the check and the freeze (a
    // freeze of a container in use would stall its call). It runs every freeze_after_s at most per
    // container and costs a cgroup write; callers wait that long at most.
    for (Slot* s : to_freeze) {
      try {
        s->sb->pause();
        s->frozen = true;
      } catch (...) {
      }
    }
    lock.unlock();
    for (auto& s : doomed) try {
        s->sb->destroy();
      } catch (...) {
      }
    doomed.clear();
    std::vector<std::unique_ptr<Slot>> made;
    for (size_t i = 0; i < grow_by; ++i) try {
        made.push_back(make_slot(*grow));
      } catch (...) {
      }
    lock.lock();
    if (grow) {
      grow->creating -= grow_by;
      grow->created += made.size();
      for (auto& s : made) {
        grow->idle.push_front(std::move(s));
        grow->ready.notify_one();
      }
    }
    bool busy = false;
    for (auto& [key, pool] : pools_) busy = busy || !pool->to_destroy.empty() || (pool->waiting > 2 * pool->idle.size() && pool->total() < pool->options.max_size);
    if (busy) continue;
    // Tick often enough for the shortest configured timing.
    double tick = 1.0;
    for (auto& [key, pool] : pools_) tick = std::min({tick, pool->options.freeze_after_s / 4, pool->options.destroy_frozen_after_s / 4});
    wake_.wait_for(lock, std::chrono::duration<double>(std::max(tick, 0.01)));
  }
}

void FncallPools::set_options(const std::string& key, const FncallPoolOptions& options) {
  if (key.empty()) throw Error(Code::kInvalidArgument, "invalid fncall pool field 'environment': required");
  if (options.max_size == 0) throw Error(Code::kInvalidArgument, "invalid fncall pool field 'max_size': must be >= 1");
  if (options.min_idle > options.max_size)
    throw Error(Code::kInvalidArgument, "invalid fncall pool field 'min_idle': more than max_size");
  if (!(options.freeze_after_s > 0) || !(options.destroy_frozen_after_s > 0))
    throw Error(Code::kInvalidArgument, "invalid fncall pool field 'freeze_after_s': timings must be > 0");
  if (!(options.scale_down_step > 0 && options.scale_down_step <= 1))
    throw Error(Code::kInvalidArgument, "invalid fncall pool field 'scale_down_step': 0 < step <= 1");
  std::lock_guard lock(mutex_);
  options_[key] = options;
  if (auto it = pools_.find(key); it != pools_.end()) it->second->options = options;
  else if (options.min_idle > 0) {
    std::unique_lock<std::mutex> dummy;
    pool_for(key, !key.empty() && key[0] == '{', dummy);
  }
  wake_.notify_one();
}

std::string FncallPools::stats_json() const {
  std::lock_guard lock(mutex_);
  json::array pools;
  for (const auto& [key, p] : pools_) {
    size_t frozen = 0;
    for (const auto& s : p->idle) frozen += s->frozen;
    json::object o;
    o["key"] = key;
    o["idle"] = p->idle.size();
    o["frozen"] = frozen;
    o["in_use"] = p->in_use;
    o["creating"] = p->creating;
    o["waiting"] = p->waiting;
    o["created"] = p->created;
    o["reused"] = p->reused;
    o["discarded_dirty"] = p->discarded_dirty;
    o["discarded_replace"] = p->discarded_replace;
    o["destroyed_idle"] = p->destroyed_idle;
    o["max_size"] = p->options.max_size;
    o["min_idle"] = p->options.min_idle;
    o["reuse"] = p->options.reuse_reset ? "reset" : "replace";
    if (!p->handovers.empty()) {
      std::vector<uint64_t> h = p->handovers;
      std::sort(h.begin(), h.end());
      auto at = [&](double q) { return static_cast<double>(h[static_cast<size_t>(q * static_cast<double>(h.size() - 1))]) / 1000.0; };
      o["handovers"] = h.size();
      o["handover_p50_us"] = at(0.5);
      o["handover_p99_us"] = at(0.99);
    }
    pools.push_back(std::move(o));
  }
  json::object out;
  out["pools"] = std::move(pools);
  return json::serialize(out);
}

void FncallPools::stop() {
  std::vector<std::unique_ptr<Slot>> all;
  {
    std::lock_guard lock(mutex_);
    if (stopping_ && !thread_.joinable()) return;
    stopping_ = true;
    wake_.notify_all();
    for (auto& [key, p] : pools_) p->ready.notify_all();
  }
  if (thread_.joinable()) thread_.join();
  {
    std::lock_guard lock(mutex_);
    for (auto& [key, p] : pools_) {
      for (auto& s : p->idle) all.push_back(std::move(s));
      for (auto& s : p->to_destroy) all.push_back(std::move(s));
      p->idle.clear();
      p->to_destroy.clear();
    }
  }
  for (auto& s : all) try {
      s->sb->destroy();
    } catch (...) {
    }
}

}  // namespace sandlet
