// Bounds-checked little-endian encoding shared by the host runtime and the in-sandbox agent.
// Header-only and dependency-free because the agent is a static binary without Boost.
#pragma once
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace sandlet::wire {

class Writer final {
 public:
  void u8(uint8_t v) { buf_.push_back(static_cast<char>(v)); }
  void u16(uint16_t v) { put(&v, sizeof v); }
  void u32(uint32_t v) { put(&v, sizeof v); }
  void i32(int32_t v) { put(&v, sizeof v); }
  void u64(uint64_t v) { put(&v, sizeof v); }
  void str(std::string_view s) {
    u32(static_cast<uint32_t>(s.size()));
    put(s.data(), s.size());
  }
  void strs(const std::vector<std::string>& v) {
    u32(static_cast<uint32_t>(v.size()));
    for (const auto& s : v) str(s);
  }
  std::string& data() { return buf_; }

 private:
  void put(const void* p, size_t n) { buf_.append(static_cast<const char*>(p), n); }
  std::string buf_;
};

// Every read checks the remaining length; a short or malformed payload sets ok() to false
// and yields zero values, so decoders never read out of bounds.
class Reader final {
 public:
  explicit Reader(std::string_view data) : data_(data) {}
  uint8_t u8() { uint8_t v = 0; get(&v, 1); return v; }
  uint16_t u16() { uint16_t v = 0; get(&v, sizeof v); return v; }
  uint32_t u32() { uint32_t v = 0; get(&v, sizeof v); return v; }
  int32_t i32() { int32_t v = 0; get(&v, sizeof v); return v; }
  uint64_t u64() { uint64_t v = 0; get(&v, sizeof v); return v; }
  std::string str() {
    uint32_t n = u32();
    if (!ok_ || n > data_.size() - pos_) { ok_ = false; return {}; }
    std::string s(data_.substr(pos_, n));
    pos_ += n;
    return s;
  }
  // A count larger than the bytes left could hold (each string takes at least its 4-byte length) fails
  // before anything is allocated for it.
  std::vector<std::string> strs() {
    uint32_t n = u32();
    std::vector<std::string> v;
    if (!ok_ || n > (data_.size() - pos_) / 4) { ok_ = false; return v; }
    for (uint32_t i = 0; i < n && ok_; ++i) v.push_back(str());
    return v;
  }
  bool ok() const { return ok_; }
  bool at_end() const { return pos_ == data_.size(); }

 private:
  void get(void* p, size_t n) {
    if (!ok_ || n > data_.size() - pos_) { ok_ = false; std::memset(p, 0, n); return; }
    std::memcpy(p, data_.data() + pos_, n);
    pos_ += n;
  }
  std::string_view data_;
  size_t pos_ = 0;
  bool ok_ = true;
};

}  // namespace sandlet::wire
