// What the microVM agent's commands may reach of the guest kernel, set up once in the agent's mount
// namespace before it serves (after the toolkit, masks and file rules, which need the raw disks and new
// mounts). Root in the guest owns its kernel, so without this it could get around the file rules: read
// the layer disks raw, write /proc/sys (core_pattern, modprobe), /sys, or load code into the kernel.
#pragma once
#include "guest/status.hpp"

namespace sandlet::guest::vm {

// A /dev of its own (tmpfs: null, zero, full, random, urandom, tty, pts, ptmx, shm, fd links) over the
// kernel's devtmpfs, so that no disk, memory or port node is reachable; /proc/sys and /sys read-only; no
// new namespaces; and CAP_MKNOD, CAP_SYS_RAWIO, CAP_SYS_MODULE, CAP_SYS_BOOT dropped from the bounding
// set of everything the agent starts. The seccomp filter installed next denies the mount family, so
// none of it can be undone from inside.
Status lock_down_guest();

}  // namespace sandlet::guest::vm
