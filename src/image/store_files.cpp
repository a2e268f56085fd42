#include "image/store_files.hpp"

#include <fcntl.h>
#include <sys/file.h>

#include "common/error.hpp"
#include "sys/fs_util.hpp"

namespace sandlet::image {

FileLock::FileLock(const std::string& path) : fd_(sys::lock_file(path, LOCK_EX)) {}

FileLock FileLock::try_lock(const std::string& path) {
  FileLock l;
  sys::UniqueFd fd(::open(path.c_str(), O_RDWR | O_CLOEXEC));
  if (!fd) return l;  // no lock file: nobody to wait for, but nothing to claim either
  if (::flock(fd.get(), LOCK_EX | LOCK_NB) == 0) l.fd_ = std::move(fd);
  return l;
}

boost::json::value read_json_file(const std::string& path) {
  std::string text = sys::read_file(path, 64u << 20);
  boost::system::error_code ec;
  boost::json::value v = boost::json::parse(text, ec);
  if (ec) throw Error(Code::kDataLoss, path + ": malformed JSON (" + ec.message() + ")");
  return v;
}

void write_json_file(const std::string& path, const boost::json::value& v) {
  sys::write_file_atomic(path, boost::json::serialize(v) + "\n", 0644);
}

}  // namespace sandlet::image
