#include "lazy/chunk_index.hpp"

#include <algorithm>
#include <cstring>

#include "common/error.hpp"
#include "sys/fs_util.hpp"

namespace sandlet::lazy {

namespace {
constexpr size_t kMaxChunks = 1u << 24;  // 1 TiB of 64 KiB chunks
}

ChunkIndex::ChunkIndex(std::vector<image::ChunkRecord> records) : chunks_(std::move(records)) {
  if (chunks_.size() > kMaxChunks) throw Error(Code::kDataLoss, "chunk index: too many chunks");
  for (size_t i = 0; i < chunks_.size(); ++i) {
    const auto& c = chunks_[i];
    if (c.length == 0 || c.length > image::kChunkSize)
      throw Error(Code::kDataLoss, "chunk index: chunk " + std::to_string(i) + " has length " + std::to_string(c.length));
    if (i > 0 && start(i) < end(i - 1))
      throw Error(Code::kDataLoss, "chunk index: chunk " + std::to_string(i) + " overlaps the one before or is out of order");
  }
}

ChunkIndex ChunkIndex::load(const std::string& path) {
  std::string raw = sys::read_file(path, kMaxChunks * sizeof(image::ChunkRecord));
  if (raw.size() % sizeof(image::ChunkRecord) != 0)
    throw Error(Code::kDataLoss, "chunk index " + path + ": size is not a whole number of records");
  std::vector<image::ChunkRecord> recs(raw.size() / sizeof(image::ChunkRecord));
  if (!recs.empty()) std::memcpy(recs.data(), raw.data(), raw.size());
  try {
    return ChunkIndex(std::move(recs));
  } catch (const Error& e) {
    throw Error(e.code(), path + ": " + e.what());
  }
}

uint64_t ChunkIndex::blob_size() const {
  if (chunks_.empty()) return 0;
  return (end(chunks_.size() - 1) + 4095) / 4096 * 4096;
}

std::pair<size_t, size_t> ChunkIndex::touching(uint64_t offset, uint64_t count) const {
  if (count == 0 || chunks_.empty()) return {1, 0};
  uint64_t stop = count > UINT64_MAX - offset ? UINT64_MAX : offset + count;
  // First chunk whose end is past `offset`.
  auto it = std::partition_point(chunks_.begin(), chunks_.end(), [&](const image::ChunkRecord& c) {
    return uint64_t{c.blkaddr} * 4096 + c.length <= offset;
  });
  size_t first = static_cast<size_t>(it - chunks_.begin());
  if (first == chunks_.size() || start(first) >= stop) return {1, 0};
  // Last chunk that starts before `stop`.
  auto jt = std::partition_point(it, chunks_.end(),
                                 [&](const image::ChunkRecord& c) { return uint64_t{c.blkaddr} * 4096 < stop; });
  size_t last = static_cast<size_t>(jt - chunks_.begin()) - 1;
  return {first, last};
}

}  // namespace sandlet::lazy
