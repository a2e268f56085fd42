// Pause and resume of many sandboxes at once, chosen by labels or ids (a job's sandboxes, preempted and
// brought back). Every sandbox of the root counts, whichever process made it: each is adopted from its
// record (as gc and attach do). The freezes run on a set of threads of their own, because each one waits
// for its cgroup to report "frozen": one at a time, 1,000 sandboxes would take 1,000 such waits.
#include <atomic>
#include <chrono>
#include <set>
#include <thread>

#include "common/error.hpp"
#include "runtime/runtime.hpp"

namespace sandlet {
namespace {

constexpr size_t kMaxFreezeThreads = 64;

// "k=v[,k2=v2]" -> {k: v, ...}; every pair must match.
std::map<std::string, std::string> parse_selector(const std::string& selector) {
  std::map<std::string, std::string> out;
  size_t pos = 0;
  while (pos <= selector.size() && !selector.empty()) {
    size_t comma = selector.find(',', pos);
    std::string pair = selector.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    size_t eq = pair.find('=');
    if (eq == std::string::npos || eq == 0)
      throw Error(Code::kInvalidArgument, "invalid label selector '" + selector + "': each part must be key=value");
    out[pair.substr(0, eq)] = pair.substr(eq + 1);
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return out;
}

bool labels_match(const std::map<std::string, std::string>& labels, const std::map<std::string, std::string>& want) {
  for (const auto& [k, v] : want) {
    auto it = labels.find(k);
    if (it == labels.end() || it->second != v) return false;
  }
  return true;
}

}  // namespace

JobPauseResult Runtime::pause_jobs(const std::string& selector, const std::vector<std::string>& ids, bool pause) {
  if (closed_) throw Error(Code::kFailedPrecondition, "runtime is closed");
  const auto begin = std::chrono::steady_clock::now();
  const auto want = parse_selector(selector);
  if (want.empty() && ids.empty())
    throw Error(Code::kInvalidArgument, "a label selector or a list of sandbox ids is required");
  for (const auto& id : ids)
    if (!SandboxDirs::valid_id(id)) throw Error(Code::kInvalidArgument, "invalid sandbox id '" + id + "'");
  std::set<std::string> named(ids.begin(), ids.end());

  JobPauseResult out;
  struct Target {
    std::shared_ptr<Sandbox> handle;
    std::string error;
  };
  std::vector<Target> targets;
  std::set<std::string> seen;
  for (const auto& id : dirs_->names()) {
    if (!SandboxDirs::valid_id(id)) continue;  // staging or retired
    std::optional<SandboxRecord> rec;
    try {
      rec = dirs_->load(id);
    } catch (const Error&) {
      continue;  // damaged: gc removes it
    }
    if (!rec || rec->state == SandboxState::kPooled || rec->state == SandboxState::kCreating) continue;
    const bool by_id = named.count(id) > 0;
    if (!by_id && (want.empty() || !labels_match(rec->spec.labels, want))) continue;
    seen.insert(id);
    ++out.matched;
    const bool is_paused = rec->state == SandboxState::kPaused;
    if (is_paused == pause) {
      ++out.already;
      continue;
    }
    try {
      std::shared_ptr<Sandbox> sb = registry_.handle(id);
      if (!sb) {
        Backend* backend = backend_named(rec->backend);
        if (!backend) throw Error(Code::kUnimplemented, "backend '" + rec->backend + "' is not available here");
        std::shared_ptr<BackendSandbox> impl = backend->adopt(id, dirs_->dir(id), rec->backend_state);
        if (!impl->alive()) throw Error(Code::kFailedPrecondition, "sandbox " + id + " is not running (dead)");
        // A handle of this call only (not remembered): it does not end the sandbox when dropped.
        sb = std::make_shared<Sandbox>(weak_from_this(), std::move(*rec), std::move(impl), false);
      }
      targets.push_back({std::move(sb), {}});
    } catch (const Error& e) {
      out.failed.emplace_back(id, e.what());
    }
  }
  for (const auto& id : named)
    if (!seen.count(id)) out.failed.emplace_back(id, "no sandbox '" + id + "' under " + root_);

  std::atomic<size_t> next{0};
  std::atomic<uint64_t> reclaimed{0};
  auto work = [&] {
    for (size_t i; (i = next.fetch_add(1)) < targets.size();) {
      try {
        if (pause)
          reclaimed += targets[i].handle->pause();
        else
          targets[i].handle->resume();
      } catch (const std::exception& e) {
        targets[i].error = e.what();
        if (targets[i].error.empty()) targets[i].error = "failed";
      }
    }
  };
  const size_t n_threads = std::min(kMaxFreezeThreads, targets.size());
  std::vector<std::thread> threads;
  threads.reserve(n_threads);
  for (size_t t = 1; t < n_threads; ++t) threads.emplace_back(work);
  work();
  for (auto& t : threads) t.join();
  for (const auto& t : targets) {
    if (t.error.empty())
      ++out.changed;
    else
      out.failed.emplace_back(t.handle->id(), t.error);
  }
  out.reclaimed_bytes = reclaimed;
  out.elapsed_ns = static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - begin).count());
  return out;
}

}  // namespace sandlet
