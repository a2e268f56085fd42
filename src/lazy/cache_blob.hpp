// One blob of a lazy layer as the holder tracks it: its cache file (sparse, as large as the blob; what EROFS
// reads as the layer's device), which chunks are verified there, which are being fetched, and its counters.
// The file `<sha>.filled` beside it keeps a byte per chunk the fetcher wrote (a claim the next loader checks
// by hashing the chunk before trusting it); `<sha>.order` the chunks in the order first asked for (prefetch).
#pragma once
#include <sys/types.h>

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "lazy/chunk_index.hpp"
#include "sys/fd.hpp"

namespace sandlet::lazy {

struct BlobCounters {
  uint64_t hits = 0;           // reads whose chunks were already verified in the cache
  uint64_t misses = 0;         // reads that waited for a fetch
  uint64_t fetched_bytes = 0;  // from the store
  uint64_t fetch_errors = 0;
  std::deque<uint32_t> latencies_us;  // of the most recent fetches (bounded)
  void add_latency(uint64_t ns);
};

class CacheBlob final {
 public:
  // Opens (creating, sparse) `<dir>/<sha>` and its side files. The descriptor it keeps is opened before
  // the file is marked, so the fetcher's writes through it raise no events.
  // `adopted`: that descriptor instead (a dead holder's, kept by the fetcher; the file is marked already,
  // and a descriptor opened now would raise events itself).
  CacheBlob(uint32_t id, const std::string& dir, const std::string& sha, const std::string& index_path,
            sys::UniqueFd adopted = {});

  uint32_t id() const { return id_; }
  const std::string& sha() const { return sha_; }
  const std::string& path() const { return path_; }
  const std::string& index_path() const { return index_path_; }
  const ChunkIndex& index() const { return index_; }
  int fd() const { return fd_.get(); }
  dev_t dev() const { return dev_; }
  ino_t ino() const { return ino_; }
  uint64_t size() const { return index_.blob_size(); }

  bool verified(size_t chunk) const { return verified_[chunk] != 0; }
  bool all_verified() const { return verified_count_ == verified_.size(); }
  void set_verified(size_t first, size_t last);
  bool requested(size_t chunk) const { return requested_[chunk] != 0; }
  void set_requested(size_t first, size_t last, bool on);
  void clear_requested() { std::fill(requested_.begin(), requested_.end(), 0); }
  // Chunks a previous loader wrote (not yet checked by this one).
  bool claimed(size_t chunk) const;
  void record_first_use(size_t first, size_t last);
  std::vector<uint32_t> recorded_order() const;  // chunk numbers, first use first
  uint64_t verified_bytes() const;
  void evicted();  // the file's data is gone: nothing verified

  bool marked = false;
  int layers = 0;           // attached layers using it
  uint64_t last_used_ns = 0;
  BlobCounters counters;

 private:
  uint32_t id_;
  std::string sha_, path_, index_path_;
  ChunkIndex index_;
  sys::UniqueFd fd_;
  dev_t dev_ = 0;
  ino_t ino_ = 0;
  std::vector<uint8_t> verified_, requested_, first_used_;
  size_t verified_count_ = 0;
  std::string claims_;  // contents of <sha>.filled at open
  sys::UniqueFd order_fd_;
};

}  // namespace sandlet::lazy
