#include "backends/host/memory_reclaim.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <sstream>

#include "common/error.hpp"
#include "sys/fs_util.hpp"

namespace sandlet::host {
namespace {

// The sum of the named keys of a memory.stat file.
uint64_t stat_sum(const std::string& path, std::initializer_list<const char*> keys) {
  auto text = sys::read_file_if_exists(path, 64 << 10);
  if (!text) return 0;
  std::istringstream in(*text);
  std::string key;
  uint64_t value = 0, sum = 0;
  while (in >> key >> value)
    for (const char* k : keys)
      if (key == k) sum += value;
  return sum;
}

uint64_t went_down(std::optional<uint64_t> before, std::optional<uint64_t> after) {
  return before && after && *after < *before ? *before - *after : 0;
}

uint64_t reclaim_v2(const std::string& group) {
  const auto before = sys::read_u64_file(group + "/memory.current");
  if (!before || *before == 0) return 0;
  // EAGAIN when less than asked could be reclaimed: what was, was.
  (void)sys::try_write_existing(group + "/memory.reclaim", std::to_string(*before));
  return went_down(before, sys::read_u64_file(group + "/memory.current"));
}

uint64_t reclaim_v1(const std::string& group) {
  const auto before = sys::read_u64_file(group + "/memory.usage_in_bytes");
  const auto limit = sys::read_file_if_exists(group + "/memory.limit_in_bytes", 64);
  if (!before || !limit) return 0;
  const uint64_t file_cache = stat_sum(group + "/memory.stat", {"total_inactive_file", "total_active_file"});
  if (file_cache == 0) return 0;
  const uint64_t page = 4096;
  const uint64_t target = ((*before > file_cache ? *before - file_cache : 0) + page - 1) / page * page;
  (void)sys::try_write_existing(group + "/memory.limit_in_bytes", std::to_string(std::max(target, page)));
  const auto after = sys::read_u64_file(group + "/memory.usage_in_bytes");
  int err = 0;
  for (int attempt = 0; attempt < 3; ++attempt)
    if ((err = sys::try_write_existing(group + "/memory.limit_in_bytes", *limit)) == 0) break;
  if (err != 0)
    throw Error(Code::kInternal, "memory reclaim: cannot put " + group + "/memory.limit_in_bytes back to " + *limit +
                                     ": " + std::strerror(err));
  return went_down(before, after);
}

}  // namespace

uint64_t reclaim_frozen_memory(const sys::CgroupPaths& paths, const std::string& memory_v1_root) {
  if (!paths.v2.empty() && ::access((paths.v2 + "/memory.reclaim").c_str(), W_OK) == 0) return reclaim_v2(paths.v2);
  if (memory_v1_root.empty()) return 0;
  for (const auto& dir : paths.v1)
    if (dir.rfind(memory_v1_root + "/", 0) == 0) return reclaim_v1(dir);
  return 0;
}

}  // namespace sandlet::host
