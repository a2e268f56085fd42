#include "runtime/registry.hpp"

#include <algorithm>

#include "runtime/sandbox.hpp"

namespace sandlet {

void Registry::add(Entry entry) {
  std::lock_guard lock(mutex_);
  const std::string id = entry.record.id;
  entries_[id] = std::move(entry);
}

bool Registry::begin_end(const std::string& id, SandboxRecord* rec, std::shared_ptr<BackendSandbox>* impl) {
  std::lock_guard lock(mutex_);
  auto it = entries_.find(id);
  if (it == entries_.end() || it->second.ending) return false;
  it->second.ending = true;
  reclaiming_.insert(id);
  *rec = it->second.record;
  *impl = it->second.impl;
  return true;
}

bool Registry::begin_reclaim(const std::string& id) {
  std::lock_guard lock(mutex_);
  if (entries_.count(id)) return false;  // started here: its end goes through begin_end
  return reclaiming_.insert(id).second;
}

std::unique_ptr<ExitWatch> Registry::finish(const std::string& id) {
  std::unique_ptr<ExitWatch> watcher;
  bool one_shot = false;
  {
    std::lock_guard lock(mutex_);
    reclaiming_.erase(id);
    if (auto it = entries_.find(id); it != entries_.end()) {
      one_shot = it->second.one_shot;
      watcher = std::move(it->second.watcher);
      entries_.erase(it);
    }
  }
  if (one_shot) one_shots_done_.notify_all();
  return watcher;
}

bool Registry::reclaiming(const std::string& id) const {
  std::lock_guard lock(mutex_);
  return reclaiming_.count(id) > 0;
}

std::shared_ptr<BackendSandbox> Registry::impl(const std::string& id) const {
  std::lock_guard lock(mutex_);
  auto it = entries_.find(id);
  return it == entries_.end() ? nullptr : it->second.impl;
}

bool Registry::started_here(const std::string& id) const {
  std::lock_guard lock(mutex_);
  return entries_.count(id) > 0;
}

void Registry::with_watcher(const std::string& id,
                            const std::function<void(boost::asio::posix::stream_descriptor&)>& fn) {
  std::lock_guard lock(mutex_);
  auto it = entries_.find(id);
  if (it != entries_.end() && it->second.watcher) fn(it->second.watcher->descriptor());
}

std::vector<std::pair<SandboxRecord, std::shared_ptr<BackendSandbox>>> Registry::live(bool one_shots) const {
  std::lock_guard lock(mutex_);
  std::vector<std::pair<SandboxRecord, std::shared_ptr<BackendSandbox>>> out;
  for (const auto& [id, e] : entries_)
    if (!e.ending && e.one_shot == one_shots) out.emplace_back(e.record, e.impl);
  return out;
}

void Registry::cancel_watchers() {
  std::lock_guard lock(mutex_);
  for (auto& [id, e] : entries_) {
    if (!e.watcher) continue;
    boost::system::error_code ignored;
    e.watcher->descriptor().cancel(ignored);
  }
}

void Registry::close_watchers() {
  std::lock_guard lock(mutex_);
  for (auto& [id, e] : entries_) e.watcher.reset();
}

void Registry::wait_one_shots_done() {
  std::unique_lock lock(mutex_);
  one_shots_done_.wait(lock, [this] {
    return std::none_of(entries_.begin(), entries_.end(), [](const auto& kv) { return kv.second.one_shot; });
  });
}

std::set<std::string> Registry::layers_in_use(const std::string& except) const {
  std::lock_guard lock(mutex_);
  std::set<std::string> used;
  for (const auto& [id, e] : entries_) {
    if (id == except) continue;
    for (const auto& l : e.record.layers)
      if (!l.digest.empty()) used.insert(l.digest);
  }
  return used;
}

std::shared_ptr<Sandbox> Registry::handle(const std::string& id) const {
  std::lock_guard lock(mutex_);
  auto it = handles_.find(id);
  if (it == handles_.end()) return nullptr;
  auto sb = it->second.lock();
  return sb && !sb->destroyed() ? sb : nullptr;
}

// Handles closed without destroy leave expired entries: swept now and then, so that a long-running
// trainer's map stays the size of its live sandboxes.
void Registry::remember(const std::string& id, const std::shared_ptr<Sandbox>& sb) {
  std::lock_guard lock(mutex_);
  if (handles_.size() >= 2 * handles_swept_size_ + 64) {
    std::erase_if(handles_, [](const auto& kv) { return kv.second.expired(); });
    handles_swept_size_ = handles_.size();
  }
  handles_[id] = sb;
}

void Registry::forget(const std::string& id) {
  std::lock_guard lock(mutex_);
  handles_.erase(id);
}

void Registry::mark_ended(const std::string& id) {
  std::lock_guard lock(mutex_);
  if (!id.empty()) {
    if (auto it = handles_.find(id); it != handles_.end())
      if (auto sb = it->second.lock()) sb->mark_ended();
    return;
  }
  for (auto& [hid, weak] : handles_)
    if (auto sb = weak.lock()) sb->mark_ended();
}

}  // namespace sandlet
