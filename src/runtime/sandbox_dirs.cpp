#include "runtime/sandbox_dirs.hpp"

#include <sys/stat.h>

#include <cctype>
#include <cstdio>

#include "common/error.hpp"
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
    sys::write_new_file(staging + "/record.json", rec.to_json());
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

void SandboxDirs::write(const SandboxRecord& rec) const { sys::write_file_atomic(dir(rec.id) + "/record.json", rec.to_json()); }

std::optional<SandboxRecord> SandboxDirs::load(const std::string& id) const {
  auto text = sys::read_file_if_exists(dir(id) + "/record.json", 1 << 20);
  if (!text) return std::nullopt;
  return SandboxRecord::from_json(*text);
}

std::optional<SandboxRecord> SandboxDirs::load_retired(const std::string& id) const {
  auto text = sys::read_file_if_exists(retired_dir(id) + "/record.json", 1 << 20);
  if (!text) return std::nullopt;
  return SandboxRecord::from_json(*text);
}

void SandboxDirs::retire(const std::string& id) const { (void)std::rename(dir(id).c_str(), retired_dir(id).c_str()); }

void SandboxDirs::remove(const std::string& id) const noexcept {
  try {
    sys::remove_tree(dir(id));
    sys::remove_tree(retired_dir(id));
  } catch (...) {
    // What is left is gc's: a retired directory is finished by the next sweep.
  }
}

std::vector<std::string> SandboxDirs::names() const { return sys::list_dir(base_); }

bool SandboxDirs::valid_id(const std::string& id) {
  if (id.empty() || id.size() > 64) return false;
  for (char c : id)
    if (!std::isxdigit(static_cast<unsigned char>(c))) return false;
  return true;
}

}  // namespace sandlet
