// The loader's second process: takes fill requests from the holder, fetches the chunks' byte ranges from
// the blob's store, checks each chunk against its digest, writes the verified bytes into the cache file and
// reports them. An io_uring ring drives it (requests in, cache writes, reports out, completions of the
// store reads); store reads run on `concurrency` threads over the blocking store clients (src/remote_store).
// It may be killed at any moment: the holder keeps every reader waiting and asks the next fetcher again.
#pragma once
#include <cstdint>

namespace sandlet::lazy {

struct FetcherOptions {
  int fd = -1;  // the holder's end of the pair
  uint32_t fetch_unit = 64 * 1024;
  uint32_t concurrency = 8;
  uint32_t fill_timeout_ms = 60000;
};

int run_fetcher(const FetcherOptions& options);

}  // namespace sandlet::lazy
