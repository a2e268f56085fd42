#include "runtime/state_dir.hpp"

#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <climits>
#include <cstdio>

#include "common/error.hpp"
#include "sys/fs_util.hpp"

namespace sandlet {
namespace {

bool is_tmpfs(const char* path) {
  struct statfs st;
  return ::statfs(path, &st) == 0 && st.f_type == TMPFS_MAGIC;
}

// A private directory of ours on a tmpfs, or "" if the host offers none we can trust.
std::string tmpfs_base() {
  static const std::pair<const char*, const char*> kCandidates[] = {
      {"/run/sandlet", "/run"},
      {"/dev/shm/sandlet-state", "/dev/shm"},  // world-writable: ownership and mode are checked below
  };
  for (const auto& [dir, parent] : kCandidates) {
    if (!is_tmpfs(parent)) continue;
    if (::mkdir(dir, 0700) < 0 && errno != EEXIST) continue;
    struct stat st;
    if (::lstat(dir, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != ::geteuid() || (st.st_mode & 077)) continue;
    return dir;
  }
  return "";
}

std::string hash_hex(const std::string& s) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  char out[17];
  std::snprintf(out, sizeof out, "%016llx", static_cast<unsigned long long>(h));
  return out;
}

// Removes empty state of roots that no longer point at it (a runtime that crashed, then its root was
// deleted). Never touches a directory with a sandbox in it.
void sweep_orphans(const std::string& base) {
  const std::string roots = base + "/roots";
  for (const auto& h : sys::list_dir(roots)) {
    std::string dir = roots + "/" + h;
    auto root = sys::read_file_if_exists(dir + "/root", 4096);
    if (root) {
      char link[PATH_MAX];
      ssize_t n = ::readlink((*root + "/sandboxes").c_str(), link, sizeof link - 1);
      if (n >= 0 && std::string(link, static_cast<size_t>(n)) == dir + "/sandboxes") continue;  // still used
    }
    if (::rmdir((dir + "/sandboxes").c_str()) != 0 && errno != ENOENT) continue;  // sandboxes inside
    ::unlink((dir + "/root").c_str());
    ::rmdir(dir.c_str());
  }
}

}  // namespace

StateLayout prepare_state(const std::string& root) {
  StateLayout layout;
  layout.sandboxes = root + "/sandboxes";
  std::string base = tmpfs_base();
  layout.tmpfs_base = base;
  if (base.empty()) {
    if (::mkdir(layout.sandboxes.c_str(), 0700) < 0 && errno != EEXIST) throw_errno("mkdir " + layout.sandboxes);
    return layout;
  }
  sweep_orphans(base);
  std::string target = base + "/roots/" + hash_hex(root) + "/sandboxes";
  sys::mkdir_p(target, 0700);
  // Back-reference, so that a later sweep can tell whether this state still belongs to a root.
  std::string owner = base + "/roots/" + hash_hex(root) + "/root";
  if (::access(owner.c_str(), F_OK) != 0) sys::write_file_atomic(owner, root);
  struct stat st;
  if (::lstat(layout.sandboxes.c_str(), &st) == 0) {
    if (S_ISLNK(st.st_mode)) {
      char link[PATH_MAX];
      ssize_t n = ::readlink(layout.sandboxes.c_str(), link, sizeof link - 1);
      if (n >= 0 && std::string(link, static_cast<size_t>(n)) == target) {
        layout.tmpfs_target = target;
        return layout;
      }
      ::unlink(layout.sandboxes.c_str());
    } else if (S_ISDIR(st.st_mode)) {
      // A directory from a layout without tmpfs: move to tmpfs only once it is empty.
      if (::rmdir(layout.sandboxes.c_str()) != 0) return layout;
    }
  }
  if (::symlink(target.c_str(), layout.sandboxes.c_str()) != 0 && errno != EEXIST)
    throw_errno("symlink " + layout.sandboxes + " -> " + target);
  layout.tmpfs_target = target;
  return layout;
}

void release_state_if_empty(const StateLayout& layout) {
  if (layout.tmpfs_target.empty()) return;
  // rmdir refuses non-empty directories: another runtime's sandboxes keep them.
  if (::rmdir(layout.tmpfs_target.c_str()) == 0) {
    std::string parent = layout.tmpfs_target.substr(0, layout.tmpfs_target.rfind('/'));
    ::unlink((parent + "/root").c_str());
    ::rmdir(parent.c_str());
  }
}

}  // namespace sandlet
