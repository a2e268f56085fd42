// Host uid/gid ranges for sandboxes. Each sandbox gets its own 65536-id range so that root in one sandbox
// is a different host user from root in another. A slot is claimed by an atomic symlink
// <root>/slots/<n> -> <sandbox id>, so claims are safe across processes and gc can find orphans.
#pragma once
#include <cstdint>
#include <string>

namespace sandlet {

constexpr uint32_t kUidRangeStart = 1u << 28;  // far above ordinary users and systemd's dynamic ranges
constexpr int kMaxSlots = 60000;

class SlotTable final {
 public:
  explicit SlotTable(std::string dir) : dir_(std::move(dir)) {}
  // Claims a free slot for `id`; throws RESOURCE_EXHAUSTED when none is left.
  int claim(const std::string& id);
  // Frees `slot` if it still belongs to `id`.
  void release(int slot, const std::string& id);
  // Removes slots whose sandbox directory no longer exists under `sandboxes_dir`. Returns how many.
  size_t sweep(const std::string& sandboxes_dir);
  static uint32_t uid_base(int slot) { return kUidRangeStart + static_cast<uint32_t>(slot) * 65536u; }

 private:
  std::string dir_;
  int hint_ = 0;
};

}  // namespace sandlet
