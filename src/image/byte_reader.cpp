#include "image/byte_reader.hpp"

#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#include <algorithm>
#include <climits>
#include <cstring>

#include "common/error.hpp"

namespace sandlet::image {

namespace {

constexpr size_t kRawBufSize = 512 << 10;

[[noreturn]] void throw_corrupt(const std::string& name, const std::string& why) {
  throw Error(Code::kDataLoss, name + ": " + why);
}

// The file side: buffered raw bytes, each fed to the digest exactly once when read from the file.
class RawSource {
 public:
  RawSource(sys::UniqueFd fd, std::string name, Sha256* digest)
      : fd_(std::move(fd)), name_(std::move(name)), digest_(digest), buf_(new uint8_t[kRawBufSize]) {
    ::posix_fadvise(fd_.get(), 0, 0, POSIX_FADV_SEQUENTIAL);
  }

  // Makes at least `want` bytes available unless the file ends first; returns what is available.
  size_t fill(size_t want) {
    if (end_ - pos_ >= want) return end_ - pos_;
    if (pos_ > 0) {
      std::memmove(buf_.get(), buf_.get() + pos_, end_ - pos_);
      end_ -= pos_;
      pos_ = 0;
    }
    while (end_ < want && !eof_) {
      size_t n = read_some(buf_.get() + end_, kRawBufSize - end_);
      if (n == 0) eof_ = true;
      end_ += n;
    }
    return end_ - pos_;
  }
  const uint8_t* data() const { return buf_.get() + pos_; }
  size_t avail() const { return end_ - pos_; }
  void consume(size_t n) { pos_ += n; }

  // For plain streams: buffered bytes first, then straight from the file into `dst` (no copy).
  size_t read(void* dst, size_t n) {
    if (avail() > 0) {
      n = std::min(n, avail());
      std::memcpy(dst, data(), n);
      consume(n);
      return n;
    }
    return eof_ ? 0 : read_some(dst, n);
  }

  uint64_t bytes_read() const { return bytes_read_; }
  const std::string& name() const { return name_; }

 private:
  size_t read_some(void* dst, size_t n) {
    ssize_t r;
    do {
      r = ::read(fd_.get(), dst, n);
    } while (r < 0 && errno == EINTR);
    if (r < 0) throw_errno("read " + name_);
    if (r == 0) eof_ = true;
    if (digest_) digest_->update(dst, static_cast<size_t>(r));
    bytes_read_ += static_cast<uint64_t>(r);
    return static_cast<size_t>(r);
  }

  sys::UniqueFd fd_;
  std::string name_;
  Sha256* digest_;
  std::unique_ptr<uint8_t[]> buf_;
  size_t pos_ = 0, end_ = 0;
  bool eof_ = false;
  uint64_t bytes_read_ = 0;
};

class PlainReader final : public ByteReader {
 public:
  explicit PlainReader(std::unique_ptr<RawSource> src) : src_(std::move(src)) {}
  size_t read(void* buf, size_t n) override { return n ? src_->read(buf, n) : 0; }
  uint64_t input_bytes() const override { return src_->bytes_read(); }

 private:
  std::unique_ptr<RawSource> src_;
};

class GzipReader final : public ByteReader {
 public:
  explicit GzipReader(std::unique_ptr<RawSource> src) : src_(std::move(src)) {
    std::memset(&zs_, 0, sizeof zs_);
    // 15 + 32: maximum window, gzip (or zlib) header detected automatically.
    if (inflateInit2(&zs_, 15 + 32) != Z_OK) throw std::bad_alloc();
  }
  ~GzipReader() override { inflateEnd(&zs_); }

