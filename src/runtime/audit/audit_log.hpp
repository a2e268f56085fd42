// The audit log of a runtime root (docs/AUDIT.md): JSON Lines at <root>/audit/audit.jsonl, in a directory
// only root may enter (0700, files 0600) and that nothing mounts into a sandbox. Every process that opens a
// runtime on the root appends to it (CLI invocations, a trainer, gc): each record is one write(2) of one
// whole line on an O_APPEND descriptor, under a shared flock of <root>/audit/audit.lock; rotation by size
// renames the files under the exclusive lock, so a rotated file is final and no line is lost or doubled.
// A writer that finds the path renamed under it reopens before writing.
//
// Writing never fails a sandbox operation and never prints: a record that could not be written is counted
// (stats(): failed, last_error) and the operation goes on.
#pragma once
#include <sys/types.h>

#include <boost/json/object.hpp>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "runtime/audit/audit_text.hpp"
#include "sys/fd.hpp"

namespace sandlet {

struct AuditOptions {
  uint64_t max_bytes = 64ull << 20;  // rotate once the live file would grow past this (>= kAuditMaxLine)
  uint32_t keep = 5;                 // rotated files kept: audit.jsonl.1 (newest) .. audit.jsonl.<keep>
};


using AuditLabels = std::map<std::string, std::string>;

class AuditLog final {
 public:
  // `dir`: the audit directory (made 0700 if missing). Never throws: a log that cannot be set up counts
  // every record as failed.
  AuditLog(std::string dir, AuditOptions options);

  // The live file's path.
  const std::string& path() const { return path_; }
  static std::string dir_of_root(const std::string& root) { return root + "/audit"; }
  static std::string file_of_root(const std::string& root) { return dir_of_root(root) + "/audit.jsonl"; }

  // One record: {"ts","event","sandbox","labels","pid", ...fields}. Thread-safe; never throws.
  void write(const char* event, const std::string& sandbox, const AuditLabels& labels,
             boost::json::object fields) noexcept;

  // A policy denial seen for a sandbox (what other parts call): `kind` "seccomp", "landlock" or "network";
  // `details` says what was denied (syscall, path, address and port, ...). Event "denial".
  void denial(const std::string& sandbox, const AuditLabels& labels, const std::string& kind,
              boost::json::object details) noexcept;
  // A named policy relaxation granted at create (e.g. "ptrace"), with its details. Event "policy".
  void policy(const std::string& sandbox, const AuditLabels& labels, const std::string& relaxation,
              boost::json::object details) noexcept;

  struct Stats {
    uint64_t written = 0, failed = 0, rotations = 0, truncated = 0;
    std::string last_error;
  };
  Stats stats() const;

 private:
  bool ensure_open();           // with mutex_ held
  void rotate_if_needed(size_t incoming);  // with mutex_ and the shared lock held
  void append(const std::string& line);   // throws

  const std::string dir_, path_, lock_path_;
  const AuditOptions options_;
  mutable std::mutex mutex_;
  sys::UniqueFd fd_, lock_fd_;
  ino_t ino_ = 0;
  dev_t dev_ = 0;
  Stats stats_;
};

}  // namespace sandlet
