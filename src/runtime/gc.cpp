// Sweeps what crashed or expired runs left behind: for every sandbox directory, gc_verdict (lifecycle.hpp)
// decides from its record and the liveness of its owner and of the sandbox itself; sandboxes of this
// process that it watches or reclaims are left to it. A staging directory (sandbox_dirs.hpp) goes when its
// creator is gone. A retired directory without its record is one whose removal a crash cut short (the
// record goes last, after the reclaim): it is removed. Any other directory without a readable record
// that is older than a minute (damaged) is reclaimed through every backend, which find what such a
// sandbox could have left from its id alone.
#include <signal.h>
#include <sys/stat.h>

#include "common/error.hpp"
#include "runtime/audit/audit_records.hpp"
#include "runtime/runtime.hpp"
#include "sys/fs_util.hpp"

namespace sandlet {
namespace {

constexpr double kRecordlessGraceS = 60;

// Why a sandbox gc ends had ended (or ends now), as far as gc can tell; nullptr for a pooled one (prepared
// ahead, never a sandbox anyone asked for: not audited).
const char* gc_end_reason(const SandboxRecord& rec, const GcFacts& facts) {
  if (rec.state == SandboxState::kPooled) return nullptr;
  if (rec.deadline > 0 && facts.now >= rec.deadline) return end_reason::kMaxLifetime;
  // An owned sandbox dies with its owner (parent-death signal), so a dead one with a dead owner went that way.
  if (!facts.detached && !facts.owner_alive) return end_reason::kOwnerGone;
  if (!facts.sandbox_alive) return inferred_exit_reason(rec, facts.now);
  return end_reason::kReclaimed;
}

}  // namespace

size_t Runtime::gc(bool release_idle) {
  size_t removed = 0;
  const double now = sys::now_unix_seconds();
  for (const auto& name : dirs_->names()) {
    if (auto owner = SandboxDirs::staging_owner(name)) {
      // A create that died before its directory appeared (nothing else of it exists).
      struct stat st;
      const std::string path = dirs_->path_of(name);
      if (::kill(*owner, 0) < 0 && errno == ESRCH) {
        sys::remove_tree(path);
      } else if (::stat(path.c_str(), &st) == 0 && now - static_cast<double>(st.st_mtime) > kRecordlessGraceS) {
        sys::remove_tree(path);  // a reused pid keeps it no longer than this
      }
      continue;
    }
    const bool retired = name.rfind(SandboxDirs::kRetiredPrefix, 0) == 0;
    const std::string id = retired ? name.substr(std::string(SandboxDirs::kRetiredPrefix).size()) : name;
    if (!SandboxDirs::valid_id(id)) continue;
    if (registry_.started_here(id) || registry_.reclaiming(id)) continue;  // ours: watched or being reclaimed
    std::optional<SandboxRecord> rec;
    try {
      rec = retired ? dirs_->load_retired(id) : dirs_->load(id);
    } catch (const Error&) {
    }
    if (!rec && retired && dirs_->retired_without_record(id)) {
      if (!registry_.begin_reclaim(id)) continue;
      dirs_->remove(id);  // reclaimed already; its removal was cut short
      registry_.finish(id);
      ++removed;
      continue;
    }
    if (!rec) {
      struct stat st;
      const std::string dir = retired ? dirs_->retired_dir(id) : dirs_->dir(id);
      if (::stat(dir.c_str(), &st) != 0 || now - static_cast<double>(st.st_mtime) < kRecordlessGraceS) continue;
      if (!registry_.begin_reclaim(id)) continue;
      bool all = true;
      for (auto& [bname, backend] : backends_) {
        try {
          auto impl = backend->adopt(id, dirs_->dir(id), {});
          impl->kill();
          impl->reclaim();
        } catch (const Error&) {
          all = false;
        }
      }
      if (all) {
        dirs_->remove(id);
        ++removed;
      }
      registry_.finish(id);
      continue;
    }
    Backend* backend = backend_named(rec->backend);
    if (!backend) continue;  // not this host's to reclaim (another build or host put it here)
    std::shared_ptr<BackendSandbox> impl;
    try {
      impl = backend->adopt(id, dirs_->dir(id), rec->backend_state);
    } catch (const Error&) {
      continue;  // a damaged section: left alone rather than guessed at
    }
    GcFacts facts;
    facts.state = rec->state;
    facts.retired = retired;
    facts.detached = rec->spec.lifetime == Lifetime::kDetached;
    facts.owner_alive = sys::process_alive(rec->owner_pid, rec->owner_start);
    // One kept at its expiry (on_expiry "keep") lives keep_s longer: its agent ends it then, gc after that.
    facts.deadline = rec->deadline > 0 && rec->spec.on_expiry == OnExpiry::kKeep ? rec->deadline + rec->spec.keep_s
                                                                                   : rec->deadline;
    facts.now = now;
    facts.sandbox_alive = impl->alive();
    if (gc_verdict(facts) == GcVerdict::kKeep) continue;
    // Claimed, so that a destroy of an attached handle in this process does not reclaim it at the same time.
    if (!registry_.begin_reclaim(id)) continue;
    // Nobody watched its end (its owner is gone, or it is detached): gc records it, with what it found.
    if (!retired) {
      const char* reason = gc_end_reason(*rec, facts);
      retire(*rec, *impl, reason,
             {{"recorded_by", "gc"}, {"sandbox_alive", facts.sandbox_alive}, {"owner_alive", facts.owner_alive}});
    }
    if (reclaim(*rec, impl)) ++removed;  // else left for the next sweep
  }
  for (auto& [name, backend] : backends_) {
    try {
      backend->sweep(release_idle);
    } catch (const Error&) {
    }
  }
  expired_->sweep(now);  // tombstones past their keep_until (not sandboxes: not counted)
  // Layer mounts no live sandbox uses (their sandboxes crashed or were destroyed by another process).
  layers_->release_unused();
  // A loader no mounted layer needs any more goes with an explicit gc (the next lazy mount starts one).
  if (release_idle && loader_) {
    try {
      loader_->stop_if_idle();
    } catch (const Error&) {
    }
  }
  return removed;
}

}  // namespace sandlet
