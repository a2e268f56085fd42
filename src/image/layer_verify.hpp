// Checks, from a layer's metadata image and its blobs' chunk indexes alone (no file data), that they are the
// layer its digest names: what a node that fetches layers lazily from a remote store checks before it mounts
// one. The chunks' own bytes are checked later, against the records returned here, as they arrive.
#pragma once
#include <string>
#include <vector>

#include "image/blob_builder.hpp"

namespace sandlet::image {

struct VerifiedLayer {
  // Per blob (manifest order): the chunk records the layer's files reference, sorted by blkaddr, each once.
  std::vector<std::vector<ChunkRecord>> referenced;
  uint64_t inodes = 0;
};

// `blob_digests`: the manifest's blobs (sha256 hex, device order); `chunk_indexes`: each blob's records
// (parallel); `stack`: the manifest's stack (snapshots); `expected_digest`: the layer's digest (hex, an
// optional "sha256:" prefix). Throws Error(kDataLoss) naming the layer when anything disagrees, and
// kInvalidArgument when the two lists differ in length.
VerifiedLayer verify_layer_metadata(const std::string& image_bytes, const std::vector<std::string>& blob_digests,
                                    const std::vector<std::vector<ChunkRecord>>& chunk_indexes,
                                    const std::vector<std::string>& stack, const std::string& expected_digest);

// Parses a blob's chunk index file (`blobs/<sha256>.chunks`) as the store writes it: whole records. Throws
// Error(kDataLoss) naming `blob` otherwise.
std::vector<ChunkRecord> parse_chunk_index(const std::string& bytes, const std::string& blob);

}  // namespace sandlet::image
