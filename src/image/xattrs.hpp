// Reading every extended attribute of one file (never following a final symlink), shared by the
// directory importer and the layer exporter.
#pragma once
#include <string>
#include <utility>
#include <vector>

namespace sandlet::image {

using XattrList = std::vector<std::pair<std::string, std::string>>;  // full names, sorted by name

// Of the entry `path` itself (llistxattr/lgetxattr); `shown` names it in errors.
XattrList path_xattrs(const std::string& path, const std::string& shown);
// Of the file open at `fd`.
XattrList fd_xattrs(int fd, const std::string& shown);

}  // namespace sandlet::image
