#include "runtime/warm_pool.hpp"

#include <chrono>

namespace sandlet {

WarmPool::WarmPool(size_t target, Prepare prepare, Discard discard)
    : target_(target), prepare_(std::move(prepare)), discard_(std::move(discard)) {
  stats_.target = target;
}

std::optional<WarmPool::Entry> WarmPool::take(Backend& backend, const Spec& spec, const std::vector<std::string>& digests) {
  std::optional<Entry> hit;
  std::vector<Entry> stale;
  {
    std::lock_guard lock(mutex_);
    staged_ = backend_ == &backend && key_ && key_->layers == spec.layers && key_->limits.disk == spec.limits.disk &&
              key_->policy.mask_kernel_files == spec.policy.mask_kernel_files;
    backend_ = &backend;
    key_ = spec;
    key_digests_ = digests;
    if (++creates_ == 2 && !stopping_ && target_ > 0) thread_ = std::thread([this] { loop(); });
    while (!ready_.empty()) {
      Entry e = std::move(ready_.front());
      ready_.pop_front();
      if (e.record.backend != backend.name() || !e.impl->fits(spec) || !e.impl->alive()) {
        stale.push_back(std::move(e));  // another backend or environment, or it died while waiting
        continue;
      }
      hit = std::move(e);
      break;
    }
    ++(hit ? stats_.hits : stats_.misses);
    stats_.discarded += stale.size();
    wake_.notify_one();
  }
  if (!stale.empty()) discard_(std::move(stale));
  return hit;
}

void WarmPool::loop() {
  std::unique_lock lock(mutex_);
  for (;;) {
    wake_.wait(lock, [this] { return stopping_ || ready_.size() < target_; });
    if (stopping_) return;
    Backend* backend = backend_;
    std::optional<Spec> stage_for = staged_ ? key_ : std::nullopt;
    const Shape shape = key_ ? Shape::of(key_->limits) : Shape{};
    std::vector<std::string> digests = staged_ ? key_digests_ : std::vector<std::string>();
    lock.unlock();
    std::optional<Entry> made;
    try {
      made = prepare_(*backend, stage_for ? &*stage_for : nullptr, shape, digests);
    } catch (...) {
      // Creates fall back to preparing their own and report errors there; back off a little.
      lock.lock();
      wake_.wait_for(lock, std::chrono::seconds(1), [this] { return stopping_; });
      continue;
    }
    lock.lock();
    ++stats_.prepared;
    ready_.push_back(std::move(*made));
  }
}

void WarmPool::stop() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  std::vector<Entry> left;
  {
    std::lock_guard lock(mutex_);
    for (auto& e : ready_) left.push_back(std::move(e));
    ready_.clear();
    stats_.discarded += left.size();
  }
  if (!left.empty()) discard_(std::move(left));
}

std::vector<std::string> WarmPool::kept_digests() const {
  std::lock_guard lock(mutex_);
  return key_digests_;
}

WarmPool::Stats WarmPool::stats() const {
  std::lock_guard lock(mutex_);
  Stats s = stats_;
  s.ready = ready_.size();
  s.staged = staged_;
  s.backend = backend_ ? backend_->name() : "";
  if (key_) s.shape = Shape::of(key_->limits);
  return s;
}

}  // namespace sandlet
