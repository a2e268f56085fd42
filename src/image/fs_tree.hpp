// The in-memory filesystem tree importers build and the EROFS writer consumes. File data is not held here:
// importers stream it into a BlobBuilder and keep only where each chunk went (and its digest).
#pragma once
#include <sys/stat.h>
#include <sys/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "image/sha256.hpp"

namespace sandlet::image {

// Where one chunk of a regular file lives: a blob (by index into FsTree::blobs) and its block address there.
struct ChunkRef {
  static constexpr uint32_t kHole = 0xFFFFFFFFu;
  uint32_t blob = 0;
  uint32_t blkaddr = kHole;  // kHole: all zeros, nothing stored
};

struct Inode {
  mode_t mode = 0;  // type and permission bits, as st_mode
  uint32_t uid = 0, gid = 0;
  int64_t mtime_sec = 0;
  uint32_t mtime_nsec = 0;
  dev_t rdev = 0;
  std::vector<std::pair<std::string, std::string>> xattrs;  // full names; kept sorted by name
  // Regular files: their size; data either `inline_data` (small files) or `chunks`.
  uint64_t size = 0;
  std::string inline_data;  // symlink target, or the whole content of a small regular file
  std::vector<ChunkRef> chunks;
  std::vector<Digest> chunk_digests;  // parallel to `chunks` (holes: all-zero digest)
  std::map<std::string, uint32_t> children;  // directories: name -> inode index (byte order)

  bool is_dir() const { return S_ISDIR(mode); }
  void set_xattr(const std::string& name, std::string value);
  void remove_xattr(const std::string& name);
};

class FsTree final {
 public:
  static constexpr uint32_t kRoot = 0;
  FsTree();  // a root directory 0755 root:root, mtime 0

  Inode& at(uint32_t index) { return *inodes_[index]; }
  const Inode& at(uint32_t index) const { return *inodes_[index]; }
  size_t inode_count() const { return inodes_.size(); }
  uint32_t add_inode(Inode inode);

  // Looks up a normalized relative path ("a/b"; "" = root); nullopt-like -1 when absent.
  int64_t lookup(const std::string& path) const;
  // The directory that would hold `path`, creating missing parents as 0755 root dirs. Throws
  // Error(kInvalidArgument) if a parent exists and is not a directory.
  uint32_t parent_dir(const std::string& path, std::string* leaf);
  // Links `index` at `path`, replacing what was there (a replaced directory takes its subtree with it).
  void link(const std::string& path, uint32_t index);
  // Removes `path` (and its subtree); no-op when absent.
  void unlink(const std::string& path);

  // Blobs that chunks point into: index 0 is the blob being built by this import ("" until finished),
  // others are existing blobs (sha256 hex) shared with other layers.
  std::vector<std::string> blobs{""};

  // Identity of the content, independent of where its chunks are stored: every reachable path in byte
  // order with type, mode, owner, mtime, device, xattrs, symlink target, size and chunk digests (hard links
  // as links). Importing the same tree twice, from a directory or a tar, gives the same digest.
  Digest content_digest(uint32_t chunk_size) const;

 private:
  std::vector<std::unique_ptr<Inode>> inodes_;
};

// Splits "a/b/c" into components; throws kInvalidArgument on "..", empty or "." components (named `what`).
std::vector<std::string> split_path(const std::string& path, const std::string& what);

}  // namespace sandlet::image
