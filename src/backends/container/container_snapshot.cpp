// The container backend's snapshot hook: the writable layer is the upper directory of the sandbox's root
// overlay, on a tmpfs mount attached nowhere that the sandbox's init keeps at a fixed descriptor
// (proto::kInitUpperFd). The host takes a copy with pidfd_getfd and checks it is that mount: root inside may
// have replaced the init's descriptors.
#include <fcntl.h>
#include <linux/magic.h>
#include <linux/openat2.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <sys/stat.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <set>
#include <vector>

#include "backends/container/container_sandbox.hpp"
#include "backends/host/slots.hpp"
#include "common/error.hpp"
#include "proto/init_protocol.hpp"
#include "sys/fs_util.hpp"
#include "sys/mount_api.hpp"
#include "sys/pidfd.hpp"

#ifndef SYS_pidfd_getfd
#define SYS_pidfd_getfd 438
#endif

namespace sandlet::container {
namespace {


uint64_t now_ns() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

// Every process of the sandbox (its cgroup and the per-exec groups below it), as host pids.
void collect_pids(const std::string& group, int depth, std::vector<pid_t>& out) {
  if (depth > 8) return;
  if (auto procs = sys::read_file_if_exists(group + "/cgroup.procs", 1u << 20)) {
    size_t at = 0;
    while (at < procs->size()) {
      size_t nl = procs->find('\n', at);
      if (nl == std::string::npos) nl = procs->size();
      if (nl > at) out.push_back(static_cast<pid_t>(std::strtol(procs->c_str() + at, nullptr, 10)));
      at = nl + 1;
    }
  }
  for (const auto& name : sys::list_dir(group)) {
    struct stat st;
    const std::string sub = group + "/" + name;
    if (::lstat(sub.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) collect_pids(sub, depth + 1, out);
  }
}

// Inodes mapped shared and writable ("rw-s"/"-w-s" in /proc/PID/maps) by these processes. False when the
// listing is too large to read while the sandbox is frozen (64 MiB): then every file counts as mapped.
// A process that exits between the listing of its cgroup and this read is gone (ENOENT or ESRCH, the latter
// once its memory is released): it maps nothing any more.
std::optional<std::string> read_maps(pid_t pid, size_t max) {
  const std::string path = "/proc/" + std::to_string(pid) + "/maps";
  sys::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) {
    if (errno == ENOENT || errno == ESRCH) return std::nullopt;
    throw_errno("open " + path);
  }
  std::string out;
  char buf[8192];
  while (out.size() <= max) {
    ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == ESRCH) return std::nullopt;
      throw_errno("read " + path);
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

bool shared_writable_inodes(const std::vector<pid_t>& pids, std::set<uint64_t>& out) {
  size_t budget = 64u << 20;
  for (pid_t pid : pids) {
    auto maps = read_maps(pid, budget);
    if (!maps) continue;  // gone
    if (maps->size() > budget) return false;
    budget -= maps->size();
    size_t at = 0;
    while (at < maps->size()) {
      size_t nl = maps->find('\n', at);
      if (nl == std::string::npos) nl = maps->size();
      // address perms offset dev inode [path]
      char perms[8] = {};
      unsigned long long inode = 0;
      if (std::sscanf(maps->c_str() + at, "%*s %7s %*s %*s %llu", perms, &inode) == 2 && perms[1] == 'w' &&
          perms[3] == 's' && inode != 0)
        out.insert(inode);
      at = nl + 1;
    }
  }
  return true;
}

}  // namespace

sys::UniqueFd ContainerSandbox::writable_layer() const {
  if (!state_.upper_mnt_id)
    throw Error(Code::kFailedPrecondition, "sandbox " + id_ + ": started by a build that kept no writable layer to snapshot");
  sys::UniqueFd pid = pidfd_ ? sys::UniqueFd(::fcntl(pidfd_.get(), F_DUPFD_CLOEXEC, 0))
                             : sys::open_pidfd_checked(state_.init_pid, state_.init_start);
  if (!pid) throw Error(Code::kFailedPrecondition, "sandbox " + id_ + " is not running");
  sys::UniqueFd mnt(static_cast<int>(::syscall(SYS_pidfd_getfd, pid.get(), proto::kInitUpperFd, 0)));
  if (!mnt) {
    if (errno == ESRCH) throw Error(Code::kFailedPrecondition, "sandbox " + id_ + " is not running");
    throw Error(Code::kFailedPrecondition, "sandbox " + id_ + ": its init no longer holds the writable layer", errno);
  }
  struct statfs fs;
  if (::fstatfs(mnt.get(), &fs) != 0 || fs.f_type != TMPFS_MAGIC || sys::mount_id_of(mnt.get()) != state_.upper_mnt_id)
    throw Error(Code::kDataLoss, "sandbox " + id_ + ": its init handed back another mount than its writable layer");
  // Only this mount (no symlink, no other mount) is the layer.
  struct open_how how {};
  how.flags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_XDEV | RESOLVE_NO_MAGICLINKS;
  sys::UniqueFd upper(static_cast<int>(::syscall(SYS_openat2, mnt.get(), "upper", &how, sizeof how)));
  if (!upper) throw_errno("sandbox " + id_ + ": open its writable layer");
  return upper;
}

uint64_t ContainerSandbox::snapshot(const std::function<void(const WritableLayer&)>& running,
                                    const std::function<void(const WritableLayer&)>& frozen) {
  sys::UniqueFd upper = writable_layer();
  WritableLayer layer;
  layer.dir_fd = upper.get();
  layer.id_base = state_.uid_base;
  layer.id_count = SlotTable::kIdsPerSlot;
  // Mapped before the first pass or while frozen: either may have written pages the first pass copied.
  std::vector<pid_t> pids_before;
  collect_pids(state_.cgroups.v2, 0, pids_before);
  layer.all_mapped = !shared_writable_inodes(pids_before, layer.mapped_shared_writable);
  running(layer);
  // A sandbox the caller paused stays paused: it is not ours to thaw.
  auto current = sys::read_file_if_exists(state_.cgroups.v2 + "/cgroup.freeze", 64);
  const bool was_frozen = current && current->rfind("1", 0) == 0;
  const uint64_t t0 = now_ns();
  try {
    if (!was_frozen) freeze(true);
    std::vector<pid_t> pids;
    collect_pids(state_.cgroups.v2, 0, pids);
    if (!shared_writable_inodes(pids, layer.mapped_shared_writable)) layer.all_mapped = true;
    frozen(layer);
  } catch (...) {
    // Whatever failed (the freeze itself included), the sandbox runs on as it did before.
    if (!was_frozen) (void)sys::try_write_existing(state_.cgroups.v2 + "/cgroup.freeze", "0");
    throw;
  }
  if (!was_frozen) freeze(false);
  return now_ns() - t0;
}

}  // namespace sandlet::container
