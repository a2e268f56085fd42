#include "snapshot/manifest.hpp"

#include <cstring>

#include "common/error.hpp"
#include "image/sha256.hpp"
#include "proto/wire.hpp"

namespace sandlet::snapshot {
namespace {

constexpr char kMagic[8] = {'S', 'N', 'A', 'P', 'M', 'A', 'N', '1'};
constexpr uint32_t kVersion = 2;
constexpr size_t kMaxBytes = kMaxManifestBytes;
constexpr uint64_t kMaxEntries = 4u << 20;

}  // namespace

std::string encode_manifest(const Manifest& m) {
  wire::Writer w;
  w.u32(kVersion);
  w.str(m.layer);
  w.u64(m.entries.size());
  for (const auto& [path, e] : m.entries) {
    w.str(path);
    w.u64(e.ino);
    w.u64(static_cast<uint64_t>(e.ctime_ns));
    w.u64(static_cast<uint64_t>(e.mtime_ns));
    w.u64(e.size);
    w.u32(e.mode);
  }
  std::string body = std::move(w.data());
  if (body.size() + sizeof kMagic + 32 > kMaxBytes) return "";
  image::Digest sum = image::sha256(body.data(), body.size());
  std::string out(kMagic, sizeof kMagic);
  out.append(reinterpret_cast<const char*>(sum.data()), sum.size());
  out += body;
  return out;
}

Manifest decode_manifest(const std::string& data, const std::string& shown) {
  auto bad = [&](const char* why) { return Error(Code::kDataLoss, "snapshot manifest " + shown + ": " + why); };
  if (data.size() > kMaxBytes) throw bad("larger than 256 MiB");
  if (data.size() < sizeof kMagic + 32 || std::memcmp(data.data(), kMagic, sizeof kMagic) != 0) throw bad("not a manifest");
  const char* body = data.data() + sizeof kMagic + 32;
  const size_t body_len = data.size() - sizeof kMagic - 32;
  image::Digest sum = image::sha256(body, body_len);
  if (std::memcmp(sum.data(), data.data() + sizeof kMagic, 32) != 0) throw bad("checksum mismatch");
  Manifest m;
  try {
    wire::Reader r(std::string_view(body, body_len));
    if (r.u32() != kVersion) throw bad("unknown version");
    m.layer = r.str();
    uint64_t n = r.u64();
    if (n > kMaxEntries) throw bad("too many entries");
    for (uint64_t i = 0; i < n; ++i) {
      std::string path = r.str();
      if (!r.ok()) break;
      EntryStamp e;
      e.ino = r.u64();
      e.ctime_ns = static_cast<int64_t>(r.u64());
      e.mtime_ns = static_cast<int64_t>(r.u64());
      e.size = r.u64();
      e.mode = r.u32();
      m.entries.emplace(std::move(path), e);
    }
    if (!r.ok() || !r.at_end()) throw bad("truncated or trailing data");
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw bad(e.what());
  }
  return m;
}

}  // namespace sandlet::snapshot
