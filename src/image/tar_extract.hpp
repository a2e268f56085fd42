// Unpacks a `docker save` tarball (regular files and directories only) so read_docker_save can read it.
#pragma once
#include <string>

namespace sandlet::image {

// Extracts `tar_path` (plain, gzip or zstd) into `dest_dir` (created if missing). Files get mode 0644,
// directories 0755; owners, times and xattrs are not restored. Symlinks, hard links and devices are
// refused (Error kInvalidArgument): such a tarball is not a docker save archive. Every component is opened
// relative to its parent with O_NOFOLLOW, so nothing is ever written outside `dest_dir`.
void extract_tar_to_dir(const std::string& tar_path, const std::string& dest_dir);

}  // namespace sandlet::image
