// pack_diff for a container's writable layer: copies the changed entries of an OverlayFS upper directory into
// a staging directory (a host tmpfs) as a layer the store can import — whiteouts and opaque directories as
// OverlayFS wrote them, owners shifted from the sandbox's host ids to the ids inside, OverlayFS's own
// bookkeeping xattrs dropped. Everything read is the sandbox's and hostile: never followed, sizes capped.
//
// A snapshot packs twice (docs/SNAPSHOTS.md): a pass while the sandbox runs copies everything; the pass while it
// is frozen builds the final tree and hard-links each file the first pass copied and that has not changed
// since from there, copying only what did. So the frozen window costs a metadata walk plus the data written
// while the first pass ran.
#pragma once
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "snapshot/manifest.hpp"

namespace sandlet::snapshot {

struct PackOptions {
  // Paths inside the sandbox left out with everything below them; fnmatch patterns ("/tmp/*").
  std::vector<std::string> exclude;
  const Manifest* previous = nullptr;  // incremental: pack only what differs from it (+ whiteouts)
  uint32_t id_base = 0;                // host uid/gid of id 0 inside
  uint32_t id_count = 65536;           // ids inside; others become 65534 (nobody)
  // Frozen pass: inodes of the layer some process maps shared and writable. Writes through a mapping of a
  // tmpfs file change no time stamp, so these are always copied again.
  std::set<uint64_t> mapped_shared_writable;
  // A regular file longer than this (sparse: the writable layer's own size bounds its data) is refused: the
  // store keeps a record per 64 KiB of a file, holes included.
  uint64_t max_file_size = 1ull << 40;
};

// What a first pass copied, for the second to reuse.
struct CopiedFile {
  uint64_t ino = 0;
  int64_t ctime_ns = 0;
  uint64_t size = 0;
  int64_t copied_at_ns = 0;  // wall clock when its copy began
};
using CopyIndex = std::map<std::string, CopiedFile>;

struct PassResult {
  Manifest manifest;  // frozen pass: every entry of the upper that is not excluded (the next snapshot's base)
  CopyIndex copied;   // regular files copied (not reused) by this pass
  uint64_t entries = 0, bytes = 0, reused = 0;
};

// Throws Error (FAILED_PRECONDITION for what cannot be packed faithfully: OverlayFS redirects or metacopy,
// a path over 4000 bytes, more than 4 Mi entries).
// `reuse_dir`/`reuse`: a first pass's output directory and index; null `reuse` for the first pass itself
// (run beside the sandbox: entries that go or change meanwhile are skipped, the frozen pass packs them).
PassResult pack_pass(int upper_dir, int out_dir, const PackOptions& options, int reuse_dir, const CopyIndex* reuse);

// Validates snapshot exclude patterns (absolute, no "..", <= 4096 bytes, <= 256 of them): INVALID_ARGUMENT
// naming `field`.
void check_excludes(const std::vector<std::string>& patterns, const std::string& field);

}  // namespace sandlet::snapshot
