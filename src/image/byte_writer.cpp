#include "image/byte_writer.hpp"

#include <unistd.h>
#include <zstd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "common/error.hpp"

namespace sandlet::image {

namespace {

constexpr size_t kBufSize = 1 << 20;

void write_all(int fd, const char* p, size_t n, const std::string& name) {
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      throw_errno("write " + name);
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
}

class PlainWriter final : public ByteWriter {
 public:
  PlainWriter(int fd, std::string name) : fd_(fd), name_(std::move(name)) { buf_.reserve(kBufSize); }
  void write(const void* data, size_t n) override {
    const char* p = static_cast<const char*>(data);
    if (buf_.size() + n > kBufSize) flush();
    if (n >= kBufSize) {
      write_all(fd_, p, n, name_);
      written_ += n;
      return;
    }
    buf_.insert(buf_.end(), p, p + n);
  }
  void finish() override { flush(); }
  uint64_t output_bytes() const override { return written_ + buf_.size(); }

 private:
  void flush() {
    write_all(fd_, buf_.data(), buf_.size(), name_);
    written_ += buf_.size();
    buf_.clear();
  }
  int fd_;
  std::string name_;
  std::vector<char> buf_;
  uint64_t written_ = 0;
};

class ZstdWriter final : public ByteWriter {
 public:
  ZstdWriter(int fd, std::string name, int level) : fd_(fd), name_(std::move(name)), out_(ZSTD_CStreamOutSize()) {
    ctx_ = ZSTD_createCCtx();
    if (!ctx_) throw Error(Code::kResourceExhausted, "zstd: cannot allocate a compression context for " + name_);
    check(ZSTD_CCtx_setParameter(ctx_, ZSTD_c_compressionLevel, level));
    check(ZSTD_CCtx_setParameter(ctx_, ZSTD_c_checksumFlag, 1));
  }
  ~ZstdWriter() override { ZSTD_freeCCtx(ctx_); }
  void write(const void* data, size_t n) override {
    ZSTD_inBuffer in{data, n, 0};
    while (in.pos < in.size) pump(&in, ZSTD_e_continue);
  }
  void finish() override {
    ZSTD_inBuffer in{nullptr, 0, 0};
    while (pump(&in, ZSTD_e_end) != 0) {
    }
  }
  uint64_t output_bytes() const override { return written_; }

 private:
  size_t check(size_t rc) {
    if (ZSTD_isError(rc)) throw Error(Code::kInternal, "zstd compression of " + name_ + ": " + ZSTD_getErrorName(rc));
    return rc;
  }
  // One compression step; returns what ZSTD_compressStream2 has left to flush.
  size_t pump(ZSTD_inBuffer* in, ZSTD_EndDirective mode) {
    ZSTD_outBuffer out{out_.data(), out_.size(), 0};
    size_t left = check(ZSTD_compressStream2(ctx_, &out, in, mode));
    write_all(fd_, out_.data(), out.pos, name_);
    written_ += out.pos;
    return left;
  }
  int fd_;
  std::string name_;
  ZSTD_CCtx* ctx_ = nullptr;
  std::vector<char> out_;
  uint64_t written_ = 0;
};

}  // namespace

std::unique_ptr<ByteWriter> open_writer_fd(int fd, std::string name, int zstd_level) {
  if (zstd_level == 0) return std::make_unique<PlainWriter>(fd, std::move(name));
  if (zstd_level < 1 || zstd_level > ZSTD_maxCLevel()) {
    throw Error(Code::kInvalidArgument, "zstd level " + std::to_string(zstd_level) + " for " + name +
                                            ": must be 1.." + std::to_string(ZSTD_maxCLevel()));
  }
  return std::make_unique<ZstdWriter>(fd, std::move(name), zstd_level);
}

}  // namespace sandlet::image
