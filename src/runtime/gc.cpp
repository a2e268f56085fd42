// Sweeps what crashed or expired runs left behind. Rules, per sandbox directory:
//  - no or damaged record, and older than a minute: a create that died before writing it -> remove
//  - "creating" whose creator process is gone -> tear down
//  - "running" whose init is gone -> tear down (cgroups, slot, directory)
//  - alive, `owned`, creator process gone -> tear down (the parent-death signal normally did it)
//  - alive and past its max lifetime -> tear down
//  - retired (.reclaim-<id>: destroyed, reclaim interrupted by a crash) -> finish the reclaim
//  - anything else belongs to a live owner or is a live detached sandbox: never touched.
#include <sys/stat.h>
#include <unistd.h>

#include "common/error.hpp"
#include "runtime/runtime.hpp"
#include "sys/fs_util.hpp"

namespace sandlet {
namespace {


}  // namespace

size_t Runtime::finish_reclaim(const std::string& id) {
  {
    std::lock_guard lock(mutex_);
    if (reclaiming_.count(id)) return 0;  // a worker of ours is on it
  }
  try {
    auto text = sys::read_file_if_exists(retired_dir(id) + "/record.json", 1 << 20);
    if (!text) {
      sys::remove_tree(retired_dir(id));
      return 0;
    }
    teardown(SandboxRecord::from_json(*text));
    return 1;
  } catch (const Error&) {
    return 0;
  }
}

size_t Runtime::gc(bool release_idle_cgroups) {
  size_t removed = 0;
  const std::string sandboxes = host_.root + "/sandboxes";
  const double now = sys::now_unix_seconds();
  for (const auto& name : sys::list_dir(sandboxes)) {
    if (name.rfind(".reclaim-", 0) == 0) {
      removed += finish_reclaim(name.substr(9));
      continue;
    }
    const std::string& id = name;
    std::string dir = sandboxes + "/" + id;
    {
      std::lock_guard lock(mutex_);
      if (children_.count(id)) continue;  // ours and watched: the exit watcher cleans it
    }
    std::optional<SandboxRecord> rec;
    try {
      rec = load_record(id);
    } catch (const Error&) {
    }
    if (!rec) {
      struct stat st;
      if (::stat(dir.c_str(), &st) == 0 && now - static_cast<double>(st.st_mtime) > 60) {
        try {
          sys::kill_and_remove_cgroups(sys::cgroup_paths_for(host_.cgroups, id));
          sys::remove_tree(dir);
          ++removed;
        } catch (const Error&) {
        }
      }
      continue;
    }
    bool init_alive = sys::process_alive(rec->init_pid, rec->init_start);
    bool owner_alive = sys::process_alive(rec->owner_pid, rec->owner_start);
    bool doomed = false;
    if (rec->state == SandboxState::kCreating || rec->state == SandboxState::kPooled)
      doomed = !owner_alive;
    else if (!init_alive)
      doomed = true;
    else if (rec->spec.lifetime == Lifetime::kOwned && !owner_alive)
      doomed = true;
    else if (rec->deadline > 0 && now > rec->deadline)
      doomed = true;
    if (!doomed) continue;
    try {
      teardown(*rec);
      ++removed;
    } catch (const Error&) {
      // Left for the next sweep; reported through the count only.
    }
  }
  slots_->sweep();
  // Layer mounts no live sandbox uses (their sandboxes crashed or were destroyed by another process).
  try {
    layer_mounts_->release_unused(nullptr, [this] { return layers_in_use(); });
  } catch (const Error&) {
  }
  if (release_idle_cgroups && ::geteuid() == 0) host_.cgroups.release();
  return removed;
}

}  // namespace sandlet
