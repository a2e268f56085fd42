#include "backends/host/slots.hpp"

#include <unistd.h>

#include <climits>
#include <mutex>

#include "common/error.hpp"
#include "sys/fs_util.hpp"

namespace sandlet::host {
namespace {
std::mutex g_hint_mutex;
}

std::string SlotTable::default_dir(const std::string& fallback) {
  try {
    sys::mkdir_p("/run/sandlet/slots", 0700);
    if (::access("/run/sandlet/slots", W_OK) == 0) return "/run/sandlet/slots";
  } catch (const Error&) {
  }
  sys::mkdir_p(fallback, 0700);
  return fallback;
}

namespace {
bool sandbox_dir_exists(const std::string& dir) {
  if (::access(dir.c_str(), F_OK) == 0) return true;
  size_t slash = dir.rfind('/');
  if (slash == std::string::npos) return false;
  std::string retired = dir.substr(0, slash + 1) + ".reclaim-" + dir.substr(slash + 1);
  return ::access(retired.c_str(), F_OK) == 0;
}
}  // namespace

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

size_t SlotTable::sweep() {
  size_t removed = 0;
  for (const auto& name : sys::list_dir(dir_)) {
    std::string path = dir_ + "/" + name;
    char target[PATH_MAX];
    ssize_t n = ::readlink(path.c_str(), target, sizeof target - 1);
    if (n < 0) continue;
    std::string sandbox(target, static_cast<size_t>(n));
    if (sandbox.empty() || sandbox[0] != '/' || !sandbox_dir_exists(sandbox)) {
      if (::unlink(path.c_str()) == 0) ++removed;
    }
  }
  return removed;
}

}  // namespace sandlet::host
