// Writing OCI image layouts by hand in unit tests: blobs stored under their sha256, descriptors of them.
#pragma once
#include <stdio.h>
#include <sys/stat.h>

#include <boost/json.hpp>
#include <cstdint>
#include <string>

#include "image/sha256.hpp"
#include "unit_helpers.hpp"

namespace unit {

inline int64_t file_size(const std::string& path) {
  struct stat st;
  REQUIRE(::stat(path.c_str(), &st) == 0);
  return st.st_size;
}

// The blob store of an OCI layout at `dir` (dir/blobs/sha256 must exist).
struct OciBlobs {
  std::string dir;

  // Moves `path` into the store under its sha256; returns the hex.
  std::string add_blob_file(const std::string& path) {
    std::string hex = sandlet::image::to_hex(sandlet::image::sha256_file(path));
    REQUIRE(::rename(path.c_str(), (dir + "/blobs/sha256/" + hex).c_str()) == 0);
    return hex;
  }
  std::string add_blob(const std::string& data) {
    write_file(dir + "/blob.tmp", data);
    return add_blob_file(dir + "/blob.tmp");
  }
  boost::json::object descriptor(const std::string& media_type, const std::string& hex) const {
    return {{"mediaType", media_type}, {"digest", "sha256:" + hex}, {"size", file_size(dir + "/blobs/sha256/" + hex)}};
  }
};

}  // namespace unit
