// Layer export: a layer's tree, read from its node-wide mount, written as a pax tar behind a global header
// with its manifest fields (image/export_header.hpp). Never follows symlinks; hard links stay links.
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <vector>

#include "common/error.hpp"
#include "image/byte_writer.hpp"
#include "image/export_header.hpp"
#include "image/layer_store.hpp"
#include "image/tar_writer.hpp"
#include "image/xattrs.hpp"
#include "sys/fd.hpp"
#include "sys/fs_util.hpp"

namespace sandlet::image {

namespace {

constexpr size_t kReadChunk = 1 << 20;
constexpr int kDefaultZstdLevel = 3;

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::vector<std::string> sorted_names(int dirfd, const std::string& shown) {
  sys::UniqueFd iter(::openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!iter) throw_errno("open " + shown);
  DIR* d = ::fdopendir(iter.get());
  if (!d) throw_errno("opendir " + shown);
  iter.release();
  std::vector<std::string> names;
  errno = 0;
  while (dirent* e = ::readdir(d)) {
    std::string n = e->d_name;
    if (n != "." && n != "..") names.push_back(std::move(n));
  }
  int err = errno;
  ::closedir(d);
  if (err) throw_errno("read directory " + shown, err);
  std::sort(names.begin(), names.end());  // byte order, as the importers and the digest walk
  return names;
}

TarMember member_of(const std::string& rel, const struct stat& st) {
  TarMember m;
  m.path = rel;
  m.mode = st.st_mode & 07777;
  m.uid = st.st_uid;
  m.gid = st.st_gid;
  m.mtime_sec = st.st_mtim.tv_sec;
  m.mtime_nsec = static_cast<uint32_t>(st.st_mtim.tv_nsec);
  return m;
}

struct Exporter {
  TarWriter& tar;
  const ExportOptions& options;
  ImportProgress progress;
  std::map<std::pair<dev_t, ino_t>, std::string> first_path;  // hard links
  std::vector<char> buf = std::vector<char>(kReadChunk);

  void tick() {
    ++progress.files;
    if (options.progress && progress.files % 256 == 0) options.progress(progress);
  }

  void file_data(int fd, uint64_t size, const std::string& shown) {
    uint64_t done = 0;
    while (done < size) {
      ssize_t r = ::read(fd, buf.data(), static_cast<size_t>(std::min<uint64_t>(buf.size(), size - done)));
      if (r < 0) {
        if (errno == EINTR) continue;
        throw_errno("read " + shown);
      }
      if (r == 0) throw Error(Code::kDataLoss, "export: " + shown + " ends before its size");
      tar.data(buf.data(), static_cast<size_t>(r));
      done += static_cast<uint64_t>(r);
      progress.bytes += static_cast<uint64_t>(r);
    }
  }

