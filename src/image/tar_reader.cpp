#include "image/tar_reader.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <limits>
#include <optional>

namespace sandlet::image {

namespace {

constexpr size_t kBlock = 512;
constexpr uint64_t kMaxPaxSize = 1 << 20;  // bounds memory: pax data is held whole
constexpr size_t kMaxName = 4096;          // PATH_MAX
constexpr size_t kScratch = 64 << 10;

// Header field offsets (ustar; GNU and v7 share the first 257 bytes).
constexpr size_t kName = 0, kMode = 100, kUid = 108, kGid = 116, kSize = 124, kMtime = 136, kChksum = 148,
                 kType = 156, kLinkname = 157, kMagic = 257, kDevMajor = 329, kDevMinor = 337, kPrefix = 345;

std::string field_str(const uint8_t* h, size_t off, size_t len) {
  const char* p = reinterpret_cast<const char*>(h + off);
  return std::string(p, strnlen(p, len));
}

// A numeric header field: octal padded with spaces/NULs, or GNU base-256 (high bit of the first byte set,
// two's complement big-endian). Returns nullopt when malformed or out of int64 range.
std::optional<int64_t> parse_number(const uint8_t* h, size_t off, size_t len) {
  const uint8_t* p = h + off;
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  if (p[0] & 0x80) {
    bool neg = p[0] & 0x40;
    uint8_t flip = neg ? 0xff : 0x00;  // a negative number is -(inverted bits) - 1
    int64_t v = (p[0] ^ flip) & 0x7f;
    for (size_t i = 1; i < len; ++i) {
      if (v > (kMax >> 8)) return std::nullopt;
      v = v << 8 | (p[i] ^ flip);
    }
    return neg ? -v - 1 : v;
  }
  size_t i = 0;
  while (i < len && (p[i] == ' ' || p[i] == 0)) ++i;
  int64_t v = 0;
  for (; i < len && p[i] >= '0' && p[i] <= '7'; ++i) {
    if (v > (kMax >> 3)) return std::nullopt;
    v = v << 3 | (p[i] - '0');
  }
  for (; i < len; ++i)
    if (p[i] != ' ' && p[i] != 0) return std::nullopt;
  return v;
}

bool checksum_ok(const uint8_t* h) {
  auto want = parse_number(h, kChksum, 8);
  if (!want) return false;
  // The field itself counts as spaces; some historic tars summed signed chars.
  int64_t usum = 0, ssum = 0;
  for (size_t i = 0; i < kBlock; ++i) {
    uint8_t b = (i >= kChksum && i < kChksum + 8) ? ' ' : h[i];
    usum += b;
    ssum += static_cast<int8_t>(b);
  }
  return *want == usum || *want == ssum;
}

bool all_zero(const uint8_t* h) {
  return std::all_of(h, h + kBlock, [](uint8_t b) { return b == 0; });
}

uint64_t padded(uint64_t n) { return (n + kBlock - 1) / kBlock * kBlock; }

std::optional<uint64_t> parse_decimal(std::string_view s) {
  if (s.empty() || s.size() > 20) return std::nullopt;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    uint64_t d = static_cast<uint64_t>(c - '0');
    if (v > (std::numeric_limits<uint64_t>::max() - d) / 10) return std::nullopt;
    v = v * 10 + d;
  }
  return v;
}

// pax mtime: "[-]seconds[.fraction]"; the fraction is kept to nanoseconds.
bool parse_pax_time(std::string_view s, int64_t& sec, uint32_t& nsec) {
  bool neg = !s.empty() && s[0] == '-';
  if (neg) s.remove_prefix(1);
  auto dot = s.find('.');
  auto whole = parse_decimal(s.substr(0, dot));
  if (!whole || *whole > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return false;
  uint32_t frac = 0;
  if (dot != std::string_view::npos) {
    std::string_view f = s.substr(dot + 1);
    if (f.empty()) return false;
    for (size_t i = 0; i < f.size(); ++i) {
      if (f[i] < '0' || f[i] > '9') return false;
      if (i < 9) frac = frac * 10 + static_cast<uint32_t>(f[i] - '0');
    }
    for (size_t i = f.size(); i < 9; ++i) frac *= 10;
  }
  sec = static_cast<int64_t>(*whole);
  nsec = frac;
  if (neg) {  // -1.5 is 2 seconds before the epoch plus half a second
    sec = -sec;
    if (nsec) {
      sec -= 1;
      nsec = 1000000000u - nsec;
    }
  }
  return true;
}

std::optional<std::string> base64_decode(std::string_view in) {
  auto val = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
  };
  while (!in.empty() && in.back() == '=') in.remove_suffix(1);
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  for (char c : in) {
    int v = val(c);
    if (v < 0) return std::nullopt;
    acc = acc << 6 | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>(acc >> bits & 0xff));
    }
  }
  return out;
}

