// Node admission (admission.hpp): the reservation file under flock, this process's priority queue.
#include "runtime/metrics/admission.hpp"

#include <sys/file.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <chrono>
#include <cmath>

#include "common/error.hpp"
#include "sys/fs_util.hpp"

namespace sandlet {

namespace json = boost::json;

namespace {
// Another process's release is seen by polling the file (no cross-process wake-up): short enough to
// keep the queue moving, long enough to cost nothing measurable.
constexpr auto kPoll = std::chrono::milliseconds(20);
constexpr size_t kMaxFileBytes = 4u << 20;

// Thousandths of a CPU as CPUs ("1.5").
std::string cpus_text(uint64_t millis) {
  char out[32];
  std::snprintf(out, sizeof out, "%.3g", static_cast<double>(millis) / 1000);
  return out;
}

uint64_t u64(const json::object& o, const char* k) {
  const json::value* v = o.if_contains(k);
  return v && v->is_number() ? v->to_number<uint64_t>() : 0;
}
}  // namespace

NodeAdmission::NodeAdmission(std::string path, AdmissionOptions options) : path_(std::move(path)), options_(options) {
  if (!std::isfinite(options_.timeout_s) || options_.timeout_s < 0)
    throw Error(Code::kInvalidArgument, "invalid admission field 'timeout': must be >= 0");
}

NodeAdmission::~NodeAdmission() = default;

void NodeAdmission::with_file(const std::function<bool(Entries&)>& fn) {
  // The data file is replaced by rename (never half-written); the lock is a file of its own so that the
  // rename does not change what is locked.
  sys::UniqueFd lock = sys::lock_file(path_ + ".lock", LOCK_EX);
  Entries entries;
  bool dropped = false;
  if (auto text = sys::read_file_if_exists(path_, kMaxFileBytes)) {
    boost::system::error_code ec;
    json::value v = json::parse(*text, ec);
    if (!ec && v.is_object()) {
      if (const json::value* list = v.as_object().if_contains("entries"); list && list->is_array()) {
        for (const json::value& e : list->as_array()) {
          if (!e.is_object()) continue;
          const json::object& o = e.as_object();
          Entry en;
          if (const json::value* k = o.if_contains("key"); k && k->is_string()) en.key = std::string(k->as_string());
          en.pid = static_cast<int64_t>(u64(o, "pid"));
          en.start = u64(o, "start");
          en.memory = u64(o, "memory");
          en.pids = u64(o, "pids");
          en.cpu_millis = u64(o, "cpu_millis");
          en.initializing = o.contains("initializing") && o.at("initializing").is_bool() && o.at("initializing").as_bool();
          en.waiting = o.contains("waiting") && o.at("waiting").is_bool() && o.at("waiting").as_bool();
          // What a dead process reserved goes with it.
          if (en.key.empty() || !sys::process_alive(static_cast<pid_t>(en.pid), en.start)) {
            dropped = true;
            continue;
          }
          entries[en.key] = en;
        }
      }
    }
  }
  if (!fn(entries) && !dropped) return;
  json::array list;
  for (const auto& [k, e] : entries)
    list.push_back(json::object{{"key", e.key},
                                {"pid", e.pid},
                                {"start", e.start},
                                {"memory", e.memory},
                                {"pids", e.pids},
                                {"cpu_millis", e.cpu_millis},
                                {"initializing", e.initializing},
                                {"waiting", e.waiting}});
  sys::write_file_atomic(path_, json::serialize(json::object{{"entries", std::move(list)}}));
}

std::string NodeAdmission::missing(const Entries& entries, const AdmissionRequest& req) const {
  uint64_t sandboxes = 0, memory = 0, pids = 0, cpu_millis = 0, initializing = 0;
  bool latency_waiting = false;
  for (const auto& [k, e] : entries) {
    if (e.waiting) {
      if (k != req.key) latency_waiting = true;
      continue;
    }
    ++sandboxes;
    memory += e.memory;
    pids += e.pids;
    cpu_millis += e.cpu_millis;
    if (e.initializing) ++initializing;
  }
  if (req.priority == AdmissionPriority::kBatch && latency_waiting) return "a latency-sensitive request waiting first";
  if (options_.max_sandboxes && sandboxes + 1 > options_.max_sandboxes)
    return "sandboxes (" + std::to_string(sandboxes) + " of " + std::to_string(options_.max_sandboxes) + " in use)";
  if (options_.max_memory && memory + req.memory > options_.max_memory)
    return "memory (" + std::to_string(memory) + " of " + std::to_string(options_.max_memory) + " bytes reserved, " +
           std::to_string(req.memory) + " asked)";
  if (options_.max_pids && pids + req.pids > options_.max_pids)
    return "pids (" + std::to_string(pids) + " of " + std::to_string(options_.max_pids) + " reserved, " +
           std::to_string(req.pids) + " asked)";
  if (options_.max_cpu_millis && cpu_millis + req.cpu_millis > options_.max_cpu_millis)
    return "cpu share (" + cpus_text(cpu_millis) + " of " + cpus_text(options_.max_cpu_millis) + " CPUs reserved, " +
           cpus_text(req.cpu_millis) + " asked)";
  if (options_.max_initializing && initializing + 1 > options_.max_initializing)
    return "initialisations (" + std::to_string(initializing) + " of " + std::to_string(options_.max_initializing) +
           " under way)";
  return "";
}

double NodeAdmission::admit(const AdmissionRequest& req) {
  if (options_.max_memory && req.memory > options_.max_memory)
    throw Error(Code::kInvalidArgument, "invalid spec field 'memory': " + std::to_string(req.memory) +
                                            " bytes exceed the node's admission budget of " +
                                            std::to_string(options_.max_memory));
  if (options_.max_pids && req.pids > options_.max_pids)
    throw Error(Code::kInvalidArgument, "invalid spec field 'pids': " + std::to_string(req.pids) +
                                            " exceed the node's admission budget of " + std::to_string(options_.max_pids));
  if (options_.max_cpu_millis && req.cpu_millis > options_.max_cpu_millis)
    throw Error(Code::kInvalidArgument, "invalid spec field 'cpus': " + cpus_text(req.cpu_millis) +
                                            " CPUs exceed the node's admission budget of " +
                                            cpus_text(options_.max_cpu_millis));
  const auto begin = std::chrono::steady_clock::now();
  const auto deadline = begin + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                    std::chrono::duration<double>(options_.timeout_s));
  const int64_t pid = ::getpid();
  const uint64_t start = sys::own_start_time();
  std::unique_lock lock(mutex_);
  if (cancelled_) throw Error(Code::kFailedPrecondition, "node admission: the runtime is closing");
  if (queue_.size() >= options_.max_queue)
    throw Error(Code::kUnavailable, "node admission: the queue is full (" + std::to_string(queue_.size()) +
                                        " requests waiting in this process)");
  const std::pair<int, uint64_t> slot{static_cast<int>(req.priority), next_ticket_++};
  queue_[slot] = req.key;
  std::string reason = "the queue";
  bool announced = false;  // our "waiting" entry is in the file
  auto forget_waiting = [&] {
    if (announced) with_file([&](Entries& e) { return e.erase(req.key) > 0; });
  };
  for (;;) {
    if (queue_.begin()->first == slot) {
      bool admitted = false;
      lock.unlock();
      try {
        with_file([&](Entries& entries) {
          reason = missing(entries, req);
          if (reason.empty()) {
            Entry e{req.key, pid, start, req.memory, req.pids, req.cpu_millis, true, false};
            entries[req.key] = e;  // replaces our waiting entry, if any
            admitted = true;
            return true;
          }
          if (req.priority == AdmissionPriority::kLatency && !announced) {
            entries[req.key] = Entry{req.key, pid, start, 0, 0, 0, false, true};
            announced = true;
            return true;
          }
          return false;
        });
      } catch (...) {
        lock.lock();
        queue_.erase(slot);
        changed_.notify_all();
        throw;
      }
      lock.lock();
      if (admitted) {
        queue_.erase(slot);
        changed_.notify_all();
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
      }
    } else {
      reason = std::to_string(std::distance(queue_.begin(), queue_.find(slot))) + " earlier requests of this process";
    }
    if (cancelled_) {
      queue_.erase(slot);
      changed_.notify_all();
      lock.unlock();
      try {
        forget_waiting();
      } catch (...) {
      }
      throw Error(Code::kFailedPrecondition, "node admission: the runtime closed while the create waited");
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      queue_.erase(slot);
      changed_.notify_all();
      lock.unlock();
      try {
        forget_waiting();
      } catch (...) {
      }
      char waited[32];
      std::snprintf(waited, sizeof waited, "%.3g", options_.timeout_s);
      throw Error(Code::kUnavailable, "node admission: no room within " + std::string(waited) + " s: " + reason);
    }
    changed_.wait_until(lock, std::min(deadline, std::chrono::steady_clock::now() + kPoll));
  }
}

