#include "tree/tree_apply.hpp"

#include "tree/tree_sys.hpp"

namespace sandlet::tree {
namespace {

constexpr uint64_t kDirFlags = O_PATH | O_DIRECTORY;

std::string parent_of(const std::string& rel) {
  const size_t slash = rel.rfind('/');
  return slash == std::string::npos ? std::string() : rel.substr(0, slash);
}
std::string base_of(const std::string& rel) {
  const size_t slash = rel.rfind('/');
  return slash == std::string::npos ? rel : rel.substr(slash + 1);
}

// Whether a link at tree path `rel` with target `target` points outside the tree, by the names alone
// (absolute, or climbing above the root with ".."). A link at the root points outside whatever it says:
// its directory is not part of the copy.
bool leaves_tree(const std::string& rel, const std::string& target) {
  if (rel.empty() || target.empty() || target[0] == '/') return true;
  size_t depth = 0;  // components of the link's own directory
  for (char c : rel)
    if (c == '/') ++depth;
  size_t start = 0;
  while (start <= target.size()) {
    size_t slash = target.find('/', start);
    if (slash == std::string::npos) slash = target.size();
    const std::string comp = target.substr(start, slash - start);
    if (comp == "..") {
      if (depth == 0) return true;
      --depth;
    } else if (!comp.empty() && comp != ".") {
      ++depth;
    }
    start = slash + 1;
  }
  return false;
}

}  // namespace

TreeApplier::~TreeApplier() {
  abort();
  close_parent();
  if (root_fd_ >= 0) ::close(root_fd_);
  if (dest_parent_ >= 0) ::close(dest_parent_);
}

void TreeApplier::abort() {
  if (file_fd_ >= 0) ::close(file_fd_);
  file_fd_ = -1;
  if (!file_tmp_.empty() && file_dir_ >= 0) sys::unlink_at(file_dir_, file_tmp_.c_str(), 0);
  file_tmp_.clear();
  file_left_ = 0;
}

void TreeApplier::close_parent() {
  if (parent_fd_ >= 0 && parent_fd_ != root_fd_) ::close(parent_fd_);
  parent_fd_ = -1;
  parent_rel_.clear();
}

std::string TreeApplier::next_tmp() { return ".sandlet-copy-" + std::to_string(++counter_) + ".tmp"; }

uint32_t TreeApplier::file_mode(uint32_t mode) const { return options_.strict ? (mode & ~06000u) : mode; }

TreeStatus TreeApplier::set_owner(int dirfd, const char* name, const proto::TreeEntry& e) {
  if (!options_.keep_owners && !options_.chown) return {};
  const uint32_t uid = options_.keep_owners ? e.uid : options_.uid;
  const uint32_t gid = options_.keep_owners ? e.gid : options_.gid;
  if (sys::chown_at(dirfd, name, uid, gid) != 0) return tree_errno(errno, "copy to", where(e.path));
  return {};
}

TreeStatus TreeApplier::begin(const std::string& dest, const ApplyOptions& options) {
  options_ = options;
  std::string d = dest;
  while (d.size() > 1 && d.back() == '/') d.pop_back();
  if (d.empty()) return tree_error(SANDLET_INVALID_ARGUMENT, 0, "invalid copy destination: empty");
  dest_ = d;
  started_ = true;
  // Below the destination: beneath it (strict: through no link at all). A copy to "/" has nothing outside
  // it, so links resolve as they do for any process in that root (absolute ones from "/").
  beneath_ = RESOLVE_NO_MAGICLINKS | (options.strict ? RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS
                                      : d == "/"     ? RESOLVE_IN_ROOT
                                                     : RESOLVE_BENEATH);
  if (d == "/") {
    dest_parent_ = sys::open_resolved(AT_FDCWD, "/", kDirFlags, 0);
    return dest_parent_ < 0 ? tree_errno(errno, "copy to", dest_) : TreeStatus{};
  }
  const size_t slash = d.rfind('/');
  dest_base_ = slash == std::string::npos ? d : d.substr(slash + 1);
  const std::string parent = slash == std::string::npos ? "." : slash == 0 ? "/" : d.substr(0, slash);
  if (dest_base_ == "." || dest_base_ == "..")
    return tree_error(SANDLET_INVALID_ARGUMENT, 0, "invalid copy destination \"" + dest + "\": names no file");
  if (!options.mkdir_parents) {
    dest_parent_ = sys::open_resolved(AT_FDCWD, parent.c_str(), kDirFlags, options.resolve);
    return dest_parent_ < 0 ? tree_errno(errno, "copy to", dest_) : TreeStatus{};
  }
  // mkdir -p, one component at a time from the first.
  int cur = sys::open_resolved(AT_FDCWD, parent[0] == '/' ? "/" : ".", kDirFlags, 0);
  if (cur < 0) return tree_errno(errno, "copy to", dest_);
  size_t pos = 0;
  while (pos < parent.size()) {
    size_t end = parent.find('/', pos);
    if (end == std::string::npos) end = parent.size();
    const std::string comp = parent.substr(pos, end - pos);
    pos = end + 1;
    if (comp.empty() || comp == ".") continue;
    int next = sys::open_resolved(cur, comp.c_str(), kDirFlags, options.resolve);
    if (next < 0 && errno == ENOENT) {
      if (sys::mkdir_at(cur, comp.c_str(), 0755) == 0) {
        if (options.chown && !options.keep_owners && sys::chown_at(cur, comp.c_str(), options.uid, options.gid) != 0) {
          const int e = errno;
          ::close(cur);
          return tree_errno(e, "copy to", parent.substr(0, end));
        }
      } else if (errno != EEXIST) {
        const int e = errno;
        ::close(cur);
        return tree_errno(e, "copy to", parent.substr(0, end));
      }
      next = sys::open_resolved(cur, comp.c_str(), kDirFlags, options.resolve);
    }
    const int e = errno;
    ::close(cur);
    if (next < 0) return tree_errno(e, "copy to", parent.substr(0, end));
    cur = next;
  }
  dest_parent_ = cur;
  return {};
}

TreeStatus TreeApplier::root_entry(const proto::TreeEntry& e) {
  root_done_ = true;
  if (e.kind != proto::TreeKind::kDir) {
    if (dest_base_.empty())
      return tree_error(SANDLET_FAILED_PRECONDITION, EISDIR, "copy to \"/\": a file cannot replace the root directory");
    return make_other(dest_parent_, dest_base_, e);
  }
  root_is_dir_ = true;
  if (!dest_base_.empty()) {
    if (sys::mkdir_at(dest_parent_, dest_base_.c_str(), 0700) == 0) {
      if (TreeStatus st = set_owner(dest_parent_, dest_base_.c_str(), e); !st.ok()) return st;
      dirs_.push_back({"", e.mode, e.mtime_sec, e.mtime_nsec});
    } else if (errno != EEXIST) {
      return tree_errno(errno, "copy to", dest_);
    }
  }
  root_fd_ = sys::open_resolved(dest_parent_, dest_base_.empty() ? "." : dest_base_.c_str(), kDirFlags, options_.resolve);
  if (root_fd_ < 0) {
    if (errno == ENOTDIR)
      return tree_error(SANDLET_FAILED_PRECONDITION, ENOTDIR, "copy to \"" + dest_ + "\": exists and is not a directory");
    return tree_errno(errno, "copy to", dest_);
  }
  return {};
}

TreeStatus TreeApplier::open_parent_of(const std::string& rel, int* dirfd, std::string* base) {
  *base = base_of(rel);
  const std::string parent = parent_of(rel);
  if (parent.empty()) {
    *dirfd = root_fd_;
    return {};
  }
  if (parent_fd_ >= 0 && parent == parent_rel_) {
    *dirfd = parent_fd_;
    return {};
  }
  close_parent();
  const int fd = sys::open_resolved(root_fd_, parent.c_str(), kDirFlags, beneath_);
  if (fd < 0) {
    if (errno == EXDEV || (options_.strict && errno == ELOOP))
      return tree_error(SANDLET_PERMISSION_DENIED, errno,
                        "copy to \"" + where(rel) + "\": refused, its directory is reached through a symlink " +
                            (options_.strict ? "(a copy out of a sandbox follows none)" : "that leads outside the destination"));
    return tree_errno(errno, "copy to", where(rel));
  }
  parent_fd_ = fd;
  parent_rel_ = parent;
  *dirfd = fd;
  return {};
}

TreeStatus TreeApplier::make_dir(int dirfd, const std::string& base, const proto::TreeEntry& e) {
  const char* name = base.c_str();
  if (sys::mkdir_at(dirfd, name, 0700) != 0) {
    if (errno != EEXIST) return tree_errno(errno, "copy to", where(e.path));
    struct stat s;
    if (sys::stat_at(dirfd, name, &s) != 0) return tree_errno(errno, "copy to", where(e.path));
    if (S_ISDIR(s.st_mode)) return {};  // merged into; its metadata stays
    if (S_ISLNK(s.st_mode) && !options_.strict) {
      // A link to a directory that stays inside the destination is kept and merged through (as tar's
      // --keep-directory-symlink: e.g. /lib -> usr/lib); one that leads outside fails the copy.
      const int fd = sys::open_resolved(root_fd_, e.path.c_str(), kDirFlags, beneath_);
      if (fd >= 0) {
        ::close(fd);
        return {};
      }
      if (errno == EXDEV)
        return tree_error(SANDLET_PERMISSION_DENIED, EXDEV,
                          "copy to \"" + where(e.path) + "\": refused, a symlink there leads outside the destination");
    }
    if (sys::unlink_at(dirfd, name, 0) != 0 || sys::mkdir_at(dirfd, name, 0700) != 0)
      return tree_errno(errno, "copy to", where(e.path));
  }
  if (TreeStatus st = set_owner(dirfd, name, e); !st.ok()) return st;
  dirs_.push_back({e.path, e.mode, e.mtime_sec, e.mtime_nsec});
  return {};
}

// Renames the temporary name `tmp` over `base`; removes `tmp` whatever happens (a rename onto another
// link of the same file does nothing and leaves it).
TreeStatus TreeApplier::place(int dirfd, const std::string& tmp, const std::string& base, const proto::TreeEntry& e) {
  TreeStatus st;
  if (sys::rename_at(dirfd, tmp.c_str(), base.c_str()) != 0) {
    st = errno == EISDIR || errno == ENOTEMPTY
             ? tree_error(SANDLET_FAILED_PRECONDITION, errno, "copy to \"" + where(e.path) + "\": a directory is in the way")
             : tree_errno(errno, "copy to", where(e.path));
  }
  sys::unlink_at(dirfd, tmp.c_str(), 0);
  return st;
}

TreeStatus TreeApplier::make_other(int dirfd, const std::string& base, const proto::TreeEntry& e) {
  const std::string tmp = next_tmp();
  const char* t = tmp.c_str();
  switch (e.kind) {
    case proto::TreeKind::kFile: {
      file_fd_ = sys::open_resolved(dirfd, t, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_NOCTTY, 0, 0600);
      if (file_fd_ < 0) return tree_errno(errno, "copy to", where(e.path));
      file_dir_ = dirfd;
      file_tmp_ = tmp;
      file_base_ = base;
      file_entry_ = e;
      file_left_ = e.size;
      if (TreeStatus st = set_owner(dirfd, t, e); !st.ok()) return st;
      return e.size == 0 ? finish_file() : TreeStatus{};
    }
    case proto::TreeKind::kSymlink:
      if (options_.strict && !options_.outside_links && leaves_tree(e.path, e.link)) {
        if (e.path.empty())
          return tree_error(SANDLET_FAILED_PRECONDITION, 0,
                            "copy to \"" + dest_ + "\": the source is a symlink (to \"" + e.link +
                                "\"), which would point outside the copy: copy what it points to (follow links) or "
                                "allow links that point outside");
        ++skipped_;  // (a link that leaves the tree is not made on the host by default)
        return {};
      }
      if (sys::symlink_at(e.link.c_str(), dirfd, t) != 0) return tree_errno(errno, "copy to", where(e.path));
      break;
    case proto::TreeKind::kFifo:
      if (sys::mkfifo_at(dirfd, t, 0600) != 0) return tree_errno(errno, "copy to", where(e.path));
      break;
    case proto::TreeKind::kHardlink: {
      if (options_.strict && made_files_.find(e.link) == nullptr)
        return tree_error(SANDLET_INVALID_ARGUMENT, 0,
                          "copy to \"" + where(e.path) + "\": a hard link to \"" + e.link + "\", which this copy did not make");
      const std::string tparent = parent_of(e.link);
      const int tfd = tparent.empty() ? root_fd_ : sys::open_resolved(root_fd_, tparent.c_str(), kDirFlags, beneath_);
      if (tfd < 0) return tree_errno(errno, "copy to", where(e.path));
      const int rc = sys::link_at(tfd, base_of(e.link).c_str(), dirfd, t);
      const int err = errno;
      if (tfd != root_fd_) ::close(tfd);
      if (rc != 0) return tree_errno(err, "copy to", where(e.path));
      return place(dirfd, tmp, base, e);  // a link shares its target's owner, mode and times
    }
    case proto::TreeKind::kDir:
      break;
  }
  if (TreeStatus st = set_owner(dirfd, t, e); !st.ok()) {
    sys::unlink_at(dirfd, t, 0);
    return st;
  }
  if ((e.kind == proto::TreeKind::kFifo && sys::chmod_at(dirfd, t, file_mode(e.mode)) != 0) ||
      sys::set_times(dirfd, t, e.mtime_sec, e.mtime_nsec, AT_SYMLINK_NOFOLLOW) != 0) {
    const TreeStatus st = tree_errno(errno, "copy to", where(e.path));
    sys::unlink_at(dirfd, t, 0);
    return st;
  }
  return place(dirfd, tmp, base, e);
}

TreeStatus TreeApplier::finish_file() {
  const proto::TreeEntry& e = file_entry_;
  TreeStatus st;
  // The mode after the owner: chown clears set-id bits.
  if (::fchmod(file_fd_, file_mode(e.mode)) != 0 || sys::set_times(file_fd_, nullptr, e.mtime_sec, e.mtime_nsec, 0) != 0)
    st = tree_errno(errno, "copy to", where(e.path));
  const int fd = file_fd_;
  file_fd_ = -1;
  if (::close(fd) != 0 && st.ok()) st = tree_errno(errno, "copy to", where(e.path));
  if (!st.ok()) {
    abort();
    return st;
  }
  st = place(file_dir_, file_tmp_, file_base_, e);
  file_tmp_.clear();
  if (st.ok() && options_.strict) made_files_.insert(e.path, std::string());
  return st;
}

TreeStatus TreeApplier::entry(const proto::TreeEntry& e) {
  if (!started_) return tree_error(SANDLET_INTERNAL, 0, "copy: entry before begin");
  if (file_left_ > 0)
    return tree_error(SANDLET_INVALID_ARGUMENT, 0, "copy to \"" + where(file_entry_.path) + "\": " +
                                                       std::to_string(file_left_) + " bytes of its data missing");
  ++entries_;
  if (!root_done_) {
    if (!e.path.empty()) return tree_error(SANDLET_INVALID_ARGUMENT, 0, "copy: the first entry is not the tree's root");
    return root_entry(e);
  }
  if (e.path.empty()) return tree_error(SANDLET_INVALID_ARGUMENT, 0, "copy: a second root entry");
  if (!root_is_dir_)
    return tree_error(SANDLET_INVALID_ARGUMENT, 0, "copy to \"" + dest_ + "\": entries below a root that is not a directory");
  int dirfd = -1;
  std::string base;
  if (TreeStatus st = open_parent_of(e.path, &dirfd, &base); !st.ok()) return st;
  if (e.kind == proto::TreeKind::kDir) return make_dir(dirfd, base, e);
  return make_other(dirfd, base, e);
}

TreeStatus TreeApplier::data(const char* p, size_t n) {
  if (n > file_left_)
    return tree_error(SANDLET_INVALID_ARGUMENT, 0, "copy to \"" + where(file_entry_.path) + "\": more data than its size");
  if (!sys::write_all(file_fd_, p, n)) return tree_errno(errno, "copy to", where(file_entry_.path));
  file_left_ -= n;
  bytes_ += n;
  return file_left_ == 0 ? finish_file() : TreeStatus{};
}

TreeStatus TreeApplier::finish() {
  if (!root_done_) return tree_error(SANDLET_INVALID_ARGUMENT, 0, "copy to \"" + dest_ + "\": no entries");
  if (file_left_ > 0)
    return tree_error(SANDLET_INVALID_ARGUMENT, 0, "copy to \"" + where(file_entry_.path) + "\": " +
                                                       std::to_string(file_left_) + " bytes of its data missing");
  close_parent();
  for (auto it = dirs_.rbegin(); it != dirs_.rend(); ++it) {
    // The directory itself, opened without following a link at its name: its mode goes to what was made.
    const int fd = it->rel.empty()
                       ? sys::open_resolved(dest_parent_, dest_base_.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW, 0)
                       : sys::open_resolved(root_fd_, it->rel.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW, beneath_);
    if (fd < 0) return tree_errno(errno, "copy to", where(it->rel));
    const bool ok = ::fchmod(fd, file_mode(it->mode)) == 0 && sys::set_times(fd, nullptr, it->sec, it->nsec, 0) == 0;
    const int e = errno;
    ::close(fd);
    if (!ok) return tree_errno(e, "copy to", where(it->rel));
  }
  dirs_.clear();
  return {};
}

}  // namespace sandlet::tree