// libarchive %-escapes xattr names in its pax keys.
std::optional<std::string> url_decode(std::string_view in) {
  std::string out;
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] != '%') {
      out.push_back(in[i]);
      continue;
    }
    if (i + 2 >= in.size()) return std::nullopt;
    auto hex = [](char c) -> int {
      if (c >= '0' && c <= '9') return c - '0';
      if (c >= 'a' && c <= 'f') return c - 'a' + 10;
      if (c >= 'A' && c <= 'F') return c - 'A' + 10;
      return -1;
    };
    int hi = hex(in[i + 1]), lo = hex(in[i + 2]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out.push_back(static_cast<char>(hi << 4 | lo));
    i += 2;
  }
  return out;
}

// Splits pax data into records "<len> <key>=<value>\n"; false when malformed.
bool parse_pax_records(const std::string& data, std::vector<std::pair<std::string, std::string>>& out) {
  size_t pos = 0;
  while (pos < data.size()) {
    size_t sp = data.find(' ', pos);
    if (sp == std::string::npos) return false;
    auto len = parse_decimal(std::string_view(data).substr(pos, sp - pos));
    if (!len || *len <= sp - pos + 1 || *len > data.size() - pos) return false;
    size_t end = pos + *len;  // one past the '\n'
    if (data[end - 1] != '\n') return false;
    std::string_view rec(data.data() + sp + 1, end - 1 - (sp + 1));
    size_t eq = rec.find('=');
    if (eq == std::string_view::npos || eq == 0) return false;
    out.emplace_back(std::string(rec.substr(0, eq)), std::string(rec.substr(eq + 1)));
    pos = end;
  }
  return true;
}

bool is_xattr_key(const std::string& k) {
  return k.rfind("SCHILY.xattr.", 0) == 0 || k.rfind("LIBARCHIVE.xattr.", 0) == 0;
}

// Merges records into `into`; an empty value removes the key (pax semantics), except for xattrs, whose
// value may legitimately be empty.
void merge_pax(std::map<std::string, std::string>& into,
               const std::vector<std::pair<std::string, std::string>>& recs, bool keep_empty) {
  for (const auto& [k, v] : recs) {
    if (v.empty() && !keep_empty && !is_xattr_key(k))
      into.erase(k);
    else
      into[k] = v;
  }
}

}  // namespace

TarReader::TarReader(ByteReader& in, std::string name_for_errors) : in_(in), name_(std::move(name_for_errors)) {}

void TarReader::fail(Code code, const std::string& member, const std::string& why) const {
  // Names come from the archive: escape control bytes and cap the length so the message stays readable.
  std::string shown;
  for (unsigned char c : member.substr(0, 256)) {
    if (c < 0x20 || c == 0x7f) {
      char esc[5];
      std::snprintf(esc, sizeof esc, "\\x%02x", c);
      shown += esc;
    } else {
      shown += static_cast<char>(c);
    }
  }
  if (member.size() > 256) shown += "...";
  std::string what = name_ + ": ";
  what += member.empty() ? "tar header" : "tar member '" + shown + "'";
  throw Error(code, what + " at offset " + std::to_string(entry_at_) + ": " + why);
}

bool TarReader::read_block(uint8_t* block, const std::string& member) {
  size_t got = 0;
  while (got < kBlock) {
    size_t n = in_.read(block + got, kBlock - got);
    if (n == 0) break;
    got += n;
  }
  offset_ += got;
  if (got == 0) return false;
  if (got < kBlock) fail(Code::kDataLoss, member, "archive is truncated (partial header block)");
  return true;
}

