// The sandbox's /dev, made on the host: a small detached tmpfs with the device nodes a program expects.
// Inside a user namespace mknod is forbidden, so the alternative is for the init to bind-mount the host's
// nodes one by one on its critical path; here the nodes are made by the host ahead of the init's start
// (overlapping other work) and the init attaches the whole tree with one move_mount.
#pragma once
#include <sys/types.h>

#include "sys/fd.hpp"

namespace sandlet::container {

using sys::UniqueFd;

// A detached tmpfs (nosuid, noexec, 64 MiB, 4096 inodes) whose root is owned by `root_uid`/`root_gid` (root inside), so
// the sandbox may add files; it holds null, zero, full, random, urandom and tty (mode 0666, made by the
// host: nothing inside can make more — mknod needs CAP_MKNOD in the host's user namespace), the
// mount points pts and shm, and the usual symlinks (ptmx, fd, stdin, stdout, stderr).
UniqueFd build_sandbox_dev(uid_t root_uid, gid_t root_gid);

}  // namespace sandlet::container
