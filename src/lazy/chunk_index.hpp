// A blob's chunk index (`<blob>.chunks`, see image/blob_builder.hpp) as the loader uses it: chunks sorted by
// position, and which chunks a byte range of the blob touches. Read from files a remote store supplied
// (checked against the layer's digest at pull time), so it is still checked for order and bounds here.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "image/blob_builder.hpp"

namespace sandlet::lazy {

class ChunkIndex final {
 public:
  ChunkIndex() = default;
  // Throws kDataLoss when the records are unsorted, overlap, or exceed the caps.
  explicit ChunkIndex(std::vector<image::ChunkRecord> records);
  static ChunkIndex load(const std::string& path);

  size_t size() const { return chunks_.size(); }
  const image::ChunkRecord& at(size_t i) const { return chunks_[i]; }
  uint64_t start(size_t i) const { return uint64_t{chunks_[i].blkaddr} * 4096; }
  uint64_t end(size_t i) const { return start(i) + chunks_[i].length; }
  // Bytes of the blob: the end of its last chunk, rounded up to a block.
  uint64_t blob_size() const;
  // The chunks [first, last] that bytes [offset, offset + count) touch; first > last when none (padding).
  std::pair<size_t, size_t> touching(uint64_t offset, uint64_t count) const;

 private:
  std::vector<image::ChunkRecord> chunks_;
};

}  // namespace sandlet::lazy
