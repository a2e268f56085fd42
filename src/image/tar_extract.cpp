#include "image/tar_extract.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <memory>

#include "common/error.hpp"
#include "image/byte_reader.hpp"
#include "image/tar_reader.hpp"
#include "sys/fd.hpp"
#include "sys/fs_util.hpp"

namespace sandlet::image {

namespace {

// Opens (creating when missing) the directory `name` under `parent`, never through a symlink.
sys::UniqueFd open_or_make_dir(int parent, const std::string& name, const std::string& path_for_errors) {
  if (::mkdirat(parent, name.c_str(), 0755) == 0) {
    sys::UniqueFd fd(::openat(parent, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!fd) throw_errno("open " + path_for_errors);
    if (::fchmod(fd.get(), 0755) != 0) throw_errno("chmod " + path_for_errors);  // regardless of the umask
    return fd;
  }
  if (errno != EEXIST) throw_errno("mkdir " + path_for_errors);
  sys::UniqueFd fd(::openat(parent, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd && (errno == ENOTDIR || errno == ELOOP))
    throw Error(Code::kInvalidArgument, path_for_errors + ": exists and is not a directory (symlinks are not followed)");
  if (!fd) throw_errno("open " + path_for_errors);
  return fd;
}

void write_all(int fd, const char* p, size_t n, const std::string& path) {
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) throw_errno("write " + path);
    p += w;
    n -= static_cast<size_t>(w);
  }
}

}  // namespace

void extract_tar_to_dir(const std::string& tar_path, const std::string& dest_dir) {
  sys::mkdir_p(dest_dir, 0755);
  sys::UniqueFd root(::open(dest_dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!root) throw_errno("open " + dest_dir);

  auto in = open_decompressing(tar_path);
  TarReader tar(*in, tar_path);
  constexpr size_t kBuf = 1 << 20;
  std::unique_ptr<char[]> buf(new char[kBuf]);
  TarEntry e;
  while (tar.next(e)) {
    if (e.type != TarEntry::Type::kFile && e.type != TarEntry::Type::kDir)
      throw Error(Code::kInvalidArgument, tar_path + ": tar member '" + e.path +
                                              "': only regular files and directories are expected in a docker save "
                                              "archive (links and devices are refused)");
    if (e.path.empty()) continue;  // the root: dest_dir itself

    // Walk the parents one component at a time (the path is normalized: no "", "." or "..").
    sys::UniqueFd dir(::dup(root.get()));
    if (!dir) throw_errno("dup " + dest_dir);
    std::string done = dest_dir;
    size_t start = 0;
    for (size_t slash; (slash = e.path.find('/', start)) != std::string::npos; start = slash + 1) {
      std::string comp = e.path.substr(start, slash - start);
      done += "/" + comp;
      dir = open_or_make_dir(dir.get(), comp, done);
    }
    std::string leaf = e.path.substr(start);
    std::string full = dest_dir + "/" + e.path;

    if (e.type == TarEntry::Type::kDir) {
      open_or_make_dir(dir.get(), leaf, full);
      continue;
    }
    sys::UniqueFd out(::openat(dir.get(), leaf.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644));
    if (!out && errno == ELOOP)
      throw Error(Code::kInvalidArgument, full + ": exists and is a symlink (symlinks are not followed)");
    if (!out) throw_errno("create " + full);
    if (::fchmod(out.get(), 0644) != 0) throw_errno("chmod " + full);
    for (size_t n; (n = tar.read_data(buf.get(), kBuf)) > 0;) write_all(out.get(), buf.get(), n, full);
  }
}

}  // namespace sandlet::image
