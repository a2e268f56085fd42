// The one way a sandbox ends: kill (synchronous: nothing of it runs afterwards) and retire (out of sight:
// no longer listed or attachable), then reclaim its host resources on a worker. See lifecycle.hpp.
#include "common/fault_point.hpp"
#include "runtime/runtime.hpp"

namespace sandlet {

void Runtime::end(const SandboxRecord& rec, const std::shared_ptr<BackendSandbox>& impl) {
  SandboxRecord mine;
  std::shared_ptr<BackendSandbox> own;
  if (registry_.begin_end(rec.id, &mine, &own)) {
    end_started(mine, own, /*now=*/false);
    return;
  }
  if (registry_.started_here(rec.id)) return;  // its end is under way already (e.g. it exited by itself)
  // Attached: a sandbox of another process (or of an earlier runtime).
  if (!registry_.begin_reclaim(rec.id)) return;
  end_started(rec, impl, /*now=*/false);
}

void Runtime::end_started(const SandboxRecord& rec, const std::shared_ptr<BackendSandbox>& impl, bool now) {
  impl->kill();
  dirs_->retire(rec.id);
  fault_point("runtime.retired");
  if (now) {
    reclaim(rec, impl);
    return;
  }
  in_background([this, rec, impl] { reclaim(rec, impl); });
}

void Runtime::reclaim(const SandboxRecord& rec, const std::shared_ptr<BackendSandbox>& impl) noexcept {
  bool done = false;
  try {
    impl->reclaim();
    done = true;
  } catch (...) {
    // Left for gc: the record stays in the retired directory.
  }
  if (done) dirs_->remove(rec.id);
  loop_.dispose(registry_.finish(rec.id));
  layers_->release_of(rec);
}

void Runtime::abandon(const SandboxRecord& rec, std::unique_ptr<BackendSandbox> impl) noexcept {
  if (impl) {
    // It may have got as far as running (a failure after finish): end it; an unfinished one unwinds when
    // dropped.
    impl->kill();
    try {
      impl->reclaim();
    } catch (...) {
    }
    impl.reset();
  }
  dirs_->remove(rec.id);
}

}  // namespace sandlet
