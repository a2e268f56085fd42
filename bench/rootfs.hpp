// Where the bench's root filesystem and runtime root come from, and temp directories that clean up.
#pragma once

#include <filesystem>
#include <string>

namespace bench {

struct Context;

// A mkdtemp directory removed (without crossing into other filesystems) on destruction.
class TempDir final {
 public:
  TempDir() = default;
  explicit TempDir(const std::string &prefix) { create(prefix); }
  void create(const std::string &prefix);  // /tmp/<prefix>XXXXXX (removes the previous one, if any)
  ~TempDir() { remove(); }
  TempDir(const TempDir &) = delete;
  TempDir &operator=(const TempDir &) = delete;
  const std::filesystem::path &path() const { return path_; }
  bool empty() const { return path_.empty(); }
  void remove() noexcept;

 private:
  std::filesystem::path path_;
};

// Removes a tree without descending into other mounts (a leftover bind of a lower layer must never be
// emptied through it). Returns false if something could not be removed (still mounted, say).
bool remove_tree_one_fs(const std::filesystem::path &p) noexcept;

// The rootfs to use: --rootfs DIR, else $SANDLET_BENCH_ROOTFS, else the build tree's test-rootfs next to
// this executable, else one built with test/fixtures/make-rootfs.sh into `scratch`.
std::filesystem::path locate_rootfs(const std::string &flag, const std::filesystem::path &exe_dir, TempDir &scratch);

}  // namespace bench
