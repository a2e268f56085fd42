// A microVM's disks: each layer as a read-only EROFS image (a host directory is packed into one with
// mkfs.erofs at create; the store's layers are already images) and the writable disk, an ext4 file system
// of `limits.disk` bytes (sparse: it takes host space as the guest writes).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace sandlet::microvm {

// Packs host directory `dir` into an EROFS image at `image` (files keep their owners and modes).
void pack_directory(const std::string& dir, const std::string& image);
// Makes the writable disk at `path`: `bytes` long, ext4 without a journal (the disk dies with the VM), its
// root owned by root.
void make_writable_disk(const std::string& path, uint64_t bytes);
// Runs a tool to its end; INTERNAL with its last output when it fails.
void run_tool(const std::vector<std::string>& argv);

}  // namespace sandlet::microvm
