#include "image/tar_writer.hpp"

#include <cstdio>
#include <cstring>

#include "common/error.hpp"

namespace sandlet::image {

namespace {

constexpr size_t kBlock = 512;
constexpr size_t kName = 0, kMode = 100, kUid = 108, kGid = 116, kSize = 124, kMtime = 136, kChksum = 148,
                 kType = 156, kLinkname = 157, kMagic = 257, kVersion = 263, kDevMajor = 329, kDevMinor = 337;
constexpr uint64_t kMax7 = 07777777, kMax11 = 077777777777;

bool plain_ascii(const std::string& s) {
  for (unsigned char c : s)
    if (c < 0x20 || c > 0x7e) return false;
  return true;
}

bool valid_utf8(const std::string& s) {
  for (size_t i = 0; i < s.size();) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    size_t n = c < 0x80 ? 0 : (c >> 5) == 6 ? 1 : (c >> 4) == 14 ? 2 : (c >> 3) == 30 ? 3 : 9;
    if (n == 9 || i + n >= s.size()) return false;
    for (size_t k = 1; k <= n; ++k)
      if ((static_cast<unsigned char>(s[i + k]) >> 6) != 2) return false;
    i += n + 1;
  }
  return true;
}

// An octal field of `len` bytes (len-1 digits and a NUL); 0 when the value does not fit (pax carries it).
void put_octal(uint8_t* h, size_t off, size_t len, uint64_t v) {
  uint64_t max = (uint64_t{1} << (3 * (len - 1))) - 1;
  std::snprintf(reinterpret_cast<char*>(h + off), len, "%0*llo", static_cast<int>(len - 1),
                static_cast<unsigned long long>(v <= max ? v : 0));
}

// Printable ASCII stand-in for a name that only fits in pax: the ustar field is for tars that ignore pax.
std::string ustar_stand_in(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (out.size() == 99) break;
    out.push_back(c >= 0x20 && c <= 0x7e ? static_cast<char>(c) : '_');
  }
  return out;
}

std::string pax_time(int64_t sec, uint32_t nsec) {
  char buf[48];
  if (sec < 0 && nsec > 0) {  // pax times are signed decimals: -1 s + 5 ns = -0.999999995
    std::snprintf(buf, sizeof buf, "-%lld.%09u", static_cast<long long>(-(sec + 1)), 1000000000u - nsec);
  } else {
    std::snprintf(buf, sizeof buf, "%lld.%09u", static_cast<long long>(sec), nsec);
  }
  return buf;
}

std::string base64(const std::string& in) {
  static const char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    uint32_t v = static_cast<uint8_t>(in[i]) << 16 | static_cast<uint8_t>(in[i + 1]) << 8 | static_cast<uint8_t>(in[i + 2]);
    for (int s = 18; s >= 0; s -= 6) out.push_back(kAlphabet[v >> s & 63]);
  }
  if (i < in.size()) {
    uint32_t v = static_cast<uint8_t>(in[i]) << 16;
    if (i + 1 < in.size()) v |= static_cast<uint8_t>(in[i + 1]) << 8;
    out.push_back(kAlphabet[v >> 18 & 63]);
    out.push_back(kAlphabet[v >> 12 & 63]);
    out += i + 1 < in.size() ? std::string(1, kAlphabet[v >> 6 & 63]) + "=" : "==";
  }
  return out;
}

std::string percent_encode(const std::string& in) {
  std::string out;
  for (unsigned char c : in) {
    if (c > 0x20 && c < 0x7f && c != '=' && c != '%') {
      out.push_back(static_cast<char>(c));
    } else {
      char esc[4];
      std::snprintf(esc, sizeof esc, "%%%02X", c);
      out += esc;
    }
  }
  return out;
}

}  // namespace

std::string pax_record(const std::string& key, const std::string& value) {
  size_t body = key.size() + value.size() + 3;  // ' ', '=', '\n'
  size_t len = body + 1;
  while (std::to_string(len).size() + body != len) len = std::to_string(len).size() + body;
  return std::to_string(len) + " " + key + "=" + value + "\n";
}

