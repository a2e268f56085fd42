// Streaming POSIX pax tar writer (what `tar tvf` reads): ustar headers, and a pax 'x' header before a
// member whenever a value does not fit ustar exactly (long or non-ASCII names, nanosecond or negative
// mtimes, large ids, sizes or device numbers, xattrs as SCHILY.xattr records). Data is pushed per member.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "image/byte_writer.hpp"

namespace sandlet::image {

struct TarMember {
  std::string path;  // relative, no leading "/" or "./"; "" = the root directory (written as "./")
  char type = '0';   // ustar typeflag: '0' file, '1' hard link, '2' symlink, '3' char, '4' block, '5' dir, '6' fifo
  uint32_t mode = 0;  // permission bits (07777)
  uint32_t uid = 0, gid = 0;
  int64_t mtime_sec = 0;
  uint32_t mtime_nsec = 0;
  uint64_t size = 0;        // data bytes that follow (type '0' only)
  std::string link;         // symlink target, or the hard link's target path
  uint32_t dev_major = 0, dev_minor = 0;
  std::vector<std::pair<std::string, std::string>> xattrs;  // full names
  std::vector<std::pair<std::string, std::string>> records;  // further pax records (vendor keys)
};

class TarWriter final {
 public:
  TarWriter(ByteWriter& out, std::string name_for_errors) : out_(out), name_(std::move(name_for_errors)) {}

  // A pax global header ('g'); records apply to the whole archive.
  void global_header(const std::vector<std::pair<std::string, std::string>>& records);
  // Writes the member's header(s); then exactly `m.size` bytes go through data().
  void begin(const TarMember& m);
  void data(const void* buf, size_t n);
  // Writes the end-of-archive marker (two zero blocks) and finishes the writer.
  void finish();

  uint64_t members() const { return members_; }

 private:
  void end_member();
  void header(const std::string& name, char type, const TarMember& m, uint64_t size);
  void pax(char type, const std::string& name, const std::vector<std::pair<std::string, std::string>>& records);

  ByteWriter& out_;
  std::string name_;
  uint64_t data_left_ = 0, pad_ = 0;
  uint64_t members_ = 0;
};

// One pax record "<len> <key>=<value>\n" (len counts the whole record, itself included).
std::string pax_record(const std::string& key, const std::string& value);

}  // namespace sandlet::image
