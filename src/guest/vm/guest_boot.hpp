// The microVM guest's start-up as PID 1 of its kernel, before anything of the sandbox runs: the kernel's
// file systems, the modules the initramfs carries (in the order the host wrote), the store layers from
// their read-only disks and the writable disk, composed with OverlayFS and switched into.
#pragma once
#include "guest/status.hpp"

namespace sandlet::guest::vm {

// proc, sys and devtmpfs on the initramfs's own root.
Status mount_kernel_filesystems();
// Loads /modules/<name> for every line of /modules/order (a module already built in or loaded is fine).
Status load_modules();
// Mounts the disks whose serials are "sl-layer<N>" (N = 0 lowest) read-only and "sl-upper" as the
// writable layer; `layers` is how many the host attached (the kernel command line's sandlet.layers).
// OverlayFS of them becomes the root; /dev, /proc and /sys move along; the sandbox's own mounts (devpts,
// /dev/shm, cgroup2) are made there.
Status mount_root(int layers);
// The toolkit's disk (serial "sl-toolkit", its data blobs "sl-toolkit-b<N>") as a detached read-only
// EROFS mount (guest/toolkit.hpp attaches it); its descriptor in *fd.
Status mount_toolkit_disk(int* fd);
// The number after `key=` on the kernel command line, or `fallback`.
long cmdline_number(const char* key, long fallback);

}  // namespace sandlet::guest::vm