void TarReader::skip(uint64_t n, const std::string& member) {
  if (n == 0) return;
  if (!scratch_) scratch_.reset(new uint8_t[kScratch]);
  while (n > 0) {
    size_t got = in_.read(scratch_.get(), static_cast<size_t>(std::min<uint64_t>(n, kScratch)));
    if (got == 0) fail(Code::kDataLoss, member, "archive is truncated (data ends early)");
    n -= got;
    offset_ += got;
  }
}

std::string TarReader::read_meta(uint64_t size, const std::string& member) {
  std::string out(static_cast<size_t>(size), '\0');
  size_t got = 0;
  while (got < out.size()) {
    size_t n = in_.read(out.data() + got, out.size() - got);
    if (n == 0) fail(Code::kDataLoss, member, "archive is truncated (extended header ends early)");
    got += n;
  }
  offset_ += got;
  skip(padded(size) - size, member);
  return out;
}

size_t TarReader::read_data(void* buf, size_t n) {
  if (data_left_ == 0 || n == 0) return 0;
  size_t got = in_.read(buf, static_cast<size_t>(std::min<uint64_t>(n, data_left_)));
  if (got == 0) fail(Code::kDataLoss, current_, "archive is truncated (data ends early)");
  data_left_ -= got;
  offset_ += got;
  return got;
}

