// Writes an FsTree as an uncompressed EROFS metadata image: inodes, directories, xattrs and small files
// inline; regular file data stays in blobs, referenced per chunk through the image's device table (one
// extra device per blob, tagged with the blob's sha256). The image passes fsck.erofs and mounts with
// `device=<blob>` for each device in order.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "image/fs_tree.hpp"

namespace sandlet::image {

struct ErofsImageInfo {
  std::vector<std::string> devices;  // blob digests (hex), in device order (device 1 first)
  uint64_t inodes = 0;
  uint64_t bytes = 0;                // size of the metadata image
};

// `blob_blocks`: size in 4 KiB blocks of every blob the tree references (by hex digest). Every tree.blobs
// entry a reachable chunk uses must be a non-empty digest by now. Writes `path` (created, fsynced).
ErofsImageInfo write_erofs(const FsTree& tree, uint32_t chunk_size, const std::map<std::string, uint64_t>& blob_blocks,
                           const std::string& path);

}  // namespace sandlet::image
