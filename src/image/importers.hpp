// Importers fill an FsTree (metadata) and a BlobBuilder (file data) from a source tree.
#pragma once
#include <cstdint>
#include <functional>
#include <string>

#include "image/blob_builder.hpp"
#include "image/fs_tree.hpp"

namespace sandlet::image {

class ByteReader;

struct ImportProgress {
  uint64_t bytes = 0;        // source bytes consumed (compressed bytes for tarballs)
  uint64_t total_bytes = 0;  // when known (size of a tarball), else 0
  uint64_t files = 0;        // entries imported
};
using ProgressFn = std::function<void(const ImportProgress&)>;

// A directory on the host, as is: owners, modes, timestamps, xattrs, hard links, sparse files, device nodes,
// fifos and sockets; overlay whiteouts (0/0 character devices) and opaque xattrs are kept as they are.
// Never follows symlinks. The directory's own metadata becomes the root's.
void import_directory(const std::string& dir, FsTree& tree, BlobBuilder& blobs, const ProgressFn& progress);

// Applies the layer in `dir` on top of what `tree` holds, with overlay semantics: directories merge unless
// the upper one is opaque, anything else replaces; whiteouts and opaque markers are kept (they still hide
// whatever lies below the merged range).
void merge_directory(const std::string& dir, FsTree& tree, BlobBuilder& blobs, const ProgressFn& progress);

// A tar stream (entries applied in order; later ones replace earlier ones). With `oci_whiteouts`, OCI
// whiteout files become overlay whiteouts: ".wh.NAME" -> NAME as a 0/0 character device, ".wh..wh..opq" ->
// its directory marked opaque (trusted.overlay.opaque=y).
// `ended_with_marker` (may be null): whether the archive had its end-of-archive block (a file cut at a
// member boundary has not).
void import_tar(ByteReader& in, const std::string& name, FsTree& tree, BlobBuilder& blobs, bool oci_whiteouts,
                const ProgressFn& progress, uint64_t total_bytes, bool* ended_with_marker = nullptr);

}  // namespace sandlet::image
