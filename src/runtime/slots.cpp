#include "runtime/slots.hpp"

#include <unistd.h>

#include <climits>
#include <mutex>

#include "common/error.hpp"
#include "sys/fs_util.hpp"

namespace sandlet {
namespace {
std::mutex g_hint_mutex;
}

int SlotTable::claim(const std::string& id) {
  int start;
  {
    std::lock_guard lock(g_hint_mutex);
    start = hint_;
  }
  for (int i = 0; i < kMaxSlots; ++i) {
    int slot = (start + i) % kMaxSlots;
    std::string path = dir_ + "/" + std::to_string(slot);
    if (::symlink(id.c_str(), path.c_str()) == 0) {
      std::lock_guard lock(g_hint_mutex);
      hint_ = slot + 1;
      return slot;
    }
    if (errno != EEXIST) throw_errno("claim uid slot " + path);
  }
  throw Error(Code::kResourceExhausted, "no free uid range: " + std::to_string(kMaxSlots) + " sandboxes exist");
}

void SlotTable::release(int slot, const std::string& id) {
  if (slot < 0) return;
  std::string path = dir_ + "/" + std::to_string(slot);
  char target[PATH_MAX];
  ssize_t n = ::readlink(path.c_str(), target, sizeof target - 1);
  if (n < 0) return;
  if (std::string(target, static_cast<size_t>(n)) == id) ::unlink(path.c_str());
}

size_t SlotTable::sweep(const std::string& sandboxes_dir) {
  size_t removed = 0;
  for (const auto& name : sys::list_dir(dir_)) {
    std::string path = dir_ + "/" + name;
    char target[PATH_MAX];
    ssize_t n = ::readlink(path.c_str(), target, sizeof target - 1);
    if (n < 0) continue;
    std::string id(target, static_cast<size_t>(n));
    if (id.find('/') != std::string::npos || ::access((sandboxes_dir + "/" + id).c_str(), F_OK) != 0) {
      if (::unlink(path.c_str()) == 0) ++removed;
    }
  }
  return removed;
}

}  // namespace sandlet
