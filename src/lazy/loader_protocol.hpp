// What the loader's two processes say to each other (binary, over a SOCK_SEQPACKET pair) and where a node's
// loader keeps its files. The holder owns the fanotify group and answers the kernel; the fetcher fetches,
// verifies and writes chunks. See docs/LAZY.md.
#pragma once
#include <cstdint>
#include <string>

namespace sandlet::lazy {

// Under the runtime root.
inline std::string loader_dir(const std::string& root) { return root + "/loader"; }
inline std::string control_socket_path(const std::string& root) { return loader_dir(root) + "/control.sock"; }
inline std::string loader_lock_path(const std::string& root) { return loader_dir(root) + "/lock"; }
inline std::string cache_dir(const std::string& root) { return root + "/layers/cache"; }

constexpr uint32_t kProtocolVersion = 1;

enum class FetchMsg : uint32_t {
  kOpenBlob = 1,   // holder -> fetcher: OpenBlob + strings; fds: cache file (read-write, unwatched)
  kFill = 2,       // holder -> fetcher: Fill
  kCloseBlob = 3,  // holder -> fetcher: CloseBlob
  kKeep = 4,       // holder -> fetcher: Keep + the root; fds: fanotify group, loader lock, pending-read table
  kFilled = 10,    // fetcher -> holder: Filled
};

struct OpenBlob {
  uint32_t type = static_cast<uint32_t>(FetchMsg::kOpenBlob);
  uint32_t blob_id = 0;
  uint64_t size = 0;
  char sha[65] = {};
  char pad[7] = {};
  uint32_t url_len = 0;     // the store's URL follows the struct, then the chunk index's path,
  uint32_t index_len = 0;   // then the credentials (access key, secret, session token), each length-prefixed
  uint32_t creds_len = 0;
  uint32_t reserved = 0;
};

struct Fill {
  uint32_t type = static_cast<uint32_t>(FetchMsg::kFill);
  uint32_t blob_id = 0;
  uint32_t first = 0;     // chunk range, inclusive
  uint32_t last = 0;
  uint32_t prefetch = 0;  // non-zero: only when no reader waits
  uint32_t reserved = 0;
};

struct CloseBlob {
  uint32_t type = static_cast<uint32_t>(FetchMsg::kCloseBlob);
  uint32_t blob_id = 0;
};

// What the fetcher keeps so that a holder killed can be succeeded without the group ever closing.
struct Keep {
  uint32_t type = static_cast<uint32_t>(FetchMsg::kKeep);
  uint32_t root_len = 0;  // the runtime root follows the struct
  uint64_t cache_max_bytes = 0;
};

struct Filled {
  uint32_t type = static_cast<uint32_t>(FetchMsg::kFilled);
  uint32_t blob_id = 0;
  uint32_t first = 0;
  uint32_t last = 0;
  int32_t error = 0;         // 0, or the errno readers of these chunks get (EIO: fetch or verification failed)
  uint32_t from_cache = 0;   // chunks found already in the cache file and verified there
  uint64_t bytes_fetched = 0;
  uint64_t latency_ns = 0;   // from the request to the data written
};

}  // namespace sandlet::lazy
