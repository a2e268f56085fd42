// A string -> string hash table for the tree code. The in-sandbox agent links no libstdc++ (only its
// header-only parts), so std::map and std::unordered_map are not available there; this open-addressing
// table needs nothing but std::vector and std::string.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace sandlet::tree {

class StringTable final {
 public:
  // The value stored under `key`, or nullptr.
  const std::string* find(const std::string& key) const {
    if (slots_.empty()) return nullptr;
    for (size_t i = hash(key) & (slots_.size() - 1);; i = (i + 1) & (slots_.size() - 1)) {
      const Slot& s = slots_[i];
      if (!s.used) return nullptr;
      if (s.key == key) return &s.value;
    }
  }
  // Adds `key` (a key already present keeps its first value).
  void insert(std::string key, std::string value) {
    if ((count_ + 1) * 2 > slots_.size()) grow();
    if (put(std::move(key), std::move(value))) ++count_;
  }
  size_t size() const { return count_; }

 private:
  struct Slot {
    bool used = false;
    std::string key, value;
  };
  static uint64_t hash(const std::string& s) {
    uint64_t h = 1469598103934665603ull;  // FNV-1a
    for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
    return h;
  }
  bool put(std::string key, std::string value) {
    for (size_t i = hash(key) & (slots_.size() - 1);; i = (i + 1) & (slots_.size() - 1)) {
      Slot& s = slots_[i];
      if (s.used && s.key == key) return false;
      if (!s.used) {
        s.used = true;
        s.key = std::move(key);
        s.value = std::move(value);
        return true;
      }
    }
  }
  void grow() {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(old.empty() ? 64 : old.size() * 2, Slot{});
    for (Slot& s : old)
      if (s.used) put(std::move(s.key), std::move(s.value));
  }
  std::vector<Slot> slots_;
  size_t count_ = 0;
};

}  // namespace sandlet::tree
