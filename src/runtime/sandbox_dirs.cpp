#include "runtime/sandbox_dirs.hpp"

#include <sys/stat.h>

#include <cctype>
#include <cstdio>

#include "common/error.hpp"
#include "runtime/state_dir.hpp"
#include "sys/fs_util.hpp"

namespace sandlet {

void SandboxDirs::create(const SandboxRecord& rec) const {
  const std::string d = dir(rec.id);
  if (::mkdir(d.c_str(), 0700) < 0) {
    // Another runtime on this root may have released the tmpfs state directory when it closed.
    if (errno != ENOENT) throw_errno("mkdir " + d);
    prepare_state(root_);
    if (::mkdir(d.c_str(), 0700) < 0) throw_errno("mkdir " + d);
  }
  try {
    write(rec);
  } catch (...) {
    sys::remove_tree(d);
    throw;
  }
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
