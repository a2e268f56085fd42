// Host uid/gid ranges for sandboxes. Each sandbox gets its own 65536-id range so that root in one sandbox
// is a different host user from root in another. The table is node-wide (<node state>/slots, e.g.
// /run/sandlet/slots or /dev/shm/sandlet-state/slots: runtimes with different roots must not hand out
// the same range) and a slot is claimed by an atomic symlink
// <slots>/<n> -> <sandbox directory>, so claims are safe across processes and gc can find orphans.
#pragma once
#include <cstdint>
#include <string>

namespace sandlet::host {

constexpr uint32_t kUidRangeStart = 1u << 28;  // far above ordinary users and systemd's dynamic ranges
constexpr int kMaxSlots = 60000;

class SlotTable final {
 public:
  explicit SlotTable(std::string dir) : dir_(std::move(dir)) {}
  // The node-wide table, or `fallback` when /run/sandlet is not writable.
  static std::string default_dir(const std::string& fallback);
  // Claims a free slot for the sandbox at `sandbox_dir`; throws RESOURCE_EXHAUSTED when none is left.
  int claim(const std::string& sandbox_dir);
  // Frees `slot` if it still belongs to `sandbox_dir`.
  void release(int slot, const std::string& sandbox_dir);
  // Removes slots whose sandbox directory (or its .reclaim- twin) no longer exists. Returns how many.
  size_t sweep();
  const std::string& dir() const { return dir_; }
  static constexpr uint32_t kIdsPerSlot = 65536;  // the ids of one sandbox (uid 0..65535 inside)
  static uint32_t uid_base(int slot) { return kUidRangeStart + static_cast<uint32_t>(slot) * kIdsPerSlot; }

 private:
  std::string dir_;
  int hint_ = 0;
};

}  // namespace sandlet::host
