// What the microVMs of one runtime share: the host jail's cgroups and uid slots, where the initramfs and
// the VM init's copy are kept, and the kernel kit in use.
#pragma once
#include <memory>
#include <string>

#include "backends/host/slots.hpp"
#include "sys/cgroup.hpp"

namespace sandlet::microvm {

using sandlet::host::SlotTable;

struct MicrovmNode {
  sys::CgroupSystem cgroups;
  std::unique_ptr<SlotTable> slots;
  std::string root;         // the runtime root
  std::string cache_dir;    // root/microvm: initramfs files
  std::string bin_dir;      // where the VM init's executable copy lives
  std::string kernel;       // the configured kit ("" = the default, see guest_kit.hpp)
};

}  // namespace sandlet::microvm
