// The pack walk: depth-first over the upper directory with *at() calls on directory descriptors, building the
// staging tree beside it in the same order. See pack.hpp.
#include "snapshot/pack.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <set>
#include <unordered_map>

#include "common/error.hpp"
#include "image/xattrs.hpp"
#include "snapshot/pack_xattrs.hpp"
#include "sys/fd.hpp"

namespace sandlet::snapshot {
namespace {

constexpr size_t kMaxPath = 4000;
constexpr uint64_t kMaxEntries = 4u << 20;
constexpr uint64_t kMaxPathBytes = 128u << 20;  // all paths of one walk: bounds the host's memory
// tmpfs stamps change times from a coarse clock: a change within the same tick as the one a walk saw leaves
// the time as it was. A file whose change time is this close to a look at it may have changed unseen since
// (two ticks, and at least 10 ms).
int64_t recent_ns() {
  static const int64_t window = [] {
    struct timespec res {};
    int64_t tick = clock_getres(CLOCK_REALTIME_COARSE, &res) == 0 ? res.tv_sec * 1'000'000'000 + res.tv_nsec : 10'000'000;
    return std::max<int64_t>(2 * tick, 10'000'000);
  }();
  return window;
}

int64_t ns_of(const struct timespec& t) { return static_cast<int64_t>(t.tv_sec) * 1'000'000'000 + t.tv_nsec; }
int64_t wall_ns() {
  struct timespec t;
  clock_gettime(CLOCK_REALTIME, &t);
  return ns_of(t);
}

std::vector<std::string> read_names(int dir, const std::string& shown) {
  int dup = ::fcntl(dir, F_DUPFD_CLOEXEC, 0);
  if (dup < 0) throw_errno("snapshot: dup " + shown);
  DIR* d = ::fdopendir(dup);
  if (!d) {
    ::close(dup);
    throw_errno("snapshot: read directory " + shown);
  }
  rewinddir(d);  // the offset is shared with `dir`, which an earlier pass may have read to its end
  std::vector<std::string> names;
  errno = 0;
  while (struct dirent* e = ::readdir(d)) {
    if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) names.emplace_back(e->d_name);
  }
  int err = errno;
  ::closedir(d);
  if (err) throw Error(Code::kInternal, "snapshot: read directory " + shown, err);
  std::sort(names.begin(), names.end());
  // A directory renamed into while it is read may show a name twice.
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

class Walk final {
 public:
  Walk(const PackOptions& o, int reuse_dir, const CopyIndex* reuse)
      : o_(o), reuse_dir_(reuse_dir), reuse_(reuse), started_ns_(wall_ns()) {}

  PassResult run(int upper, int out) {
    struct stat st;
    if (::fstat(upper, &st) != 0) throw_errno("snapshot: stat the writable layer");
    apply_meta(out, st, image::fd_xattrs(upper, "/"), true, "/");
    dirs_.push_back({"", st});
    walk_dir(upper, out, "");
    if (!running_pass()) add_whiteouts(out);
    // Directory times last: making their entries changed them.
    for (auto it = dirs_.rbegin(); it != dirs_.rend(); ++it) set_times(out, it->rel.empty() ? "." : it->rel.c_str(), it->st, 0);
    return std::move(result_);
  }

 private:
  struct MadeDir {
    std::string rel;
    struct stat st;
  };

  bool excluded(const std::string& path) const {
    for (const auto& p : o_.exclude)
      if (::fnmatch(p.c_str(), path.c_str(), FNM_PATHNAME) == 0) return true;
    return false;
  }
  uint32_t uid(uint32_t host) const { return inside_id(host, o_.id_base, o_.id_count); }
  // An excluded path: this snapshot records no change there, so what the previous one knew of it (and below
  // it) stays known: a later snapshot that includes it still whites out what went.
  void carry_previous(const std::string& path) {
    if (!o_.previous || running_pass()) return;
    const auto& prev = o_.previous->entries;
    for (auto it = prev.lower_bound(path); it != prev.end(); ++it) {
      if (it->first != path && it->first.compare(0, path.size() + 1, path + "/") != 0) break;
      result_.manifest.entries.insert(*it);
      seen_.insert(it->first);
    }
  }
  bool running_pass() const { return reuse_ == nullptr; }

  void apply_meta(int fd, const struct stat& st, const Xattrs& xattrs, bool keep_opaque, const std::string& shown) {
    if (::fchown(fd, uid(st.st_uid), uid(st.st_gid)) != 0) throw_errno("snapshot: chown staged " + shown);
    if (::fchmod(fd, st.st_mode & 07777) != 0) throw_errno("snapshot: chmod staged " + shown);
    for (const auto& [k, v] : pack_xattrs(xattrs, keep_opaque, o_.id_base, o_.id_count, shown))
      if (::fsetxattr(fd, k.c_str(), v.data(), v.size(), 0) != 0) throw_errno("snapshot: set xattr " + k + " on " + shown);
  }
  static void set_times(int dir, const char* name, const struct stat& st, int flags) {
    struct timespec t[2] = {st.st_atim, st.st_mtim};
    (void)::utimensat(dir, name, t, flags);
  }

  // Whether `path` is as the previous snapshot saw it (incremental: then it is not packed).
  bool unchanged(const std::string& path, const struct stat& st) const {
    if (!o_.previous) return false;
    auto it = o_.previous->entries.find(path);
    return it != o_.previous->entries.end() && it->second == stamp(st);
  }
  EntryStamp stamp(const struct stat& st) const {
    EntryStamp s{static_cast<uint64_t>(st.st_ino), ns_of(st.st_ctim), ns_of(st.st_mtim),
                 static_cast<uint64_t>(st.st_size), static_cast<uint32_t>(st.st_mode)};
    // Changed within a tick of the coarse clock before this walk, or written through a shared mapping (no
    // time stamp changes): a later change could look like none, so the next snapshot packs it again.
    if (s.ctime_ns + recent_ns() >= started_ns_ || mapped(st)) s.ctime_ns = 0;
    return s;
  }
  bool mapped(const struct stat& st) const {
    return S_ISREG(st.st_mode) && o_.mapped_shared_writable.count(static_cast<uint64_t>(st.st_ino)) != 0;
  }

  // Parents of a packed entry exist in the staging tree: made on demand (an unchanged directory is packed only
  // when something below it is). `made` marks which of the walk's open directories have been.
  void ensure_parents(int out) {
    for (auto& open : open_) {
      if (open.made) continue;
      if (::mkdirat(out, open.rel.c_str(), 0700) != 0) throw_errno("snapshot: make staged " + open.rel);
      sys::UniqueFd d(::openat(out, open.rel.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (!d) throw_errno("snapshot: open staged " + open.rel);
      apply_meta(d.get(), open.st, open.xattrs, open.keep_opaque, open.rel);
      dirs_.push_back({open.rel, open.st});
      open.made = true;
    }
  }

  void walk_dir(int dir, int out, const std::string& rel) {
    for (const std::string& name : read_names(dir, rel.empty() ? "/" : rel)) {
      std::string child = rel.empty() ? name : rel + "/" + name;
      std::string path = "/" + child;
      if (path.size() > kMaxPath)
        throw Error(Code::kFailedPrecondition, "snapshot: a path longer than 4000 bytes under " + path.substr(0, 200));
      if ((path_bytes_ += path.size()) > kMaxPathBytes)
        throw Error(Code::kFailedPrecondition, "snapshot: the writable layer holds more than 128 MiB of paths");
      if (excluded(path)) {
        carry_previous(path);
        continue;
      }
      struct stat st;
      if (::fstatat(dir, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
        if (errno == ENOENT) continue;  // removed meanwhile (first pass)
        throw_errno("snapshot: stat " + path);
      }
      if (++result_.entries > kMaxEntries) throw Error(Code::kFailedPrecondition, "snapshot: more than 4 Mi entries");
      const bool same = unchanged(path, st);
      // What the next snapshot compares with: the frozen pass's view (the first one's is already stale).
      if (!running_pass()) {
        seen_.insert(path);
        if (!S_ISSOCK(st.st_mode)) result_.manifest.entries[path] = stamp(st);
      }
      if (S_ISDIR(st.st_mode)) {
        sys::UniqueFd sub(::openat(dir, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
        if (!sub) {
          if (errno == ENOENT || errno == ENOTDIR) continue;
          throw_errno("snapshot: open " + path);
        }
        // Opaque stays opaque only where this directory is new since the previous snapshot: one the previous
        // snapshot already holds must not hide what it holds.
        auto before = o_.previous ? o_.previous->entries.find(path) : std::map<std::string, EntryStamp>::const_iterator();
        const bool held_before = o_.previous && before != o_.previous->entries.end();
        const bool new_dir = !held_before || before->second.ino != static_cast<uint64_t>(st.st_ino);
        Xattrs xattrs = image::fd_xattrs(sub.get(), path);
        // What the previous snapshot held at this path was removed and this directory made since: it hides
        // that, as OverlayFS marks such a directory only when a lower layer of the sandbox had the path.
        if (held_before && new_dir &&
            std::none_of(xattrs.begin(), xattrs.end(), [](const auto& x) { return x.first == "trusted.overlay.opaque"; }))
          xattrs.emplace_back("trusted.overlay.opaque", "y");
        open_.push_back({child, st, std::move(xattrs), new_dir, false});
        if (o_.previous && !running_pass()) dir_info_[child] = {st, open_.back().xattrs};
        if (!same) ensure_parents(out);
        walk_dir(sub.get(), out, child);
        open_.pop_back();
        continue;
      }
      if (same) continue;
      ensure_parents(out);
      pack_entry(dir, out, name, child, path, st);
    }
  }

  void pack_entry(int dir, int out, const std::string& name, const std::string& child, const std::string& path,
                  const struct stat& st) {
    if (S_ISREG(st.st_mode) && static_cast<uint64_t>(st.st_size) > o_.max_file_size)
      throw Error(Code::kFailedPrecondition, "snapshot: " + path + " is " + std::to_string(st.st_size) +
                                                 " bytes long (sparse), more than the sandbox's disk: exclude it");
    if (S_ISREG(st.st_mode) && st.st_nlink > 1) {
      auto it = links_.find(st.st_ino);
      if (it != links_.end()) {
        if (::linkat(out, it->second.c_str(), out, child.c_str(), 0) == 0) return;
        if (!running_pass()) throw_errno("snapshot: link " + path);
      }
    }
    if (S_ISREG(st.st_mode)) {
      if (!pack_file(dir, out, name, child, path, st)) return;
      if (st.st_nlink > 1) links_[st.st_ino] = child;
      return;
    }
    if (S_ISLNK(st.st_mode)) {
      std::string target(4097, '\0');
      ssize_t n = ::readlinkat(dir, name.c_str(), target.data(), target.size());
      if (n < 0 && running_pass() && (errno == ENOENT || errno == EINVAL)) return;
      if (n < 0) throw_errno("snapshot: read link " + path);
      if (static_cast<size_t>(n) >= target.size()) throw Error(Code::kFailedPrecondition, "snapshot: link target over 4096 bytes: " + path);
      target.resize(static_cast<size_t>(n));
      if (::symlinkat(target.c_str(), out, child.c_str()) != 0) throw_errno("snapshot: make link " + path);
    } else if (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) || S_ISFIFO(st.st_mode)) {
      // Character devices are mostly whiteouts (0/0): OverlayFS's record of a deletion.
      if (::mknodat(out, child.c_str(), st.st_mode & (S_IFMT | 0777), st.st_rdev) != 0) throw_errno("snapshot: make " + path);
    } else {
      return;  // sockets: nothing to restore
    }
    if (::fchownat(out, child.c_str(), uid(st.st_uid), uid(st.st_gid), AT_SYMLINK_NOFOLLOW) != 0)
      throw_errno("snapshot: chown staged " + path);
    if (!S_ISLNK(st.st_mode) && ::fchmodat(out, child.c_str(), st.st_mode & 07777, 0) != 0)
      throw_errno("snapshot: chmod staged " + path);
    set_times(out, child.c_str(), st, AT_SYMLINK_NOFOLLOW);
  }

  // False when the first pass skipped the file (it went or changed meanwhile).
  bool pack_file(int dir, int out, const std::string& name, const std::string& child, const std::string& path,
                 const struct stat& st) {
    if (reuse_ && !o_.mapped_shared_writable.count(static_cast<uint64_t>(st.st_ino))) {
      auto it = reuse_->find(path);
      if (it != reuse_->end() && it->second.ino == static_cast<uint64_t>(st.st_ino) &&
          it->second.ctime_ns == ns_of(st.st_ctim) && it->second.size == static_cast<uint64_t>(st.st_size) &&
          ns_of(st.st_ctim) + recent_ns() < it->second.copied_at_ns &&
          ::linkat(reuse_dir_, child.c_str(), out, child.c_str(), 0) == 0) {
        ++result_.reused;
        result_.bytes += static_cast<uint64_t>(st.st_size);
        return true;
      }
    }
    const int64_t began = wall_ns();
    // O_NONBLOCK: what was a file at the stat may be a fifo by now (first pass).
    sys::UniqueFd in(::openat(dir, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOATIME | O_CLOEXEC));
    // While the sandbox runs (first pass), an entry may go or be replaced between the stat and the open:
    // the frozen pass packs whatever is there then.
    if (!in) {
      if (running_pass() && (errno == ENOENT || errno == ELOOP || errno == ENXIO)) return false;
      throw_errno("snapshot: open " + path);
    }
    struct stat now;
    if (::fstat(in.get(), &now) != 0) throw_errno("snapshot: stat " + path);
    if (!S_ISREG(now.st_mode) || now.st_ino != st.st_ino) {
      if (running_pass()) return false;
      throw Error(Code::kAborted, "snapshot: " + path + " was replaced while packing");
    }
    sys::UniqueFd o(::openat(out, child.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (!o) {
      if (running_pass() && errno == EEXIST) return false;
      throw_errno("snapshot: make staged " + path);
    }
    copy_data(in.get(), o.get(), static_cast<uint64_t>(st.st_size), path);
    apply_meta(o.get(), st, image::fd_xattrs(in.get(), path), false, path);
    struct timespec t[2] = {st.st_atim, st.st_mtim};
    (void)::futimens(o.get(), t);
    result_.bytes += static_cast<uint64_t>(st.st_size);
    result_.copied[path] = {static_cast<uint64_t>(st.st_ino), ns_of(st.st_ctim), static_cast<uint64_t>(st.st_size), began};
    return true;
  }

  // Data ranges only (holes stay holes), in the kernel; at most `size` bytes (the file may grow meanwhile).
  static void copy_data(int in, int out, uint64_t size, const std::string& path) {
    off_t pos = 0;
    const off_t end = static_cast<off_t>(size);
    while (pos < end) {
      off_t data = ::lseek(in, pos, SEEK_DATA);
      if (data < 0) {
        if (errno == ENXIO) break;
        throw_errno("snapshot: seek " + path);
      }
      if (data >= end) break;
      off_t hole = ::lseek(in, data, SEEK_HOLE);
      if (hole < 0) throw_errno("snapshot: seek " + path);
      hole = std::min(hole, end);
      if (::lseek(out, data, SEEK_SET) < 0) throw_errno("snapshot: seek staged " + path);
      off_t at = data;
      while (at < hole) {
        ssize_t n = ::sendfile(out, in, &at, static_cast<size_t>(std::min<off_t>(hole - at, 1 << 30)));
        if (n < 0) {
          if (errno == EINTR) continue;
          throw_errno("snapshot: copy " + path);
        }
        if (n == 0) break;  // shrunk meanwhile
      }
      pos = hole;
    }
    if (::ftruncate(out, end) != 0) throw_errno("snapshot: size staged " + path);
  }

  // Incremental: a path the previous snapshot held that the upper no longer has is deleted for a restore too
  // (a file made and removed since never left a whiteout in the upper). Only the topmost such path, and only
  // where its parent is still there and not a directory made anew (opaque, or new: it hides the old one).
  void add_whiteouts(int out) {
    if (!o_.previous) return;
    std::string gone_prefix;
    for (const auto& [path, st] : o_.previous->entries) {
      if (seen_.count(path)) continue;
      if (!gone_prefix.empty() && path.rfind(gone_prefix, 0) == 0) continue;
      gone_prefix = path + "/";
      if (excluded(path)) {
        carry_previous(path);  // not this snapshot's to record: a later one still whites it out
        continue;
      }
      std::string parent = path.substr(0, path.rfind('/'));
      if (!parent.empty()) {
        auto now = result_.manifest.entries.find(parent);
        auto before = o_.previous->entries.find(parent);
        if (now == result_.manifest.entries.end() || before == o_.previous->entries.end() || now->second.ino != before->second.ino)
          continue;
      }
      std::string rel = path.substr(1);
      if (!make_parents_for(out, rel)) continue;
      if (::mknodat(out, rel.c_str(), S_IFCHR | 0, makedev(0, 0)) != 0 && errno != EEXIST)
        throw_errno("snapshot: whiteout " + path);
      ++result_.entries;
    }
  }
  bool make_parents_for(int out, const std::string& rel) {
    for (size_t at = rel.find('/'); at != std::string::npos; at = rel.find('/', at + 1)) {
      std::string dir = rel.substr(0, at);
      struct stat st;
      if (::fstatat(out, dir.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) continue;
      auto it = dir_info_.find(dir);
      if (it == dir_info_.end()) return false;
      if (::mkdirat(out, dir.c_str(), 0700) != 0) throw_errno("snapshot: make staged " + dir);
      sys::UniqueFd d(::openat(out, dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (!d) throw_errno("snapshot: open staged " + dir);
      apply_meta(d.get(), it->second.first, it->second.second, false, dir);
      dirs_.push_back({dir, it->second.first});
    }
    return true;
  }

  const PackOptions& o_;
  const int reuse_dir_;
  const CopyIndex* reuse_;
  const int64_t started_ns_;
  uint64_t path_bytes_ = 0;
  struct OpenDir {
    std::string rel;
    struct stat st;
    Xattrs xattrs;
    bool keep_opaque;
    bool made;
  };
  std::vector<OpenDir> open_;
  std::vector<MadeDir> dirs_;
  std::unordered_map<ino_t, std::string> links_;
  std::set<std::string> seen_;
  std::map<std::string, std::pair<struct stat, Xattrs>> dir_info_;  // incremental: directories, for whiteouts' parents
  PassResult result_;
};

}  // namespace

PassResult pack_pass(int upper_dir, int out_dir, const PackOptions& options, int reuse_dir, const CopyIndex* reuse) {
  return Walk(options, reuse_dir, reuse).run(upper_dir, out_dir);
}

void check_excludes(const std::vector<std::string>& patterns, const std::string& field) {
  if (patterns.size() > 256) throw Error(Code::kInvalidArgument, "invalid " + field + ": more than 256 paths");
  for (const auto& p : patterns) {
    auto bad = [&](const char* why) {
      return Error(Code::kInvalidArgument, "invalid " + field + " '" + p.substr(0, 200) + "': " + why);
    };
    if (p.empty() || p[0] != '/') throw bad("must be an absolute path inside the sandbox");
    if (p.size() > 4096) throw bad("longer than 4096 bytes");
    if (p.find('\0') != std::string::npos) throw bad("contains NUL");
    if (p == "/") throw bad("would exclude everything");
    if (("/" + p + "/").find("/../") != std::string::npos) throw bad("may not contain '..'");
  }
}

}  // namespace sandlet::snapshot
