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

#include <chrono>

#include "backends/container/container_sandbox.hpp"
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

constexpr uint32_t kIdsPerSandboxRange = 65536;

uint64_t now_ns() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
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
  const WritableLayer layer{upper.get(), state_.uid_base, kIdsPerSandboxRange};
  running(layer);
  // A sandbox the caller paused stays paused: it is not ours to thaw.
  auto current = sys::read_file_if_exists(state_.cgroups.v2 + "/cgroup.freeze", 64);
  const bool was_frozen = current && current->rfind("1", 0) == 0;
  const uint64_t t0 = now_ns();
  if (!was_frozen) freeze(true);
  try {
    frozen(layer);
  } catch (...) {
    if (!was_frozen) freeze(false);
    throw;
  }
  if (!was_frozen) freeze(false);
  return now_ns() - t0;
}

}  // namespace sandlet::container
