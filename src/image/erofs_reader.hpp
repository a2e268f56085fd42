// Reads an EROFS metadata image, as sandlet's writer (erofs_writer.cpp) writes it, back into an FsTree
// without touching any data blob: what a node that fetched only a layer's metadata checks before it mounts
// the layer (layer_verify.hpp). The image is hostile input (it comes from a remote store): whatever the
// writer would not have written, or whatever could make the kernel see another tree than the one returned,
// is Error(kDataLoss, "layer metadata ..."). Every offset is checked against the image and the memory the
// tree takes is bounded by the image's size (see the limits below).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "image/fs_tree.hpp"

namespace sandlet::image {

struct ErofsDevice {
  std::string tag;      // the blob's sha256 (64 lowercase hex digits)
  uint32_t blocks = 0;  // its size in 4 KiB blocks, as the device table records it
};

// Limits beyond those the image's size implies.
constexpr uint32_t kErofsMaxDepth = 1024;         // directory nesting below the root
constexpr uint64_t kErofsMaxInodes = 1u << 24;
constexpr uint64_t kErofsMaxDirBytes = 256u << 20;
// Full paths the digest walk builds (FsTree::content_digest keeps them): this much plus 4x the image.
constexpr uint64_t kErofsPathBytesSlack = 256u << 20;

// Chunks point into FsTree::blobs by device: device d (1-based) is tree.blobs[d - 1], its tag; so writing
// the tree again gives the same device table. Holes are ChunkRef{} (kHole); chunk_digests stay empty (only
// the blobs' chunk indexes know them). `devices` may be null.
FsTree read_erofs_image(const std::string& image_bytes, std::vector<ErofsDevice>* devices);

// The same, with only the device tags (blob digests, in device order); `device_tags` may be null.
FsTree read_erofs_tree(const std::string& image_bytes, std::vector<std::string>* device_tags);

}  // namespace sandlet::image
