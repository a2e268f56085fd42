#include "image/layer_verify.hpp"

#include <algorithm>
#include <cstring>

#include "common/error.hpp"
#include "image/erofs_format.hpp"
#include "image/erofs_reader.hpp"
#include "image/layer_store.hpp"

namespace sandlet::image {

namespace {

static_assert(sizeof(ChunkRecord) == 40, "the .chunks file format");

// A blob's records must be what BlobBuilder appends: ascending, disjoint, each at most one chunk and inside
// the blob as the device table sizes it (so a lookup by blkaddr has one answer).
void check_records(const std::vector<ChunkRecord>& recs, const ErofsDevice& dev, const std::string& layer) {
  uint64_t next_free = 0;
  for (const auto& r : recs) {
    uint64_t blocks = (uint64_t{r.length} + erofs::kBlockSize - 1) / erofs::kBlockSize;
    if (r.length == 0 || r.length > kChunkSize || r.blkaddr < next_free || r.blkaddr + blocks > dev.blocks) {
      throw Error(Code::kDataLoss, layer + ": the chunk index of blob " + dev.tag + " has a bad record at block " +
                                       std::to_string(r.blkaddr));
    }
    next_free = r.blkaddr + blocks;
  }
}

}  // namespace

std::vector<ChunkRecord> parse_chunk_index(const std::string& bytes, const std::string& blob) {
  if (bytes.size() % sizeof(ChunkRecord) != 0) {
    throw Error(Code::kDataLoss, "chunk index of blob " + blob + ": " + std::to_string(bytes.size()) +
                                     " bytes is not a whole number of records");
  }
  std::vector<ChunkRecord> out(bytes.size() / sizeof(ChunkRecord));
  if (!out.empty()) std::memcpy(out.data(), bytes.data(), bytes.size());
  return out;
}

VerifiedLayer verify_layer_metadata(const std::string& image_bytes, const std::vector<std::string>& blob_digests,
                                    const std::vector<std::vector<ChunkRecord>>& chunk_indexes,
                                    const std::vector<std::string>& stack, const std::string& expected_digest) {
  std::string want = expected_digest.rfind("sha256:", 0) == 0 ? expected_digest.substr(7) : expected_digest;
  const std::string layer = "layer sha256:" + want;
  if (blob_digests.size() != chunk_indexes.size()) {
    throw Error(Code::kInvalidArgument, layer + ": " + std::to_string(blob_digests.size()) + " blobs but " +
                                            std::to_string(chunk_indexes.size()) + " chunk indexes");
  }
  std::vector<ErofsDevice> devices;
  FsTree tree = [&] {
    try {
      return read_erofs_image(image_bytes, &devices);
    } catch (const Error& e) {
      throw Error(e.code(), layer + ": " + e.what(), e.err_no());
    }
  }();
  bool same = devices.size() == blob_digests.size();
  for (size_t d = 0; same && d < devices.size(); ++d) same = devices[d].tag == blob_digests[d];
  if (!same) {
    throw Error(Code::kDataLoss, layer + ": its metadata names other blobs (or another order) than its manifest");
  }
  for (size_t d = 0; d < devices.size(); ++d) check_records(chunk_indexes[d], devices[d], layer);

  // Chunk digests from the indexes; which records are used.
  std::vector<std::vector<bool>> used(devices.size());
  for (size_t d = 0; d < devices.size(); ++d) used[d].assign(chunk_indexes[d].size(), false);
  for (uint32_t i = 0; i < tree.inode_count(); ++i) {
    Inode& n = tree.at(i);
    n.chunk_digests.assign(n.chunks.size(), Digest{});  // holes stay all-zero, as BlobBuilder records them
    for (size_t c = 0; c < n.chunks.size(); ++c) {
      const ChunkRef& ref = n.chunks[c];
      if (ref.blkaddr == ChunkRef::kHole) continue;
      const auto& recs = chunk_indexes[ref.blob];
      auto it = std::lower_bound(recs.begin(), recs.end(), ref.blkaddr,
                                 [](const ChunkRecord& r, uint32_t blk) { return r.blkaddr < blk; });
      std::string where = layer + ": chunk " + std::to_string(c) + " of a file (block " +
                          std::to_string(ref.blkaddr) + " of blob " + devices[ref.blob].tag + ")";
      if (it == recs.end() || it->blkaddr != ref.blkaddr) throw Error(Code::kDataLoss, where + " has no chunk record");
      uint64_t len = std::min<uint64_t>(kChunkSize, n.size - c * uint64_t{kChunkSize});
      if (it->length != len) {
        throw Error(Code::kDataLoss, where + " is recorded as " + std::to_string(it->length) +
                                         " bytes, the file needs " + std::to_string(len));
      }
      n.chunk_digests[c] = it->digest;
      used[ref.blob][static_cast<size_t>(it - recs.begin())] = true;
    }
  }
  std::string got = layer_digest(tree.content_digest(kChunkSize), stack);
  if (got != want) {
    throw Error(Code::kDataLoss, layer + ": its metadata and chunk indexes have digest sha256:" + got +
                                     " (altered, damaged, or another layer)");
  }
  VerifiedLayer out;
  out.inodes = tree.inode_count();
  out.referenced.resize(devices.size());
  for (size_t d = 0; d < devices.size(); ++d) {
    for (size_t r = 0; r < used[d].size(); ++r) {
      if (used[d][r]) out.referenced[d].push_back(chunk_indexes[d][r]);
    }
  }
  return out;
}

}  // namespace sandlet::image
