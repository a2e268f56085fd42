// Streams regular-file data into a new content-addressed blob, in fixed-size chunks aligned to file offsets.
// A chunk already stored (in this blob, or in a blob of another layer offered as `known`) is referenced,
// not written again; all-zero chunks become holes. Small files stay in the metadata (inline).
#pragma once
#include <cstdint>
#include <functional>
#include <future>
#include <string>
#include <unordered_map>
#include <vector>

#include "image/fs_tree.hpp"
#include "image/sha256.hpp"
#include "sys/fd.hpp"

namespace sandlet::image {

constexpr uint32_t kChunkSize = 64 * 1024;  // dedupe unit; fixed so equal files chunk alike in every layer
constexpr uint32_t kInlineMax = 2048;       // files up to this size live in the metadata image

struct DigestHash {
  size_t operator()(const Digest& d) const noexcept {
    size_t h;
    __builtin_memcpy(&h, d.data(), sizeof h);
    return h;
  }
};

struct StoredChunk {
  std::string blob;  // sha256 hex of the blob holding it
  uint32_t blkaddr;
  uint32_t length;
};
using ChunkMap = std::unordered_map<Digest, StoredChunk, DigestHash>;

// One record of a blob's chunk list (`<blob>.chunks`): which chunk sits where, for dedupe by later imports.
struct ChunkRecord {
  Digest digest;
  uint32_t blkaddr;
  uint32_t length;
};

class BlobBuilder final {
 public:
  // `path`: the new blob's (temporary) file, created here. `known`: chunks of existing blobs, may be null.
  BlobBuilder(std::string path, FsTree& tree, const ChunkMap* known);
  ~BlobBuilder();  // waits for the write in flight

  // Reads `size` bytes of `fd` (a regular file; holes are skipped with SEEK_DATA) into `inode`.
  void add_file(Inode& inode, int fd, uint64_t size, const std::string& name_for_errors);
  // Same from a stream (tar member data) of exactly `size` bytes; `read` returns 0 only at its end.
  void add_stream(Inode& inode, uint64_t size, const std::function<size_t(void*, size_t)>& read,
                  const std::string& name_for_errors);

  // Flushes and syncs the blob. Returns its digest (hex), or "" when no chunk was stored in it (the file is
  // then removed). `records` receives its chunk list.
  std::string finish(std::vector<ChunkRecord>* records);

  uint64_t bytes_in() const { return bytes_in_; }        // file bytes consumed
  uint64_t bytes_stored() const { return blob_size_; }   // bytes written to the blob
  uint64_t blocks() const { return blob_size_ / 4096; }

 private:
  void add_chunk(Inode& inode, const char* data, uint32_t len);
  void append(const char* data, uint32_t len);
  void flush();         // hands buf_ to a writer thread (after the previous write is done)
  void wait_written();  // the write in flight is done (its error rethrown)

  std::string path_;
  FsTree& tree_;
  const ChunkMap* known_;
  sys::UniqueFd fd_;
  std::vector<char> buf_;      // pending appends
  std::vector<char> writing_;  // being hashed and written by `inflight_`
  std::future<void> inflight_;
  std::vector<char> chunk_;    // one chunk being read
  uint64_t blob_size_ = 0;     // bytes appended (block aligned)
  uint64_t bytes_in_ = 0;
  Sha256 blob_hash_;
  std::unordered_map<Digest, ChunkRecord, DigestHash> mine_;
  std::vector<ChunkRecord> records_;
  std::unordered_map<std::string, uint32_t> blob_index_;  // existing blob hex -> index in tree.blobs
};

}  // namespace sandlet::image
