// Staging secret files in detached tmpfs mounts (secret_stage.hpp).
#include "recipe/secret_stage.hpp"

#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <linux/mount.h>

#include "common/error.hpp"
#include "sys/mount_api.hpp"

namespace sandlet::build {
namespace {

void write_secret(int dir, const SecretMount& m, const std::string& value, const std::string& what) {
  const std::string name = m.target.substr(m.target.rfind('/') + 1);
  sys::UniqueFd fd(::openat(dir, name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!fd) throw Error(Code::kInternal, what + ": create the secret file", errno);
  for (size_t done = 0; done < value.size();) {
    ssize_t n = ::write(fd.get(), value.data() + done, value.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw Error(Code::kInternal, what + ": write the secret file", n < 0 ? errno : EIO);
    done += static_cast<size_t>(n);
  }
  // The ids as the step sees them: the mount is idmapped through the step's user namespace.
  if (::fchown(fd.get(), m.uid, m.gid) != 0) throw Error(Code::kInternal, what + ": chown the secret file", errno);
  if (::fchmod(fd.get(), m.mode) != 0) throw Error(Code::kInternal, what + ": chmod the secret file", errno);
}

}  // namespace

SecretStage::SecretStage(const std::vector<SecretMount>& mounts, const std::map<std::string, std::string>& values,
                         const std::string& where) {
  std::map<std::string, std::vector<const SecretMount*>> by_dir;
  for (const auto& m : mounts)
    if (values.count(m.id)) by_dir[secret_dir(m.target)].push_back(&m);
  for (const auto& [dir, group] : by_dir) {
    uint64_t bytes = 64u << 10;
    for (const auto* m : group) bytes += values.at(m->id).size() + 4096;
    const std::string what = where + ": secret directory " + dir;
    Dir d;
    d.target = dir;
    try {
      d.mnt = sys::FsContext("tmpfs")
                  .set("size", std::to_string(bytes))
                  .set("nr_inodes", std::to_string(group.size() + 8))
                  .set("mode", "0755")
                  .mount(MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC);
    } catch (const Error& e) {
      throw Error(e.code(), what + ": " + e.what(), e.err_no());
    }
    for (const auto* m : group) write_secret(d.mnt.get(), *m, values.at(m->id), what + " (" + m->target + ")");
    dirs_.push_back(std::move(d));
  }
}

void SecretStage::add_mounts(Spec& spec) const {
  for (const auto& d : dirs_)
    spec_add_mount(spec, "/proc/self/fd/" + std::to_string(d.mnt.get()), d.target, /*readonly=*/true);
}

std::vector<std::string> SecretStage::excludes() const {
  std::vector<std::string> out;
  for (const auto& d : dirs_) out.push_back(d.target);
  return out;
}

}  // namespace sandlet::build
