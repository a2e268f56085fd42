#include "runtime/sandbox_dirs.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdio>

#include "common/error.hpp"
#include "common/fault_point.hpp"
#include "runtime/state_dir.hpp"
#include "sys/fs_util.hpp"

namespace sandlet {

// The directory appears with its record in one rename: gc never finds a sandbox directory without a
// record. A crash before the rename leaves a staging directory named after its creator, which gc removes
// once that process is gone (nothing else exists yet: backends start after this).
void SandboxDirs::create(const SandboxRecord& rec) const {
  const std::string staging = base_ + "/" + kStagingPrefix + std::to_string(rec.owner_pid) + "-" + rec.id;
  if (::mkdir(staging.c_str(), 0700) < 0) {
    // Another runtime on this root may have released the tmpfs state directory when it closed.
    if (errno != ENOENT) throw_errno("mkdir " + staging);
    prepare_state(root_);
    if (::mkdir(staging.c_str(), 0700) < 0) throw_errno("mkdir " + staging);
  }
  try {
    sys::write_new_file(staging + "/" + kRecordFile, rec.to_json());
    if (::rename(staging.c_str(), dir(rec.id).c_str()) < 0) throw_errno("rename " + staging);
  } catch (...) {
    sys::remove_tree(staging);
    throw;
  }
}

std::optional<pid_t> SandboxDirs::staging_owner(const std::string& name) {
  if (name.rfind(kStagingPrefix, 0) != 0) return std::nullopt;
  const size_t start = std::string(kStagingPrefix).size();
  const size_t dash = name.find('-', start);
  if (dash == std::string::npos || dash == start) return std::nullopt;
  pid_t pid = 0;
  for (size_t i = start; i < dash; ++i) {
    if (name[i] < '0' || name[i] > '9' || pid > 100000000) return std::nullopt;
    pid = pid * 10 + (name[i] - '0');
  }
  return pid;
}

void SandboxDirs::write(const SandboxRecord& rec, struct stat* written) const {
  sys::write_file_atomic(dir(rec.id) + "/" + kRecordFile, rec.to_json(), 0600, written);
}

std::optional<SandboxRecord> SandboxDirs::load(const std::string& id) const {
  auto text = sys::read_file_if_exists(dir(id) + "/" + kRecordFile, 1 << 20);
  if (!text) return std::nullopt;
  return SandboxRecord::from_json(*text);
}

std::optional<SandboxRecord> SandboxDirs::load_retired(const std::string& id) const {
  auto text = sys::read_file_if_exists(retired_dir(id) + "/" + kRecordFile, 1 << 20);
  if (!text) return std::nullopt;
  return SandboxRecord::from_json(*text);
}

void SandboxDirs::retire(const std::string& id) const { (void)std::rename(dir(id).c_str(), retired_dir(id).c_str()); }

// The record goes last: a crash in the middle leaves it with what it describes, and a retired directory
// without a record is known to be reclaimed (gc removes it at once).
static void remove_record_last(const std::string& dir) {
  const std::string record = SandboxDirs::kRecordFile;
  for (const auto& name : sys::list_dir(dir))
    if (name != record) sys::remove_tree(dir + "/" + name);
  fault_point("runtime.removing");
  if (::unlink((dir + "/" + record).c_str()) < 0 && errno != ENOENT) throw_errno("unlink record in " + dir);
  if (::rmdir(dir.c_str()) < 0 && errno != ENOENT) throw_errno("rmdir " + dir);
}

void SandboxDirs::remove(const std::string& id) const noexcept {
  for (const std::string& d : {dir(id), retired_dir(id)}) {
    try {
      remove_record_last(d);
    } catch (...) {
      // What is left is gc's: a retired directory is finished by the next sweep.
    }
  }
}

bool SandboxDirs::retired_without_record(const std::string& id) const {
  struct stat st;
  const std::string d = retired_dir(id);
  return ::stat(d.c_str(), &st) == 0 && S_ISDIR(st.st_mode) &&
         ::stat((d + "/" + kRecordFile).c_str(), &st) < 0 && errno == ENOENT;
}

std::vector<std::string> SandboxDirs::names() const { return sys::list_dir(base_); }

bool SandboxDirs::valid_id(const std::string& id) {
  if (id.empty() || id.size() > 64) return false;
  for (char c : id)
    if (!std::isxdigit(static_cast<unsigned char>(c))) return false;
  return true;
}

}  // namespace sandlet
