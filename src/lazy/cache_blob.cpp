#include "lazy/cache_blob.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "common/error.hpp"
#include "sys/fs_util.hpp"

namespace sandlet::lazy {

namespace {
constexpr size_t kLatencySamples = 4096;
constexpr size_t kMaxOrder = 1u << 20;  // chunk numbers recorded per blob
}  // namespace

void BlobCounters::add_latency(uint64_t ns) {
  if (latencies_us.size() == kLatencySamples) latencies_us.pop_front();
  latencies_us.push_back(static_cast<uint32_t>(std::min<uint64_t>(ns / 1000, UINT32_MAX)));
}

CacheBlob::CacheBlob(uint32_t id, const std::string& dir, const std::string& sha, const std::string& index_path,
                     sys::UniqueFd adopted)
    : id_(id), sha_(sha), path_(dir + "/" + sha), index_path_(index_path), index_(ChunkIndex::load(index_path)) {
  if (adopted) {
    fd_ = std::move(adopted);
    ::fcntl(fd_.get(), F_SETFD, FD_CLOEXEC);
  } else {
    fd_.reset(::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644));
  }
  if (!fd_) throw_errno("open cache file " + path_);
  struct stat st;
  if (::fstat(fd_.get(), &st) != 0) throw_errno("stat cache file " + path_);
  // An adopted descriptor must be the file of that name (it came from another process of the loader).
  struct stat named;
  if (::stat(path_.c_str(), &named) != 0 || named.st_dev != st.st_dev || named.st_ino != st.st_ino)
    throw Error(Code::kInvalidArgument, "cache file " + path_ + " is not the descriptor handed over");
  if (static_cast<uint64_t>(st.st_size) != size() && ::ftruncate(fd_.get(), static_cast<off_t>(size())) != 0)
    throw_errno("size cache file " + path_);
  dev_ = st.st_dev;
  ino_ = st.st_ino;
  verified_.assign(index_.size(), 0);
  requested_.assign(index_.size(), 0);
  first_used_.assign(index_.size(), 0);
  claims_ = sys::read_file_if_exists(path_ + ".filled", index_.size() + 1).value_or("");
  if (claims_.size() != index_.size()) claims_.assign(index_.size(), '\0');
  for (uint32_t c : recorded_order())
    if (c < first_used_.size()) first_used_[c] = 1;
  order_fd_.reset(::open((path_ + ".order").c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0644));
}

bool CacheBlob::claimed(size_t chunk) const { return claims_[chunk] != 0; }

void CacheBlob::set_verified(size_t first, size_t last) {
  for (size_t c = first; c <= last && c < verified_.size(); ++c) {
    if (!verified_[c]) {
      verified_[c] = 1;
      ++verified_count_;
    }
  }
}

void CacheBlob::set_requested(size_t first, size_t last, bool on) {
  for (size_t c = first; c <= last && c < requested_.size(); ++c) requested_[c] = on;
}

void CacheBlob::record_first_use(size_t first, size_t last) {
  std::vector<uint32_t> fresh;
  for (size_t c = first; c <= last && c < first_used_.size(); ++c) {
    if (!first_used_[c]) {
      first_used_[c] = 1;
      fresh.push_back(static_cast<uint32_t>(c));
    }
  }
  if (!fresh.empty() && order_fd_) {
    ssize_t n = ::write(order_fd_.get(), fresh.data(), fresh.size() * sizeof(uint32_t));
    (void)n;  // a hint only: a short write loses part of the order, nothing else
  }
}

std::vector<uint32_t> CacheBlob::recorded_order() const {
  std::string raw = sys::read_file_if_exists(path_ + ".order", kMaxOrder * sizeof(uint32_t)).value_or("");
  std::vector<uint32_t> out(raw.size() / sizeof(uint32_t));
  if (!out.empty()) std::memcpy(out.data(), raw.data(), out.size() * sizeof(uint32_t));
  return out;
}

void CacheBlob::evicted() {
  std::fill(verified_.begin(), verified_.end(), 0);
  verified_count_ = 0;
  claims_.assign(claims_.size(), '\0');
}

uint64_t CacheBlob::verified_bytes() const {
  uint64_t b = 0;
  for (size_t c = 0; c < verified_.size(); ++c)
    if (verified_[c]) b += index_.at(c).length;
  return b;
}

}  // namespace sandlet::lazy
