// Blocking clients of the remote stores that layers are pushed to and pulled from: a directory, an HTTP(S)
// server (PUT through WebDAV) or an S3 bucket (SigV4). Keys are relative paths (store_url.hpp).
//
// Errors (sandlet::Error): kUnavailable when the store cannot be reached or fails (connection refused or
// reset, timeouts, 5xx, truncated bodies) after the configured retries; kPermissionDenied when it rejects
// the credentials (401/403); kNotFound for an absent key; kOutOfRange for a range past the end;
// kFailedPrecondition / kInvalidArgument for other 4xx, with the status line.
//
// Thread-safety: a BlobStore is used from one thread at a time (it keeps one connection alive between
// requests); use one object per thread.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "remote_store/store_url.hpp"

namespace sandlet::store {

class BlobStore {
 public:
  virtual ~BlobStore() = default;
  virtual const StoreConfig& config() const = 0;
  // The store is reachable and accepts the credentials (a bad URL or secret fails here, early and clearly).
  virtual void check() = 0;
  // The object's size; nullopt when it is absent.
  virtual std::optional<uint64_t> head(const std::string& key) = 0;
  // A whole small object; kNotFound when absent, kResourceExhausted when over max_bytes.
  virtual std::string get(const std::string& key, size_t max_bytes) = 0;
  // Exactly len bytes at offset into out, or throws (kOutOfRange when the range passes the end).
  virtual void get_range(const std::string& key, uint64_t offset, size_t len, char* out) = 0;
  virtual void put(const std::string& key, const std::string& data) = 0;
  // Streams the file; atomic on the store side where the store allows it (a directory: temp + rename).
  virtual void put_file(const std::string& key, const std::string& path) = 0;
};

std::unique_ptr<BlobStore> open_store(const StoreConfig& config);

// Store-internal: the per-kind factories (dir_store.cpp, http_store.cpp).
std::unique_ptr<BlobStore> open_dir_store(const StoreConfig& config);
std::unique_ptr<BlobStore> open_http_store(const StoreConfig& config);

// The delay before retry number `attempt` (1-based): exponential from 50 ms, capped at 2 s, with jitter.
double retry_delay_s(int attempt);

}  // namespace sandlet::store
