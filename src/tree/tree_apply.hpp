// Writes a tree received as TreeEntry values (tree_protocol.hpp) under a destination, which becomes the
// tree's root: an existing directory there is merged into (its own metadata and that of directories already
// in it are left as they are), files, links and FIFOs replace what had their name (each made under a
// temporary name and renamed over it, so nothing is written through a link in the way).
//
// Nothing leaves the destination: every entry's parent is opened relative to the destination with
// RESOLVE_BENEATH (a link that points outside, absolutely or by "..", fails the copy; a link to a directory
// inside it is merged through, where a directory entry meets one), and in `strict` mode — the host, writing
// what a sandbox sent — with no symlink followed at all, no symlink made that points outside (unless asked),
// set-user/group-ID bits dropped, and hard links only to files this copy made. Directory modes and times
// are applied at finish(), deepest first, so a read-only directory can still receive its contents. Used by
// the agent (put-tree) and the host (get-tree); neither throws.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "proto/tree_protocol.hpp"
#include "tree/string_table.hpp"
#include "tree/tree_status.hpp"

namespace sandlet::tree {

struct ApplyOptions {
  bool keep_owners = false;  // owners from the entries; else `uid`:`gid` below when `chown`
  bool chown = true;
  uint32_t uid = 0, gid = 0;
  bool strict = false;
  // Strict: a symlink that would point outside the destination (absolute, or climbing out with "..") is
  // made only when this is set; otherwise it is left out and counted in skipped() — a host program that
  // later followed it would read or write a file of the host's. A root that is such a link fails the copy.
  bool outside_links = false;
  bool mkdir_parents = true;  // missing parents of the destination are made (owned as above)
  uint64_t resolve = 0;       // RESOLVE_* flags for the destination's own path (the agent: no magic links)
};

class TreeApplier final {
 public:
  TreeApplier() = default;
  ~TreeApplier();
  TreeApplier(const TreeApplier&) = delete;
  TreeApplier& operator=(const TreeApplier&) = delete;

  // `dest`: where the root goes (relative paths from the working directory).
  TreeStatus begin(const std::string& dest, const ApplyOptions& options);
  // The first entry must be the root (path ""); a kFile's data follows through data() before the next.
  TreeStatus entry(const proto::TreeEntry& e);
  TreeStatus data(const char* p, size_t n);
  // After the last entry: the deferred directory metadata. The copy is complete once this is ok.
  TreeStatus finish();
  // Gives up: removes a half-written temporary file (what was already in place stays, as with tar).
  void abort();

  uint64_t entries() const { return entries_; }
  uint64_t bytes() const { return bytes_; }
  uint64_t skipped() const { return skipped_; }

 private:
  struct DeferredDir {
    std::string rel;
    uint32_t mode;
    int64_t sec;
    uint32_t nsec;
  };
  TreeStatus root_entry(const proto::TreeEntry& e);
  TreeStatus open_parent_of(const std::string& rel, int* dirfd, std::string* base);
  TreeStatus make_dir(int dirfd, const std::string& base, const proto::TreeEntry& e);
  TreeStatus make_other(int dirfd, const std::string& base, const proto::TreeEntry& e);
  TreeStatus finish_file();
  TreeStatus place(int dirfd, const std::string& tmp, const std::string& base, const proto::TreeEntry& e);
  TreeStatus set_owner(int dirfd, const char* name, const proto::TreeEntry& e);
  uint32_t file_mode(uint32_t mode) const;
  std::string where(const std::string& rel) const { return tree_join(dest_, rel); }
  std::string next_tmp();
  void close_parent();

  std::string dest_;
  ApplyOptions options_;
  uint64_t beneath_ = 0;     // RESOLVE_* flags for every path below the destination
  bool started_ = false, root_done_ = false, root_is_dir_ = false;
  int dest_parent_ = -1;     // the destination's parent directory
  std::string dest_base_;    // the destination's name in it ("" when the destination is "/")
  int root_fd_ = -1;         // the destination directory, when the tree is one
  int parent_fd_ = -1;       // cache: the parent of the last entry
  std::string parent_rel_;
  // The regular file being received.
  int file_fd_ = -1, file_dir_ = -1;
  uint64_t file_left_ = 0;
  std::string file_tmp_, file_base_;
  proto::TreeEntry file_entry_;
  std::vector<DeferredDir> dirs_;
  StringTable made_files_;  // strict: the regular files this copy made (hard link targets)
  uint64_t counter_ = 0, entries_ = 0, bytes_ = 0, skipped_ = 0;
};

}  // namespace sandlet::tree
