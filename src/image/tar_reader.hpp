// Streaming tar parser: ustar, POSIX pax ('x'/'g'), GNU long names and base-256 numbers, old v7 archives.
// Entries come out with normalized, validated paths; the data of each file entry is pulled through
// read_data (nothing is buffered beyond one header), so layer imports stream in constant memory.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/error.hpp"
#include "image/byte_reader.hpp"

namespace sandlet::image {

struct TarEntry {
  // kSocket: a fifo member marked SANDLET.type=socket (tar has no socket type; layer exports use it).
  enum class Type { kFile, kHardlink, kSymlink, kCharDev, kBlockDev, kDir, kFifo, kSocket };
  // Normalized: no leading "./" or "/", no trailing "/", no empty or "." components; "" = the root dir itself.
  std::string path;
  Type type = Type::kFile;
  uint32_t mode = 0;  // permission bits incl. setuid/setgid/sticky (07777)
  uint32_t uid = 0, gid = 0;
  int64_t mtime_sec = 0;
  uint32_t mtime_nsec = 0;
  uint64_t size = 0;        // size of the data (files only; 0 for every other type)
  std::string link_target;  // symlink target (verbatim) or hard link target (normalized like path)
  uint32_t dev_major = 0, dev_minor = 0;
  // Full names, e.g. "user.foo", "security.capability", "trusted.overlay.opaque"; sorted by name.
  std::vector<std::pair<std::string, std::string>> xattrs;
};

class TarReader {
 public:
  // `name_for_errors` names the archive in messages (e.g. the blob path).
  TarReader(ByteReader& in, std::string name_for_errors);

  // Reads the next entry; false at the end of the archive. Skips unread data of the previous entry.
  bool next(TarEntry& out);
  // Reads the data of the current entry; 0 at its end.
  size_t read_data(void* buf, size_t n);
  // The pax global ('g') records read so far.
  const std::map<std::string, std::string>& global_records() const { return global_pax_; }
  // Whether the archive ended with its end-of-archive zero block (not just where the file ends).
  bool ended_with_marker() const { return marker_; }

 private:
  bool read_block(uint8_t* block, const std::string& member);
  void skip(uint64_t n, const std::string& member);
  std::string read_meta(uint64_t size, const std::string& member);
  [[noreturn]] void fail(Code code, const std::string& member, const std::string& why) const;

  ByteReader& in_;
  std::string name_;
  uint64_t offset_ = 0;     // bytes of the (decompressed) archive consumed
  uint64_t data_left_ = 0;  // unread data bytes of the current entry
  uint64_t pad_left_ = 0;   // padding after them, up to the next 512-byte block
  uint64_t entry_at_ = 0;   // offset of the header being parsed or of the current entry, for errors
  std::string current_;     // path of the current entry, for the same
  bool ended_ = false;
  bool marker_ = false;
  std::map<std::string, std::string> global_pax_;  // 'g' records: apply to every following entry
  std::unique_ptr<uint8_t[]> scratch_;             // for skipping data
};

}  // namespace sandlet::image
