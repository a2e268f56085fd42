#include "image/blob_builder.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "common/error.hpp"
#include "image/erofs_format.hpp"

namespace sandlet::image {

namespace {

constexpr size_t kWriteBuffer = 4u << 20;

bool all_zero(const char* p, size_t n) {
  // Compare 8 bytes at a time; the tail byte by byte.
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t v;
    std::memcpy(&v, p + i, 8);
    if (v) return false;
  }
  for (; i < n; ++i) {
    if (p[i]) return false;
  }
  return true;
}

void read_exact_at(int fd, char* buf, size_t n, uint64_t off, const std::string& name) {
  size_t done = 0;
  while (done < n) {
    ssize_t r = ::pread(fd, buf + done, n - done, static_cast<off_t>(off + done));
    if (r < 0) {
      if (errno == EINTR) continue;
      throw_errno("read " + name);
    }
    if (r == 0) throw Error(Code::kAborted, "read " + name + ": file shrank while being imported");
    done += static_cast<size_t>(r);
  }
}

}  // namespace

BlobBuilder::BlobBuilder(std::string path, FsTree& tree, const ChunkMap* known)
    : path_(std::move(path)), tree_(tree), known_(known), chunk_(kChunkSize) {
  fd_.reset(::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (!fd_) throw_errno("create blob " + path_);
  buf_.reserve(kWriteBuffer);
  writing_.reserve(kWriteBuffer);
}

BlobBuilder::~BlobBuilder() {
  try {
    wait_written();
  } catch (...) {
  }
}

void BlobBuilder::wait_written() {
  if (inflight_.valid()) inflight_.get();
}

// The blob's own digest and its write run on a second thread while this one reads and hashes the next
// chunks: the two hashes of each stored byte (chunk and blob) then take one core each.
void BlobBuilder::flush() {
  wait_written();
  if (buf_.empty()) return;
  writing_.swap(buf_);
  buf_.clear();
  inflight_ = std::async(std::launch::async, [this] {
    blob_hash_.update(writing_.data(), writing_.size());
    size_t done = 0;
    while (done < writing_.size()) {
      ssize_t w = ::write(fd_.get(), writing_.data() + done, writing_.size() - done);
      if (w < 0) {
        if (errno == EINTR) continue;
        throw_errno("write blob " + path_);
      }
      done += static_cast<size_t>(w);
    }
  });
}

void BlobBuilder::append(const char* data, uint32_t len) {
  uint32_t padded = (len + erofs::kBlockSize - 1) & ~(erofs::kBlockSize - 1);
  if (buf_.size() + padded > kWriteBuffer) flush();
  buf_.insert(buf_.end(), data, data + len);
  buf_.insert(buf_.end(), padded - len, '\0');
  blob_size_ += padded;
}

void BlobBuilder::add_chunk(Inode& inode, const char* data, uint32_t len) {
  if (all_zero(data, len)) {
    inode.chunks.push_back(ChunkRef{});
    inode.chunk_digests.push_back(Digest{});
    return;
  }
  Digest d = sha256(data, len);
  inode.chunk_digests.push_back(d);
  if (auto it = mine_.find(d); it != mine_.end()) {
    inode.chunks.push_back(ChunkRef{0, it->second.blkaddr});
    return;
  }
  if (known_) {
    if (auto it = known_->find(d); it != known_->end() && it->second.length == len) {
      auto [bi, fresh] = blob_index_.emplace(it->second.blob, static_cast<uint32_t>(tree_.blobs.size()));
      if (fresh) tree_.blobs.push_back(it->second.blob);
      inode.chunks.push_back(ChunkRef{bi->second, it->second.blkaddr});
      return;
    }
  }
  if (blob_size_ / erofs::kBlockSize >= 0xFFFFFFF0u) {
    throw Error(Code::kOutOfRange, "blob " + path_ + ": more than 16 TiB of data in one layer");
  }
  auto blkaddr = static_cast<uint32_t>(blob_size_ / erofs::kBlockSize);
  append(data, len);
  ChunkRecord rec{d, blkaddr, len};
  mine_.emplace(d, rec);
  records_.push_back(rec);
  inode.chunks.push_back(ChunkRef{0, blkaddr});
}

void BlobBuilder::add_file(Inode& inode, int fd, uint64_t size, const std::string& name) {
  inode.size = size;
  inode.chunks.clear();
  inode.chunk_digests.clear();
  inode.inline_data.clear();
  if (size <= kInlineMax) {
    inode.inline_data.resize(size);
    read_exact_at(fd, inode.inline_data.data(), size, 0, name);
    bytes_in_ += size;
    return;
  }
  uint64_t next_data = 0;  // offset of the next byte that may hold data (SEEK_DATA), cached
  for (uint64_t off = 0; off < size; off += kChunkSize) {
    auto len = static_cast<uint32_t>(std::min<uint64_t>(kChunkSize, size - off));
    if (next_data < off + len && next_data != UINT64_MAX) {
      off_t d = ::lseek(fd, static_cast<off_t>(off), SEEK_DATA);
      next_data = d < 0 ? UINT64_MAX : static_cast<uint64_t>(d);  // ENXIO: only a hole up to the end
    }
    if (next_data >= off + len) {  // the whole chunk is a hole: no read needed
      inode.chunks.push_back(ChunkRef{});
      inode.chunk_digests.push_back(Digest{});
      continue;
    }
    read_exact_at(fd, chunk_.data(), len, off, name);
    bytes_in_ += len;
    add_chunk(inode, chunk_.data(), len);
  }
}

void BlobBuilder::add_stream(Inode& inode, uint64_t size, const std::function<size_t(void*, size_t)>& read,
                             const std::string& name) {
  inode.size = size;
  inode.chunks.clear();
  inode.chunk_digests.clear();
  inode.inline_data.clear();
  auto fill = [&](char* buf, size_t n) {
    size_t done = 0;
    while (done < n) {
      size_t r = read(buf + done, n - done);
      if (r == 0) throw Error(Code::kDataLoss, name + ": data ends before its declared size");
      done += r;
    }
    bytes_in_ += n;
  };
  if (size <= kInlineMax) {
    inode.inline_data.resize(size);
    fill(inode.inline_data.data(), size);
    return;
  }
  for (uint64_t off = 0; off < size; off += kChunkSize) {
    auto len = static_cast<uint32_t>(std::min<uint64_t>(kChunkSize, size - off));
    fill(chunk_.data(), len);
    add_chunk(inode, chunk_.data(), len);
  }
}

std::string BlobBuilder::finish(std::vector<ChunkRecord>* records) {
  flush();
  wait_written();
  if (blob_size_ == 0) {
    fd_.reset();
    ::unlink(path_.c_str());
    if (records) records->clear();
    return "";
  }
  if (::fsync(fd_.get()) != 0) throw_errno("fsync blob " + path_);
  fd_.reset();
  if (records) *records = records_;
  return to_hex(blob_hash_.finish());
}

}  // namespace sandlet::image
