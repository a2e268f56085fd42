// Directory import: a depth-first walk with *at() calls relative to directory fds (never following links).
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <vector>

#include "common/error.hpp"
#include "image/importers.hpp"
#include "image/xattrs.hpp"
#include "sys/fd.hpp"

namespace sandlet::image {

namespace {

void fill_meta(Inode& n, const struct stat& st) {
  n.mode = st.st_mode;
  n.uid = st.st_uid;
  n.gid = st.st_gid;
  n.mtime_sec = st.st_mtim.tv_sec;
  n.mtime_nsec = static_cast<uint32_t>(st.st_mtim.tv_nsec);
  if (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)) n.rdev = st.st_rdev;
}

struct Walker {
  FsTree& tree;
  BlobBuilder& blobs;
  const ProgressFn& progress;
  bool merge = false;  // overlay an existing tree instead of filling an empty one
  std::map<std::pair<dev_t, ino_t>, uint32_t> seen;  // hard links
  ImportProgress p;

  void tick() {
    ++p.files;
    if (progress && p.files % 256 == 0) {
      p.bytes = blobs.bytes_in();
      progress(p);
    }
  }

  // Imports the directory open at `dirfd` (shown as `shown`) into tree inode `dir_index`.
  void walk(int dirfd, uint32_t dir_index, const std::string& shown) {
    sys::UniqueFd iter_fd(::openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!iter_fd) throw_errno("open " + shown);
    DIR* d = ::fdopendir(iter_fd.get());
    if (!d) throw_errno("opendir " + shown);
    iter_fd.release();
    std::vector<std::string> names;
    errno = 0;
    while (dirent* e = ::readdir(d)) {
      std::string name = e->d_name;
      if (name != "." && name != "..") names.push_back(std::move(name));
    }
    int err = errno;
    ::closedir(d);
    if (err) throw_errno("read directory " + shown, err);
    std::sort(names.begin(), names.end());

    for (const auto& name : names) {
      std::string child_shown = shown + "/" + name;
      struct stat st;
      if (::fstatat(dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) throw_errno("stat " + child_shown);
      if (!S_ISDIR(st.st_mode) && st.st_nlink > 1) {
        if (auto it = seen.find({st.st_dev, st.st_ino}); it != seen.end()) {
          tree.at(dir_index).children[name] = it->second;
          tick();
          continue;
        }
      }
      Inode n;
      fill_meta(n, st);
      auto existing = tree.at(dir_index).children.find(name);
      bool merge_into = merge && S_ISDIR(st.st_mode) && existing != tree.at(dir_index).children.end() &&
                        tree.at(existing->second).is_dir();
      sys::UniqueFd fd;
      if (S_ISREG(st.st_mode) || S_ISDIR(st.st_mode)) {
        fd.reset(::openat(dirfd, name.c_str(),
                          O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | (S_ISDIR(st.st_mode) ? O_DIRECTORY : 0)));
        if (!fd) throw_errno("open " + child_shown);
        n.xattrs = fd_xattrs(fd.get(), child_shown);
      } else {
        // Symlinks, devices, fifos, sockets: not opened; named through the directory's fd.
        n.xattrs = path_xattrs("/proc/self/fd/" + std::to_string(dirfd) + "/" + name, child_shown);
      }
      if (S_ISLNK(st.st_mode)) {
        std::string target(static_cast<size_t>(st.st_size) + 1, '\0');
        ssize_t len = ::readlinkat(dirfd, name.c_str(), target.data(), target.size());
        if (len < 0) throw_errno("readlink " + child_shown);
        target.resize(static_cast<size_t>(len));
        n.inline_data = std::move(target);
      } else if (S_ISREG(st.st_mode)) {
        blobs.add_file(n, fd.get(), static_cast<uint64_t>(st.st_size), child_shown);
      }
      bool opaque = std::any_of(n.xattrs.begin(), n.xattrs.end(), [](const auto& kv) {
        return kv.first == "trusted.overlay.opaque" && kv.second == "y";
      });
      uint32_t idx;
      if (merge_into && !opaque) {  // same directory in both layers: new metadata, merged children
        idx = existing->second;
        auto children = std::move(tree.at(idx).children);
        tree.at(idx) = std::move(n);
        tree.at(idx).children = std::move(children);
      } else {
        idx = tree.add_inode(std::move(n));
        tree.at(dir_index).children[name] = idx;
      }
      if (!S_ISDIR(st.st_mode) && st.st_nlink > 1) seen.emplace(std::make_pair(st.st_dev, st.st_ino), idx);
      tick();
      if (S_ISDIR(st.st_mode)) walk(fd.get(), idx, child_shown);
    }
  }
};

}  // namespace

namespace {

void walk_root(const std::string& dir, FsTree& tree, BlobBuilder& blobs, const ProgressFn& progress, bool merge) {
  sys::UniqueFd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd) throw_errno("open directory " + dir);
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) throw_errno("stat " + dir);
  Inode& root = tree.at(FsTree::kRoot);
  fill_meta(root, st);
  root.xattrs = fd_xattrs(fd.get(), dir);
  Walker w{tree, blobs, progress, merge, {}, {}};
  w.walk(fd.get(), FsTree::kRoot, dir);
  if (progress) {
    w.p.bytes = blobs.bytes_in();
    progress(w.p);
  }
}

}  // namespace

void import_directory(const std::string& dir, FsTree& tree, BlobBuilder& blobs, const ProgressFn& progress) {
  walk_root(dir, tree, blobs, progress, false);
}

void merge_directory(const std::string& dir, FsTree& tree, BlobBuilder& blobs, const ProgressFn& progress) {
  walk_root(dir, tree, blobs, progress, true);
}

}  // namespace sandlet::image