bool TarReader::next(TarEntry& out) {
  if (ended_) return false;
  skip(data_left_ + pad_left_, current_);
  data_left_ = pad_left_ = 0;
  current_.clear();

  std::map<std::string, std::string> pax = global_pax_;  // records for the next member
  std::vector<std::pair<std::string, std::string>> local;  // its 'x' records
  std::optional<std::string> long_name, long_link;
  bool pending = false;  // an extended header waits for its member
  uint8_t h[kBlock];

  for (;;) {
    entry_at_ = offset_;
    if (!read_block(h, "")) {
      if (pending) fail(Code::kDataLoss, "", "archive is truncated (extended header without a member)");
      ended_ = true;
      return false;
    }
    if (all_zero(h)) {
      // End of archive: two zero blocks, or one at the very end of the stream.
      entry_at_ = offset_;
      if (read_block(h, "") && !all_zero(h)) fail(Code::kDataLoss, "", "a zero block is followed by a header");
      if (pending) fail(Code::kDataLoss, "", "archive is truncated (extended header without a member)");
      ended_ = marker_ = true;
      return false;
    }

    // The member's name as far as known, for messages.
    std::string hdr_name = field_str(h, kName, 100);
    const std::string& member = long_name ? *long_name : hdr_name;
    if (!checksum_ok(h)) {
      if (entry_at_ == 0) fail(Code::kDataLoss, "", "header checksum mismatch (not a tar archive, or corrupt)");
      fail(Code::kDataLoss, member, "header checksum mismatch (corrupt archive)");
    }

    const char type = static_cast<char>(h[kType]);
    auto size_field = parse_number(h, kSize, 12);
    if (!size_field || *size_field < 0) fail(Code::kInvalidArgument, member, "malformed size field");
    uint64_t hsize = static_cast<uint64_t>(*size_field);

    if (type == 'x' || type == 'X' || type == 'g') {  // 'X': Solaris' name for 'x'
      if (hsize > kMaxPaxSize) fail(Code::kInvalidArgument, member, "pax extended header larger than 1 MiB");
      std::string data = read_meta(hsize, member);
      std::vector<std::pair<std::string, std::string>> recs;
      if (!parse_pax_records(data, recs)) fail(Code::kInvalidArgument, member, "malformed pax extended header");
      for (const auto& r : recs)
        if (r.first.rfind("GNU.sparse.", 0) == 0)
          fail(Code::kUnimplemented, member, "sparse tar members are not supported");
      if (type == 'g') {
        merge_pax(global_pax_, recs, false);
        merge_pax(pax, recs, false);
      } else {
        local.insert(local.end(), recs.begin(), recs.end());
        pending = true;
      }
      continue;
    }
    if (type == 'L' || type == 'K') {
      if (hsize > kMaxName + 1) fail(Code::kInvalidArgument, member, "GNU long name longer than 4096 bytes");
      std::string data = read_meta(hsize, member);
      size_t nul = data.find('\0');
      if (nul != std::string::npos) {
        if (data.find_first_not_of('\0', nul) != std::string::npos)
          fail(Code::kInvalidArgument, member, "NUL byte in a GNU long name");
        data.resize(nul);
      }
      (type == 'L' ? long_name : long_link) = std::move(data);
      pending = true;
      continue;
    }
    if (type == 'S') fail(Code::kUnimplemented, member, "sparse tar members are not supported");
    if (type >= 'A' && type <= 'Z' && type != 'D') {
      // Vendor extension (volume label, multi-volume continuation...): nothing to extract.
      skip(padded(hsize), member);
      local.clear();
      pax = global_pax_;
      long_name.reset();
      long_link.reset();
      pending = false;
      continue;
    }
    merge_pax(pax, local, false);

    TarEntry e;
    const bool ustar = std::memcmp(h + kMagic, "ustar", 6) == 0;
    std::string raw_name;
    if (auto it = pax.find("path"); it != pax.end()) {
      raw_name = it->second;
    } else if (long_name) {
      raw_name = *long_name;
    } else {
      raw_name = hdr_name;
      // POSIX ustar splits long names into prefix + name; star's variant has a shorter prefix.
      std::string prefix = field_str(h, kPrefix, std::memcmp(h + 508, "tar\0", 4) == 0 ? 131 : 155);
      if (ustar && !prefix.empty()) raw_name = prefix + "/" + raw_name;
    }
    std::string raw_link = field_str(h, kLinkname, 100);
    if (auto it = pax.find("linkpath"); it != pax.end())
      raw_link = it->second;
    else if (long_link)
      raw_link = *long_link;
    current_ = raw_name;

    if (raw_name.find('\0') != std::string::npos) fail(Code::kInvalidArgument, raw_name, "NUL byte in the name");
    if (raw_link.find('\0') != std::string::npos) fail(Code::kInvalidArgument, raw_name, "NUL byte in the link target");
    if (raw_name.size() > kMaxName) fail(Code::kInvalidArgument, raw_name, "name longer than 4096 bytes");
    if (raw_link.size() > kMaxName) fail(Code::kInvalidArgument, raw_name, "link target longer than 4096 bytes");

    switch (type) {
      case '0': case '\0': case '7':
        // Old tars mark directories only by the trailing slash.
        e.type = (type != '7' && !raw_name.empty() && raw_name.back() == '/') ? TarEntry::Type::kDir
                                                                               : TarEntry::Type::kFile;
        break;
      case '1': e.type = TarEntry::Type::kHardlink; break;
      case '2': e.type = TarEntry::Type::kSymlink; break;
      case '3': e.type = TarEntry::Type::kCharDev; break;
      case '4': e.type = TarEntry::Type::kBlockDev; break;
      case '5': case 'D': e.type = TarEntry::Type::kDir; break;  // 'D': GNU dumpdir, a directory plus a listing
      case '6': {
        auto sock = pax.find("SANDLET.type");
        e.type = sock != pax.end() && sock->second == "socket" ? TarEntry::Type::kSocket : TarEntry::Type::kFifo;
        break;
      }
      default:
        fail(Code::kInvalidArgument, raw_name,
             "unsupported entry type " + (type >= 0x20 && type < 0x7f ? "'" + std::string(1, type) + "'"
                                                                        : std::to_string(static_cast<uint8_t>(type))));
    }

    // Normalize the path: drop empty and "." components, refuse "..".
    auto normalize = [&](const std::string& p, const char* what) {
      std::string n;
      size_t i = 0;
      while (i <= p.size()) {
        size_t j = p.find('/', i);
        if (j == std::string::npos) j = p.size();
        std::string_view c(p.data() + i, j - i);
        if (c == "..") fail(Code::kInvalidArgument, raw_name, std::string(what) + " has a '..' component");
        if (!c.empty() && c != ".") {
          if (!n.empty()) n += '/';
          n += c;
        }
        i = j + 1;
      }
      return n;
    };
    e.path = normalize(raw_name, "path");
    if (e.path.empty() && e.type != TarEntry::Type::kDir)
      fail(Code::kInvalidArgument, raw_name, "names the root directory but is not a directory");
    if (e.type == TarEntry::Type::kHardlink) {
      e.link_target = normalize(raw_link, "hard link target");
      if (e.link_target.empty()) fail(Code::kInvalidArgument, raw_name, "hard link to the root directory or empty target");
    } else if (e.type == TarEntry::Type::kSymlink) {
      if (raw_link.empty()) fail(Code::kInvalidArgument, raw_name, "empty symlink target");
      e.link_target = raw_link;
    }

    auto header_num = [&](size_t off, size_t len, const char* field) {
      auto v = parse_number(h, off, len);
      if (!v) fail(Code::kInvalidArgument, raw_name, std::string("malformed ") + field + " field");
      return *v;
    };
    auto id_value = [&](const char* key, size_t off, const char* field) -> uint32_t {
      int64_t v;
      if (auto it = pax.find(key); it != pax.end()) {
        auto d = parse_decimal(it->second);
        if (!d || *d > std::numeric_limits<uint32_t>::max())
          fail(Code::kInvalidArgument, raw_name, std::string("malformed pax ") + key + " record");
        return static_cast<uint32_t>(*d);
      }
      v = header_num(off, 8, field);
      if (v < 0 || v > std::numeric_limits<uint32_t>::max())
        fail(Code::kInvalidArgument, raw_name, std::string(field) + " out of range");
      return static_cast<uint32_t>(v);
    };

    e.mode = static_cast<uint32_t>(header_num(kMode, 8, "mode")) & 07777;
    e.uid = id_value("uid", kUid, "uid");
    e.gid = id_value("gid", kGid, "gid");
    if (auto it = pax.find("mtime"); it != pax.end()) {
      if (!parse_pax_time(it->second, e.mtime_sec, e.mtime_nsec))
        fail(Code::kInvalidArgument, raw_name, "malformed pax mtime record");
    } else {
      e.mtime_sec = header_num(kMtime, 12, "mtime");
    }
    uint64_t size = hsize;
    if (auto it = pax.find("size"); it != pax.end()) {
      auto d = parse_decimal(it->second);
      if (!d || *d > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        fail(Code::kInvalidArgument, raw_name, "malformed pax size record");
      size = *d;
    }
    if (e.type == TarEntry::Type::kCharDev || e.type == TarEntry::Type::kBlockDev) {
      e.dev_major = id_value("SCHILY.devmajor", kDevMajor, "devmajor");
      e.dev_minor = id_value("SCHILY.devminor", kDevMinor, "devminor");
    }

    std::map<std::string, std::string> xattrs;
    for (const auto& [k, v] : pax) {
      std::string name, value;
      if (k.rfind("SCHILY.xattr.", 0) == 0) {
        name = k.substr(13);
        value = v;
      } else if (k.rfind("LIBARCHIVE.xattr.", 0) == 0) {
        auto n = url_decode(std::string_view(k).substr(17));
        auto d = base64_decode(v);
        if (!n || !d) fail(Code::kInvalidArgument, raw_name, "malformed pax record " + k);
        name = std::move(*n);
        value = std::move(*d);
      } else if (k == "RHT.security.selinux") {  // Red Hat's tar before SCHILY.xattr
        name = "security.selinux";
        value = v;
      } else {
        continue;
      }
      if (name.empty() || name.find('\0') != std::string::npos)
        fail(Code::kInvalidArgument, raw_name, "malformed xattr name in pax record " + k);
      xattrs[name] = std::move(value);
    }
    e.xattrs.assign(xattrs.begin(), xattrs.end());

    // Only regular files carry data; other types' size fields are ignored, as in Go's archive/tar
    // (Docker's reader). A GNU dumpdir's listing is skipped.
    if (e.type == TarEntry::Type::kFile) {
      e.size = size;
      data_left_ = size;
      pad_left_ = padded(size) - size;
    } else if (type == 'D') {
      skip(padded(size), raw_name);
    }
    out = std::move(e);
    return true;
  }
}

}  // namespace sandlet::image
