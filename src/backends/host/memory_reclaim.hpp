// Giving a frozen sandbox's memory back to the host (job pause). Without swap only what the kernel can
// drop is given back: clean page cache, which the sandbox reads again from its layers on demand. Its
// anonymous memory, its tmpfs files (the writable layer, /tmp, /dev/shm) and kernel memory stay resident.
#pragma once
#include <cstdint>
#include <string>

#include "sys/cgroup.hpp"

namespace sandlet::host {

// Reclaims from the sandbox's memory group: cgroup v2 memory.reclaim where the group has the memory
// controller; on a hybrid host, the v1 group's limit is lowered to the usage without its file cache
// (the kernel reclaims to meet it, or gives up with EBUSY; it never kills for it) and put back at once.
// Call only while the sandbox is frozen: nothing of it allocates meanwhile. Returns the bytes the
// group's usage went down by; 0 where neither exists. Throws only when the v1 limit could not be put back.
uint64_t reclaim_frozen_memory(const sys::CgroupPaths& paths, const std::string& memory_v1_root);

}  // namespace sandlet::host
