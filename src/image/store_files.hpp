// Small file helpers of the layer store: an flock holder and JSON files written atomically.
#pragma once
#include <string>

#include <boost/json.hpp>

#include "sys/fd.hpp"

namespace sandlet::image {

// Holds flock(LOCK_EX) on `path` (created if missing) for its lifetime.
class FileLock final {
 public:
  explicit FileLock(const std::string& path);
  // Non-blocking: an empty lock (operator bool false) when someone else holds it.
  static FileLock try_lock(const std::string& path);
  explicit operator bool() const { return static_cast<bool>(fd_); }

 private:
  FileLock() = default;
  sys::UniqueFd fd_;
};

boost::json::value read_json_file(const std::string& path);  // kDataLoss naming the file if malformed
void write_json_file(const std::string& path, const boost::json::value& v);  // atomic (temp + rename)

}  // namespace sandlet::image