  size_t read(void* buf, size_t n) override {
    if (done_ || n == 0) return 0;
    const uInt want = static_cast<uInt>(std::min<size_t>(n, UINT_MAX));
    zs_.next_out = static_cast<Bytef*>(buf);
    zs_.avail_out = want;
    while (zs_.avail_out == want) {
      if (member_done_) {
        // Concatenated members (pigz, appended streams): another member must start here, or the file ends.
        if (src_->fill(2) == 0) {
          done_ = true;
          break;
        }
        if (src_->avail() < 2 || src_->data()[0] != 0x1f || src_->data()[1] != 0x8b)
          throw_corrupt(src_->name(), "trailing data after the gzip stream");
        inflateReset(&zs_);
        member_done_ = false;
      }
      if (src_->fill(1) == 0) throw_corrupt(src_->name(), "truncated gzip stream");
      zs_.next_in = const_cast<Bytef*>(src_->data());
      zs_.avail_in = static_cast<uInt>(src_->avail());
      int r = inflate(&zs_, Z_NO_FLUSH);
      src_->consume(src_->avail() - zs_.avail_in);
      if (r == Z_STREAM_END) {
        member_done_ = true;
      } else if (r != Z_OK && r != Z_BUF_ERROR) {
        throw_corrupt(src_->name(), std::string("corrupt gzip stream (") + (zs_.msg ? zs_.msg : "zlib error") + ")");
      }
    }
    return want - zs_.avail_out;
  }
  uint64_t input_bytes() const override { return src_->bytes_read(); }

 private:
  std::unique_ptr<RawSource> src_;
  z_stream zs_;
  bool member_done_ = false;  // false at the start: an empty file is not a gzip stream
  bool done_ = false;
};

class ZstdReader final : public ByteReader {
 public:
  explicit ZstdReader(std::unique_ptr<RawSource> src) : src_(std::move(src)), ds_(ZSTD_createDStream()) {
    if (!ds_) throw std::bad_alloc();
  }
  ~ZstdReader() override { ZSTD_freeDStream(ds_); }

  size_t read(void* buf, size_t n) override {
    if (n == 0) return 0;
    ZSTD_outBuffer out{buf, n, 0};
    for (;;) {
      bool eof = src_->fill(1) == 0;
      if (eof && !in_frame_) return 0;
      // Called even at end of input: the decoder may still hold decoded bytes to flush.
      ZSTD_inBuffer in{src_->data(), src_->avail(), 0};
      size_t r = ZSTD_decompressStream(ds_, &out, &in);
      src_->consume(in.pos);
      if (ZSTD_isError(r)) throw_corrupt(src_->name(), std::string("corrupt zstd stream (") + ZSTD_getErrorName(r) + ")");
      in_frame_ = r != 0;  // 0: a frame ended and everything is flushed; more frames may follow
      if (out.pos > 0) return out.pos;
      if (eof) throw_corrupt(src_->name(), "truncated zstd stream");
    }
  }
  uint64_t input_bytes() const override { return src_->bytes_read(); }

 private:
  std::unique_ptr<RawSource> src_;
  ZSTD_DStream* ds_;
  bool in_frame_ = true;  // true at the start: an empty file is not a zstd stream
};

}  // namespace

std::unique_ptr<ByteReader> open_decompressing_fd(sys::UniqueFd fd, std::string name_for_errors, Compression c,
                                                  Sha256* raw_digest) {
  auto src = std::make_unique<RawSource>(std::move(fd), std::move(name_for_errors), raw_digest);
  if (c == Compression::kAuto) {
    size_t n = src->fill(4);
    const uint8_t* p = src->data();
    if (n >= 2 && p[0] == 0x1f && p[1] == 0x8b)
      c = Compression::kGzip;
    else if (n >= 4 && p[0] == 0x28 && p[1] == 0xb5 && p[2] == 0x2f && p[3] == 0xfd)
      c = Compression::kZstd;
    else
      c = Compression::kNone;
  }
  switch (c) {
    case Compression::kGzip: return std::make_unique<GzipReader>(std::move(src));
    case Compression::kZstd: return std::make_unique<ZstdReader>(std::move(src));
    default: return std::make_unique<PlainReader>(std::move(src));
  }
}

std::unique_ptr<ByteReader> open_decompressing(const std::string& path, Compression c, Sha256* raw_digest) {
  sys::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) throw_errno("open " + path);
  return open_decompressing_fd(std::move(fd), path, c, raw_digest);
}

void drain(ByteReader& r) {
  constexpr size_t kBuf = 256 << 10;
  std::unique_ptr<char[]> buf(new char[kBuf]);
  while (r.read(buf.get(), kBuf) > 0) {
  }
}

}  // namespace sandlet::image