  // The entries of the directory open at `dirfd` (`rel`: its path in the layer, "" = root).
  void walk(int dirfd, const std::string& rel, const std::string& shown) {
    for (const auto& name : sorted_names(dirfd, shown)) {
      const std::string child = rel.empty() ? name : rel + "/" + name;
      const std::string child_shown = shown + "/" + name;
      struct stat st;
      if (::fstatat(dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) throw_errno("stat " + child_shown);
      TarMember m = member_of(child, st);
      if (!S_ISDIR(st.st_mode) && st.st_nlink > 1) {
        auto [it, fresh] = first_path.emplace(std::make_pair(st.st_dev, st.st_ino), child);
        if (!fresh) {
          m.type = '1';
          m.link = it->second;
          tar.begin(m);
          tick();
          continue;
        }
      }
      sys::UniqueFd fd;
      if (S_ISREG(st.st_mode) || S_ISDIR(st.st_mode)) {
        fd.reset(::openat(dirfd, name.c_str(),
                          O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | (S_ISDIR(st.st_mode) ? O_DIRECTORY : 0)));
        if (!fd) throw_errno("open " + child_shown);
        m.xattrs = fd_xattrs(fd.get(), child_shown);
      } else {
        m.xattrs = path_xattrs("/proc/self/fd/" + std::to_string(dirfd) + "/" + name, child_shown);
      }
      switch (st.st_mode & S_IFMT) {
        case S_IFREG: m.type = '0', m.size = static_cast<uint64_t>(st.st_size); break;
        case S_IFDIR: m.type = '5'; break;
        case S_IFCHR: case S_IFBLK:
          m.type = S_ISCHR(st.st_mode) ? '3' : '4';
          m.dev_major = major(st.st_rdev), m.dev_minor = minor(st.st_rdev);
          break;
        case S_IFIFO: m.type = '6'; break;
        case S_IFSOCK: m.type = '6', m.records.emplace_back("SANDLET.type", "socket"); break;
        case S_IFLNK: {
          std::string target(static_cast<size_t>(st.st_size) + 1, '\0');
          ssize_t len = ::readlinkat(dirfd, name.c_str(), target.data(), target.size());
          if (len < 0) throw_errno("readlink " + child_shown);
          target.resize(static_cast<size_t>(len));
          m.type = '2', m.link = std::move(target);
          break;
        }
        default: throw Error(Code::kInvalidArgument, "export: " + child_shown + " has an unknown file type");
      }
      tar.begin(m);
      if (S_ISREG(st.st_mode)) file_data(fd.get(), m.size, child_shown);
      tick();
      if (S_ISDIR(st.st_mode)) walk(fd.get(), child, child_shown);
    }
  }
};

}  // namespace

ExportResult LayerStore::export_layer(const std::string& ref, const std::string& path, const ExportOptions& options,
                                      const std::function<std::string(const std::string&)>& mounted_dir) const {
  LayerInfo layer = inspect(ref);
  if (path.empty()) throw Error(Code::kInvalidArgument, "export " + ref + ": no output path given");
  ExportResult result;
  result.digest = layer.digest;
  result.path = path;
  result.compressed = ends_with(path, ".zst");
  const int level = result.compressed ? (options.zstd_level ? options.zstd_level : kDefaultZstdLevel) : 0;
  const std::string dir = mounted_dir(layer.digest);

  std::string tmp;
  sys::UniqueFd out;
  for (int attempt = 0; attempt < 8 && !out; ++attempt) {
    tmp = path + ".tmp-" + sys::random_hex(4);
    out.reset(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
    if (!out && errno != EEXIST) throw_errno("export layer " + layer.digest + ": create " + tmp);
  }
  if (!out) throw_errno("export layer " + layer.digest + ": create " + tmp);
  struct RemoveTmp {
    std::string path;
    bool keep = false;
    ~RemoveTmp() {
      if (!keep) ::unlink(path.c_str());
    }
  } remove_tmp{tmp};

  sys::UniqueFd root(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!root) throw_errno("export layer " + layer.digest + ": open its mount " + dir);
  struct stat st;
  if (::fstat(root.get(), &st) != 0) throw_errno("stat " + dir);

  auto writer = open_writer_fd(out.get(), tmp, level);
  TarWriter tar(*writer, tmp);
  tar.global_header(export_header_records(layer));
  Exporter ex{tar, options, {}, {}};
  ex.progress.total_bytes = layer.size;
  TarMember top = member_of("", st);
  top.type = '5';
  top.xattrs = fd_xattrs(root.get(), dir);
  tar.begin(top);
  ex.tick();
  ex.walk(root.get(), "", dir);
  tar.finish();
  if (options.progress) options.progress(ex.progress);
  if (::fsync(out.get()) != 0) throw_errno("export layer " + layer.digest + ": fsync " + tmp);
  result.bytes = writer->output_bytes();
  result.files = tar.members();
  out.reset();
  if (::rename(tmp.c_str(), path.c_str()) != 0) throw_errno("export layer " + layer.digest + ": rename " + tmp + " to " + path);
  remove_tmp.keep = true;
  return result;
}

}  // namespace sandlet::image
