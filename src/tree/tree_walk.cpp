#include "tree/tree_walk.hpp"

#include <dirent.h>

#include <algorithm>

#include "tree/tree_sys.hpp"

namespace sandlet::tree {
namespace {

constexpr size_t kMaxDepth = 512;  // open directory descriptors held at once

struct Dirent64 {
  uint64_t ino;
  int64_t off;
  unsigned short reclen;
  unsigned char type;
  char name[1];
};

proto::TreeEntry base_entry(const struct stat& s, const std::string& rel) {
  proto::TreeEntry e;
  e.path = rel;
  e.mode = s.st_mode & 07777;
  e.uid = s.st_uid;
  e.gid = s.st_gid;
  e.mtime_sec = s.st_mtim.tv_sec;
  e.mtime_nsec = static_cast<uint32_t>(s.st_mtim.tv_nsec);
  return e;
}

std::string link_key(const struct stat& s) {
  return std::to_string(s.st_dev) + ":" + std::to_string(s.st_ino);
}

}  // namespace

TreeWalker::~TreeWalker() { close_all(); }

void TreeWalker::close_all() {
  for (Dir& d : stack_)
    if (d.fd >= 0) ::close(d.fd);
  stack_.clear();
  if (file_fd_ >= 0) ::close(file_fd_);
  file_fd_ = -1;
}

TreeStatus TreeWalker::open(const std::string& path, const WalkOptions& options) {
  close_all();
  root_ = path;
  options_ = options;
  // O_PATH first: what the root is decides how it is opened (a FIFO must not be opened for reading).
  const uint64_t nofollow = options.follow_root ? 0 : O_NOFOLLOW;
  const int pfd = sys::open_resolved(AT_FDCWD, path.c_str(), O_PATH | nofollow, options.resolve);
  if (pfd < 0) return tree_errno(errno, "copy", path);
  struct stat s;
  if (sys::stat_at(pfd, "", &s, AT_EMPTY_PATH) != 0) {
    const int e = errno;
    ::close(pfd);
    return tree_errno(e, "copy", path);
  }
  TreeStatus st;
  if (S_ISDIR(s.st_mode)) {
    Dir d;
    d.fd = sys::open_resolved(pfd, ".", O_RDONLY | O_DIRECTORY, 0);
    if (d.fd < 0) st = tree_errno(errno, "copy", path);
    if (st.ok()) st = list(&d);
    if (st.ok()) {
      root_entry_ = base_entry(s, "");
      root_entry_.kind = proto::TreeKind::kDir;
      stack_.push_back(std::move(d));
    } else if (d.fd >= 0) {
      ::close(d.fd);
    }
  } else if (S_ISREG(s.st_mode) || S_ISLNK(s.st_mode) || S_ISFIFO(s.st_mode)) {
    // A lone file: its own directory is not copied, so it is read through the O_PATH descriptor's parent
    // only for a link; a file is reopened for reading (the same inode, checked).
    if (S_ISREG(s.st_mode)) {
      file_fd_ = sys::open_resolved(AT_FDCWD, path.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | nofollow, options.resolve);
      struct stat again;
      if (file_fd_ < 0) {
        st = tree_errno(errno, "copy", path);
      } else if (::fstat(file_fd_, &again) != 0 || again.st_ino != s.st_ino || again.st_dev != s.st_dev) {
        st = tree_error(SANDLET_ABORTED, 0, "copy \"" + path + "\": replaced while being opened");
      }
    }
    if (st.ok() && !entry_for(pfd, "", s, "", &root_entry_, &st) && st.ok())
      st = tree_error(SANDLET_FAILED_PRECONDITION, 0, "copy \"" + path + "\": not a file, directory or link");
  } else {
    st = tree_error(SANDLET_FAILED_PRECONDITION, 0,
                    "copy \"" + path + "\": a socket or device node, which a copy does not carry");
  }
  ::close(pfd);
  if (!st.ok()) {
    close_all();
    return st;
  }
  root_pending_ = true;
  return st;
}

TreeStatus TreeWalker::list(Dir* d) {
  alignas(8) char buf[16384];
  for (;;) {
    const long n = sys::getdents(d->fd, buf, sizeof buf);
    if (n < 0) return tree_errno(errno, "copy", tree_join(root_, d->rel));
    if (n == 0) break;
    for (long off = 0; off < n;) {
      const auto* de = reinterpret_cast<const Dirent64*>(buf + off);
      off += de->reclen;
      const std::string name(de->name);
      if (name != "." && name != "..") d->names.push_back(name);
    }
  }
  std::sort(d->names.begin(), d->names.end());
  return {};
}

// Fills the entry for a non-directory. `name` is relative to `dirfd` ("" with AT_EMPTY_PATH semantics for
// the root's own O_PATH descriptor). A regular file's data is then read from file_fd_, opened by the caller.
bool TreeWalker::entry_for(int dirfd, const char* name, const struct stat& s, const std::string& rel,
                           proto::TreeEntry* out, TreeStatus* st) {
  *out = base_entry(s, rel);
  if (S_ISLNK(s.st_mode)) {
    char target[proto::kMaxTreePath + 1];
    const long n = sys::read_link_at(dirfd, name, target, sizeof target);
    if (n < 0) {
      *st = tree_errno(errno, "copy", tree_join(root_, rel));
      return false;
    }
    if (n == 0 || static_cast<size_t>(n) > proto::kMaxTreePath) {
      *st = tree_error(SANDLET_OUT_OF_RANGE, ENAMETOOLONG, "copy \"" + tree_join(root_, rel) + "\": link target too long");
      return false;
    }
    out->kind = proto::TreeKind::kSymlink;
    out->link.assign(target, static_cast<size_t>(n));
    out->mode = 0777;
    return true;
  }
  if (S_ISFIFO(s.st_mode)) {
    out->kind = proto::TreeKind::kFifo;
    return true;
  }
  if (!S_ISREG(s.st_mode)) return false;
  if (s.st_nlink > 1) {
    std::string key = link_key(s);
    if (const std::string* first = links_.find(key)) {
      if (file_fd_ >= 0) ::close(file_fd_);
      file_fd_ = -1;
      out->kind = proto::TreeKind::kHardlink;
      out->link = *first;
      return true;
    }
    if (!rel.empty()) links_.insert(std::move(key), rel);
  }
  const uint64_t size = static_cast<uint64_t>(s.st_size);
  if (size > options_.max_bytes - bytes_) {
    *st = tree_error(SANDLET_OUT_OF_RANGE, EFBIG,
                     "copy \"" + root_ + "\": more than the limit of " + std::to_string(options_.max_bytes) +
                         " bytes of file data");
    return false;
  }
  out->kind = proto::TreeKind::kFile;
  out->size = size;
  file_left_ = size;
  file_rel_ = rel;
  return true;
}

bool TreeWalker::visit(Dir& dir, const std::string& name, const std::string& rel, proto::TreeEntry* out,
                       TreeStatus* st) {
  struct stat s;
  if (sys::stat_at(dir.fd, name.c_str(), &s) != 0) {
    if (errno == ENOENT) return false;  // gone since the listing: nothing to copy
    *st = tree_errno(errno, "copy", tree_join(root_, rel));
    return false;
  }
  if (rel.size() > proto::kMaxTreePath) {
    *st = tree_error(SANDLET_OUT_OF_RANGE, ENAMETOOLONG, "copy \"" + tree_join(root_, rel) + "\": path too long");
    return false;
  }
  if (S_ISDIR(s.st_mode)) {
    if (stack_.size() >= kMaxDepth) {
      *st = tree_error(SANDLET_OUT_OF_RANGE, 0, "copy \"" + tree_join(root_, rel) + "\": deeper than " +
                                                    std::to_string(kMaxDepth) + " directories");
      return false;
    }
    Dir d;
    d.rel = rel;
    d.fd = sys::open_resolved(dir.fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW, 0);
    if (d.fd < 0) {
      if (errno == ENOENT) return false;
      *st = tree_errno(errno, "copy", tree_join(root_, rel));
      return false;
    }
    *st = list(&d);
    if (!st->ok()) {
      ::close(d.fd);
      return false;
    }
    *out = base_entry(s, rel);
    out->kind = proto::TreeKind::kDir;
    stack_.push_back(std::move(d));
    return true;
  }
  if (S_ISREG(s.st_mode) && !(s.st_nlink > 1 && links_.find(link_key(s)))) {
    file_fd_ = sys::open_resolved(dir.fd, name.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_NOFOLLOW, 0);
    if (file_fd_ < 0) {
      if (errno == ENOENT) return false;
      *st = tree_errno(errno, "copy", tree_join(root_, rel));
      return false;
    }
    if (::fstat(file_fd_, &s) != 0 || !S_ISREG(s.st_mode)) {  // what was opened is what is described
      *st = tree_error(SANDLET_ABORTED, 0, "copy \"" + tree_join(root_, rel) + "\": replaced while being opened");
      return false;
    }
  }
  if (!entry_for(dir.fd, name.c_str(), s, rel, out, st)) {
    if (st->ok()) ++skipped_;
    return false;
  }
  return true;
}

bool TreeWalker::next(proto::TreeEntry* out, TreeStatus* st) {
  *st = {};
  if (root_pending_) {  // (a lone file's data is read after its entry: file_left_ is already set)
    root_pending_ = false;
    *out = root_entry_;
    ++entries_;
    return true;
  }
  if (file_left_ > 0 || file_fd_ >= 0) {
    if (file_left_ > 0) {
      *st = tree_error(SANDLET_INTERNAL, 0, "copy \"" + tree_join(root_, file_rel_) + "\": data not read");
      return false;
    }
    ::close(file_fd_);
    file_fd_ = -1;
  }
  while (!stack_.empty()) {
    Dir& d = stack_.back();
    if (d.next == d.names.size()) {
      ::close(d.fd);
      stack_.pop_back();
      continue;
    }
    const std::string name = d.names[d.next++];
    const std::string rel = d.rel.empty() ? name : d.rel + "/" + name;
    if (visit(d, name, rel, out, st)) {  // (may push onto stack_: `d` is not used after)
      ++entries_;
      return true;
    }
    if (!st->ok()) return false;
  }
  return false;
}

long TreeWalker::read(char* buf, size_t n, TreeStatus* st) {
  if (file_left_ == 0) return 0;
  const size_t want = n < file_left_ ? n : static_cast<size_t>(file_left_);
  for (;;) {
    const ssize_t got = ::read(file_fd_, buf, want);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      *st = tree_errno(errno, "copy", tree_join(root_, file_rel_));
      return -1;
    }
    if (got == 0) {
      *st = tree_error(SANDLET_ABORTED, 0, "copy \"" + tree_join(root_, file_rel_) + "\": the file shrank while being copied");
      return -1;
    }
    file_left_ -= static_cast<uint64_t>(got);
    bytes_ += static_cast<uint64_t>(got);
    return got;
  }
}

}  // namespace sandlet::tree
