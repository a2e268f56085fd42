// Reads an audit log (audit_log.hpp) from its oldest rotated file to the live one, record by record, and
// keeps its place across rotations: files are identified by inode, and the set of files is looked at under
// the log's shared lock (no rotation runs meanwhile), so each line is read exactly once while the reader
// keeps up (lines of a file rotated past the last kept one before it got there are gone).
// One thread at a time per reader; never blocks except on that lock (a rotation: a few renames).
#pragma once
#include <sys/types.h>

#include <deque>
#include <map>
#include <string>

#include "sys/fd.hpp"

namespace sandlet {

struct AuditFilter {
  std::string sandbox;                        // "" = any
  std::map<std::string, std::string> labels;  // each must match
  double since = 0;                           // unix seconds; records at or after it (0 = all)
};

class AuditReader final {
 public:
  // `path`: the live file (AuditLog::path()); its rotated files are path.1 .. path.<keep>. A log that does
  // not exist yet reads as empty (the reader picks it up once it appears).
  AuditReader(std::string path, AuditFilter filter);
  // The next matching record (one JSON object, without its newline): true and *line set, or false when none
  // is there now (call again later to follow). Malformed lines are skipped (counted in skipped()).
  bool next(std::string* line);
  uint64_t skipped() const { return skipped_; }

 private:
  struct File {
    sys::UniqueFd fd;
    ino_t ino = 0;
    dev_t dev = 0;
  };
  bool read_line(std::string* line);  // from cur_, complete lines only
  void refresh();                     // cur_ at its end: queue what rotations made since
  bool matches(const std::string& line);
  static File open_file(const std::string& path);

  const std::string path_, lock_path_;
  const AuditFilter filter_;
  std::string since_text_;
  File cur_;
  std::deque<File> pending_;  // to read after cur_, oldest first
  std::string buf_;           // what was read from cur_ and not handed out yet
  size_t buf_pos_ = 0;
  uint64_t skipped_ = 0;
};

}  // namespace sandlet
