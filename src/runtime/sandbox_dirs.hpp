// Where sandboxes live on the host: <root>/sandboxes/<id>/ holds the record (and whatever the backend puts
// there, e.g. the agent's socket); <root>/sandboxes/.reclaim-<id>/ is a sandbox being reclaimed (the
// lifecycle's "ending", see lifecycle.hpp); <root>/sandboxes/.new-<pid>-<id>/ is one being made by process
// <pid> (for a few microseconds, or left by a crash). <root>/sandboxes may be a symlink into tmpfs (state_dir.hpp).
#pragma once
#include <sys/stat.h>
#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "runtime/record.hpp"

namespace sandlet {

class SandboxDirs final {
 public:
  explicit SandboxDirs(std::string root) : root_(std::move(root)), base_(root_ + "/sandboxes") {}

  std::string dir(const std::string& id) const { return base_ + "/" + id; }
  std::string retired_dir(const std::string& id) const { return base_ + "/.reclaim-" + id; }
  // Makes the directory of a new sandbox and writes its first record: from here on gc sees a crash.
  void create(const SandboxRecord& rec) const;
  void write(const SandboxRecord& rec, struct stat* written = nullptr) const;  // atomic replace
  // The record of a sandbox (nullopt when there is none); DATA_LOSS when damaged.
  std::optional<SandboxRecord> load(const std::string& id) const;
  std::optional<SandboxRecord> load_retired(const std::string& id) const;
  // running/paused/creating -> ending: out of sight (no longer listed or attachable) in one rename.
  void retire(const std::string& id) const;
  // ending -> reclaimed: removes both directories, each record last. Never throws.
  void remove(const std::string& id) const noexcept;
  // A retired directory that has no record file any more: a removal a crash cut short (nothing else of
  // the sandbox is left).
  bool retired_without_record(const std::string& id) const;
  // Entry names under <root>/sandboxes: ids, ".reclaim-<id>" for retired ones, ".new-<pid>-<id>" staging.
  std::vector<std::string> names() const;
  std::string path_of(const std::string& name) const { return base_ + "/" + name; }

  static bool valid_id(const std::string& id);
  // The creator of a staging directory (by its name), or nullopt for any other name.
  static std::optional<pid_t> staging_owner(const std::string& name);
  static constexpr const char* kRetiredPrefix = ".reclaim-";
  static constexpr const char* kStagingPrefix = ".new-";
  static constexpr const char* kRecordFile = "record.json";

 private:
  const std::string root_, base_;
};

}  // namespace sandlet
