// What a snapshot saw of a sandbox's writable layer: every entry's path with the inode, change time and type
// it had. The next (incremental) snapshot packs only what differs and whiteouts for what is gone. Kept in the
// sandbox's directory by the runtime; a file of this module's own format (magic, version, checksum).
#pragma once
#include <cstdint>
#include <map>
#include <string>

namespace sandlet::snapshot {

struct EntryStamp {
  uint64_t ino = 0;
  int64_t ctime_ns = 0;  // 0: "changed" whatever it looks like next time (it changed too recently to tell)
  int64_t mtime_ns = 0;
  uint64_t size = 0;
  uint32_t mode = 0;  // type and permission bits
  bool operator==(const EntryStamp& o) const {
    return ctime_ns != 0 && ino == o.ino && ctime_ns == o.ctime_ns && mtime_ns == o.mtime_ns && size == o.size &&
           mode == o.mode;
  }
};

struct Manifest {
  std::string layer;                          // digest of the snapshot it describes
  std::map<std::string, EntryStamp> entries;  // by path inside the sandbox ("/etc/passwd"); "/" not listed
};

// The file form. decode throws DATA_LOSS naming `shown` on anything malformed (caps: kMaxManifestBytes,
// 4 Mi entries); encode returns "" for a manifest over the cap (the next snapshot is then a full one).
constexpr size_t kMaxManifestBytes = 256u << 20;
std::string encode_manifest(const Manifest& m);
Manifest decode_manifest(const std::string& data, const std::string& shown);

}  // namespace sandlet::snapshot
