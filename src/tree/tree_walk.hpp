// Reads a directory tree (or one file or link) as TreeEntry values in pre-order, each directory's names
// sorted, with the data of each regular file pulled through read(). Symlinks are never followed below the
// root (they are entries); a file seen again through another hard link becomes a kHardlink entry to its
// first path; sockets and device nodes are skipped and counted. Used by the agent (get-tree) and by the
// host (a host directory copied into a sandbox); neither throws.
#pragma once
#include <sys/stat.h>
#include <sys/types.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "proto/tree_protocol.hpp"
#include "tree/string_table.hpp"
#include "tree/tree_status.hpp"

namespace sandlet::tree {

struct WalkOptions {
  bool follow_root = false;      // a symlink at the path itself is followed
  uint64_t max_bytes = ~0ull;    // file data in all
  uint64_t resolve = 0;          // RESOLVE_* flags for opening the root path (the agent: no magic links)
};

class TreeWalker final {
 public:
  TreeWalker() = default;
  ~TreeWalker();
  TreeWalker(const TreeWalker&) = delete;
  TreeWalker& operator=(const TreeWalker&) = delete;

  // `path` names the root (relative paths from the working directory).
  TreeStatus open(const std::string& path, const WalkOptions& options);
  // The next entry: true with `*out` set, false at the end (`*st` ok) or on a failure (`*st` says which).
  // The previous file's data must have been read to its end.
  bool next(proto::TreeEntry* out, TreeStatus* st);
  // Up to `n` bytes of the current file's data; 0 once all of it (its entry's size) was returned; -1 on a
  // failure (a file that shrank while being read is one).
  long read(char* buf, size_t n, TreeStatus* st);

  uint64_t entries() const { return entries_; }
  uint64_t bytes() const { return bytes_; }
  uint64_t skipped() const { return skipped_; }

 private:
  struct Dir {
    int fd = -1;
    std::string rel;                 // "" for the root
    std::vector<std::string> names;  // sorted
    size_t next = 0;
  };
  TreeStatus list(Dir* d);
  // Fills `*out` for `name` in `dir` (rel = its tree path); false when skipped or vanished.
  bool visit(Dir& dir, const std::string& name, const std::string& rel, proto::TreeEntry* out, TreeStatus* st);
  bool entry_for(int dirfd, const char* name, const struct stat& s, const std::string& rel, proto::TreeEntry* out,
                 TreeStatus* st);
  void close_all();

  std::string root_;  // as given, for messages
  WalkOptions options_;
  std::vector<Dir> stack_;
  bool root_pending_ = false;
  proto::TreeEntry root_entry_;
  int file_fd_ = -1;
  uint64_t file_left_ = 0;
  std::string file_rel_;
  StringTable links_;  // "dev:ino" -> the first path of each multiply linked file
  uint64_t entries_ = 0, bytes_ = 0, skipped_ = 0;
};

}  // namespace sandlet::tree
