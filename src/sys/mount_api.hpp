// Thin wrappers over the new mount API (open_tree, mount_setattr, fsopen/fsconfig/fsmount).
// Detached mounts built here live in no mount namespace until the sandbox's init attaches them inside
// its own, so a crash can never leave a mount behind in the host's namespace.
#pragma once
#include <sys/types.h>

#include <string>
#include <vector>

#include "sys/fd.hpp"

namespace sandlet::sys {

// A private, detached copy of the mount at `path` whose ownership is shifted through `userns_fd`
// (host ids appear as the user namespace maps them).
UniqueFd idmapped_clone(const std::string& path, int userns_fd);

// A private, detached copy of the directory tree at `path` (its submounts included) for a sandbox's
// `mounts`: nosuid, nodev. Read-only: also read-only, and idmapped through `userns_fd` where every
// filesystem in the tree supports that (else a plain copy). Read-write: never
// idmapped (what the sandbox writes is stored under its own host ids). Errors name `what`.
UniqueFd host_dir_clone(const std::string& path, bool readonly, int userns_fd, const std::string& what);

// A filesystem context for `fstype`; set options, then create a detached mount.
class FsContext final {
 public:
  explicit FsContext(const char* fstype);
  FsContext& set(const char* key, const std::string& value);
  FsContext& set_fd(const char* key, int fd);
  // The same, reporting a refusal as its errno (0: set) instead of throwing.
  int try_set_fd(const char* key, int fd);
  FsContext& set_flag(const char* key);
  UniqueFd mount(unsigned attr_flags = 0);  // FSCONFIG_CMD_CREATE + fsmount

 private:
  [[noreturn]] void fail(const std::string& what);
  std::string fstype_;
  UniqueFd fd_;
};

// A detached overlay mount and the detached mounts it was built from (idmapped lowers, tmpfs upper: the
// overlay keeps private copies of them). The kernel dissolves a detached mount on its last close and
// waits for an RCU grace period to do so: close `sources` off any hot path.
struct OverlayRootfs {
  UniqueFd root;
  std::vector<UniqueFd> sources;
  UniqueFd upper;           // the tmpfs holding upper/ and work/ (what a snapshot reads), detached
  uint64_t upper_mnt_id = 0;  // its mount id (statx STATX_MNT_ID), to recognise it later
};

// The mount id of the mount `fd` is on (statx STATX_MNT_ID, Linux 5.8).
uint64_t mount_id_of(int fd);

// The sandbox root: OverlayFS of `layers` (lowest first, each idmapped into the sandbox's user namespace)
// and a per-sandbox tmpfs upper of `disk_bytes`, owned by `root_uid` (root inside). Detached. Where the
// kernel's OverlayFS takes no layer descriptors (found by the first build; sys/kernel_features), the layers are handed to it by
// path from a private mount namespace (sys/private_mount_ns): the result is the same detached mount.
OverlayRootfs build_overlay_rootfs(const std::vector<std::string>& layers, int userns_fd, uid_t root_uid,
                                   uint64_t disk_bytes);

}  // namespace sandlet::sys
