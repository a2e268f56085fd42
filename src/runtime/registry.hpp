// The sandboxes this process has to do with: those it started (backend object, record, exit watcher),
// one-shot runs in flight, sandboxes its workers are reclaiming, and the handles open on sandboxes (so
// that attach in this process shares the creating handle's object). Thread-safe.
#pragma once
#include <boost/asio/posix/stream_descriptor.hpp>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "backends/backend.hpp"
#include "runtime/exit_watch.hpp"
#include "runtime/record.hpp"

namespace sandlet {

class Sandbox;

class Registry final {
 public:
  struct Entry {
    SandboxRecord record;
    std::shared_ptr<BackendSandbox> impl;
    std::unique_ptr<ExitWatch> watcher;  // none for one-shots

    bool one_shot = false;
    bool ending = false;  // an end is under way; its reclaim removes the entry
  };

  void add(Entry entry);
  // Claims the end of `id` for the caller: false when this process has no such sandbox or another end
  // already claimed it. On true, `rec` and `impl` receive the entry's.
  bool begin_end(const std::string& id, SandboxRecord* rec, std::shared_ptr<BackendSandbox>* impl);
  // The end of a sandbox this process did not start (attached): tracked until its reclaim is done, so
  // that gc leaves it alone. False when already being reclaimed here.
  bool begin_reclaim(const std::string& id);
  // Its reclaim is done: the entry (if any) goes. Returns its exit watcher, which the caller disposes of
  // on the loop thread (asio objects are not to be destroyed under the loop's feet).
  std::unique_ptr<ExitWatch> finish(const std::string& id);
  bool reclaiming(const std::string& id) const;
  std::shared_ptr<BackendSandbox> impl(const std::string& id) const;  // of a sandbox started here
  bool started_here(const std::string& id) const;

  // The exit watcher of `id`, under the lock (nullptr when the entry is gone or has none).
  void with_watcher(const std::string& id, const std::function<void(boost::asio::posix::stream_descriptor&)>& fn);
  // Every entry not ending, with its record and object (close: owned ones end, the rest are let go).
  std::vector<std::pair<SandboxRecord, std::shared_ptr<BackendSandbox>>> live(bool one_shots) const;
  // Stops watching: cancels every exit watcher (on the loop thread), or closes them (once it stopped).
  void cancel_watchers();
  void close_watchers();
  // Waits until no one-shot run is left (each is removed by its reclaim).
  void wait_one_shots_done();
  // Store layer digests used by sandboxes of this process other than `except`.
  std::set<std::string> layers_in_use(const std::string& except) const;

  // Handles.
  std::shared_ptr<Sandbox> handle(const std::string& id) const;  // a live, not destroyed one, or null
  void remember(const std::string& id, const std::shared_ptr<Sandbox>& sb);
  void forget(const std::string& id);
  // Marks the handles of `id` ended (the sandbox is gone; calls on them fail). Mark every handle with "".
  void mark_ended(const std::string& id);

 private:
  mutable std::mutex mutex_;
  std::condition_variable one_shots_done_;
  std::map<std::string, Entry> entries_;
  std::set<std::string> reclaiming_;  // ids whose reclaim runs on a worker of this process
  std::map<std::string, std::weak_ptr<Sandbox>> handles_;
  size_t handles_swept_size_ = 0;
};

}  // namespace sandlet