void TarWriter::header(const std::string& name, char type, const TarMember& m, uint64_t size) {
  uint8_t h[kBlock] = {};
  std::memcpy(h + kName, name.data(), std::min<size_t>(name.size(), 100));
  put_octal(h, kMode, 8, m.mode & 07777);
  put_octal(h, kUid, 8, m.uid);
  put_octal(h, kGid, 8, m.gid);
  put_octal(h, kSize, 12, size);
  put_octal(h, kMtime, 12, m.mtime_sec >= 0 ? static_cast<uint64_t>(m.mtime_sec) : 0);
  h[kType] = static_cast<uint8_t>(type);
  if (plain_ascii(m.link) && m.link.size() <= 100) std::memcpy(h + kLinkname, m.link.data(), m.link.size());
  std::memcpy(h + kMagic, "ustar", 6);
  std::memcpy(h + kVersion, "00", 2);
  put_octal(h, kDevMajor, 8, m.dev_major);
  put_octal(h, kDevMinor, 8, m.dev_minor);
  std::memset(h + kChksum, ' ', 8);
  unsigned sum = 0;
  for (uint8_t b : h) sum += b;
  std::snprintf(reinterpret_cast<char*>(h + kChksum), 8, "%06o", sum);
  h[kChksum + 7] = ' ';
  out_.write(h, kBlock);
}

void TarWriter::pax(char type, const std::string& name, const std::vector<std::pair<std::string, std::string>>& records) {
  std::string data;
  for (const auto& [k, v] : records) data += pax_record(k, v);
  TarMember m;
  m.mode = 0644;
  header(name, type, m, data.size());
  out_.write(data.data(), data.size());
  static const char kZeros[kBlock] = {};
  if (data.size() % kBlock) out_.write(kZeros, kBlock - data.size() % kBlock);
}

void TarWriter::global_header(const std::vector<std::pair<std::string, std::string>>& records) {
  end_member();
  pax('g', "pax_global_header", records);
}

void TarWriter::begin(const TarMember& m) {
  end_member();
  std::string name = m.path.empty() ? "./" : m.path;
  if (m.type == '5' && !m.path.empty()) name += "/";
  std::vector<std::pair<std::string, std::string>> recs;
  bool binary = false;
  if (name.size() > 100 || !plain_ascii(name)) {
    recs.emplace_back("path", name);
    binary |= !valid_utf8(name);
  }
  if (m.link.size() > 100 || !plain_ascii(m.link)) {
    recs.emplace_back("linkpath", m.link);
    binary |= !valid_utf8(m.link);
  }
  if (binary) recs.insert(recs.begin(), {"hdrcharset", "BINARY"});
  if (m.uid > kMax7) recs.emplace_back("uid", std::to_string(m.uid));
  if (m.gid > kMax7) recs.emplace_back("gid", std::to_string(m.gid));
  if (m.size > kMax11) recs.emplace_back("size", std::to_string(m.size));
  if (m.mtime_nsec != 0 || m.mtime_sec < 0 || static_cast<uint64_t>(m.mtime_sec) > kMax11)
    recs.emplace_back("mtime", pax_time(m.mtime_sec, m.mtime_nsec));
  if (m.dev_major > kMax7) recs.emplace_back("SCHILY.devmajor", std::to_string(m.dev_major));
  if (m.dev_minor > kMax7) recs.emplace_back("SCHILY.devminor", std::to_string(m.dev_minor));
  for (const auto& [k, v] : m.xattrs) {
    // A name pax cannot carry verbatim ('=' ends the key) goes the libarchive way: %-escaped, value base64.
    if (plain_ascii(k) && k.find('=') == std::string::npos && k.find('%') == std::string::npos)
      recs.emplace_back("SCHILY.xattr." + k, v);
    else
      recs.emplace_back("LIBARCHIVE.xattr." + percent_encode(k), base64(v));
  }
  recs.insert(recs.end(), m.records.begin(), m.records.end());
  if (!recs.empty()) pax('x', "PaxHeaders/" + ustar_stand_in(name).substr(0, 88), recs);
  header(name.size() <= 100 && plain_ascii(name) ? name : ustar_stand_in(name), m.type, m, m.size);
  ++members_;
  data_left_ = m.size;
  pad_ = (kBlock - m.size % kBlock) % kBlock;
}

void TarWriter::data(const void* buf, size_t n) {
  if (n > data_left_) throw Error(Code::kInternal, "tar " + name_ + ": member data longer than its size");
  out_.write(buf, n);
  data_left_ -= n;
}

void TarWriter::end_member() {
  if (data_left_ != 0) throw Error(Code::kInternal, "tar " + name_ + ": member data shorter than its size");
  static const char kZeros[kBlock] = {};
  if (pad_) out_.write(kZeros, pad_);
  pad_ = 0;
}

void TarWriter::finish() {
  end_member();
  static const char kZeros[2 * kBlock] = {};
  out_.write(kZeros, sizeof kZeros);
  out_.finish();
}

}  // namespace sandlet::image
