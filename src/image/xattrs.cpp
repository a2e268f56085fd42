#include "image/xattrs.hpp"

#include <sys/xattr.h>

#include <algorithm>
#include <cerrno>

#include "common/error.hpp"

namespace sandlet::image {

namespace {

// All xattrs of one file: `list`/`get` wrap llistxattr/lgetxattr on a path or flistxattr/fgetxattr on an fd.
template <typename List, typename Get>
std::vector<std::pair<std::string, std::string>> read_xattrs(List list, Get get, const std::string& shown) {
  std::vector<std::pair<std::string, std::string>> out;
  std::string names(4096, '\0');
  ssize_t n;
  for (;;) {
    n = list(names.data(), names.size());
    if (n >= 0) break;
    if (errno == ERANGE) {
      names.resize(names.size() * 4);
      continue;
    }
    if (errno == ENOTSUP || errno == EOPNOTSUPP) return out;
    throw_errno("list xattrs of " + shown);
  }
  for (size_t at = 0; at < static_cast<size_t>(n);) {
    std::string name(names.data() + at);
    at += name.size() + 1;
    std::string value(256, '\0');
    ssize_t v;
    for (;;) {
      v = get(name.c_str(), value.data(), value.size());
      if (v >= 0) break;
      if (errno == ERANGE) {
        value.resize(value.size() * 4 + 65536);
        continue;
      }
      if (errno == ENODATA) break;
      throw_errno("read xattr " + name + " of " + shown);
    }
    if (v < 0) continue;
    value.resize(static_cast<size_t>(v));
    out.emplace_back(std::move(name), std::move(value));
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

// The entry `path` itself (a final symlink is not followed).
XattrList path_xattrs(const std::string& path, const std::string& shown) {
  return read_xattrs([&](char* b, size_t n) { return ::llistxattr(path.c_str(), b, n); },
                     [&](const char* k, void* b, size_t n) { return ::lgetxattr(path.c_str(), k, b, n); }, shown);
}

XattrList fd_xattrs(int fd, const std::string& shown) {
  return read_xattrs([&](char* b, size_t n) { return ::flistxattr(fd, b, n); },
                     [&](const char* k, void* b, size_t n) { return ::fgetxattr(fd, k, b, n); }, shown);
}

}  // namespace sandlet::image