void NodeAdmission::initialised(const std::string& key) {
  with_file([&](Entries& entries) {
    auto it = entries.find(key);
    if (it == entries.end() || !it->second.initializing) return false;
    it->second.initializing = false;
    return true;
  });
  std::lock_guard lock(mutex_);
  changed_.notify_all();
}

void NodeAdmission::release(const std::string& key) {
  with_file([&](Entries& entries) { return entries.erase(key) > 0; });
  std::lock_guard lock(mutex_);
  changed_.notify_all();
}

std::map<std::string, uint64_t> NodeAdmission::usage() {
  std::map<std::string, uint64_t> out{{"sandboxes", 0},    {"memory", 0},       {"pids", 0},
                                      {"cpu_millis", 0},   {"initializing", 0}, {"waiting_latency", 0}};
  with_file([&](Entries& entries) {
    for (const auto& [k, e] : entries) {
      if (e.waiting) {
        ++out["waiting_latency"];
        continue;
      }
      ++out["sandboxes"];
      out["memory"] += e.memory;
      out["pids"] += e.pids;
      out["cpu_millis"] += e.cpu_millis;
      if (e.initializing) ++out["initializing"];
    }
    return false;
  });
  return out;
}

void NodeAdmission::cancel() {
  std::lock_guard lock(mutex_);
  cancelled_ = true;
  changed_.notify_all();
}

size_t NodeAdmission::waiting() const {
  std::lock_guard lock(mutex_);
  return queue_.size();
}

}  // namespace sandlet
