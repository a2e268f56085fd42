// Read-only loop devices for kernels (or filesystems) on which EROFS cannot mount a regular file.
// A device is configured with LO_FLAGS_AUTOCLEAR in one LOOP_CONFIGURE call: the kernel detaches it
// when its last opener goes. While the LoopDevice is alive, its descriptor is that opener; once a
// mount has opened the device, the mount is, and unmounting it frees the device. A crash at any point
// closes the descriptor, so no device is ever left bound to a file nobody uses.
#pragma once
#include <string>

#include "sys/fd.hpp"

namespace sandlet::sys {

struct LoopDevice {
  UniqueFd fd;       // keeps the device bound until a mount holds it
  std::string path;  // /dev/loopN
  bool direct_io = false;  // reads bypass the backing file's page cache (no double caching)
};

// Binds `file` (read-only) to a free loop device, with direct I/O where the backing filesystem allows it.
// Throws UNIMPLEMENTED when the host has no loop devices (no /dev/loop-control: the loop module not loaded).
LoopDevice attach_loop_device(const std::string& file);

// Why loop devices cannot be used here, or "" when /dev/loop-control can be opened (what doctor shows).
std::string loop_devices_unavailable();

// Loop devices bound to files under `dir` (from /sys/block/loop*/loop/backing_file): tests check that
// none is left.
int loop_devices_backed_by(const std::string& dir);

}  // namespace sandlet::sys
