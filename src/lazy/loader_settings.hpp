// Settings of a node's loader of lazy layers (one loader per runtime root; see docs/LAZY.md). The runtime
// that starts the loader passes them; a loader already running keeps its own.
#pragma once
#include <cstdint>

namespace sandlet::lazy {

struct LoaderSettings {
  uint64_t cache_max_bytes = 10ull << 30;  // fetched data kept; unused chunks evicted least recently used first
  uint32_t fetch_unit = 64 * 1024;         // bytes per store request around a cold read (multiple of 64 KiB)
  uint32_t fetch_concurrency = 8;          // store requests in flight on the node
  uint32_t fill_timeout_ms = 60000;        // a cold read fails with EIO after this long without its data
};

}  // namespace sandlet::lazy
