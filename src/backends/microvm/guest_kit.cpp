#include "backends/microvm/guest_kit.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "common/error.hpp"
#include "image/sha256.hpp"
#include "sys/fd.hpp"
#include "sys/fs_util.hpp"

extern "C" const char sandlet_vm_init_blob[];
extern "C" const char sandlet_vm_init_blob_end[];
extern "C" const char sandlet_vm_init_sha256[];

namespace sandlet::microvm {
namespace {

constexpr const char* kDefaultKit = "/var/cache/sandlet/microvm-kernel/default";

std::string vm_init_bytes() {
  return std::string(sandlet_vm_init_blob, static_cast<size_t>(sandlet_vm_init_blob_end - sandlet_vm_init_blob));
}

// The initramfs in the kernel's "newc" cpio format (Documentation/driver-api/early-userspace): a header of
// hex fields per entry, names and data padded to 4 bytes, a TRAILER!!! entry at the end.
class CpioWriter {
 public:
  void dir(const std::string& name) { entry(name, 040755, "", 0, 0); }
  void file(const std::string& name, unsigned mode, const std::string& data) { entry(name, 0100000 | mode, data, 0, 0); }
  void char_device(const std::string& name, unsigned mode, unsigned major, unsigned minor) {
    entry(name, 020000 | mode, "", major, minor);
  }
  std::string finish() {
    entry("TRAILER!!!", 0, "", 0, 0);
    return std::move(out_);
  }

 private:
  void entry(const std::string& name, unsigned mode, const std::string& data, unsigned rmaj, unsigned rmin) {
    char hdr[111];
    std::snprintf(hdr, sizeof hdr, "070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X", ++ino_, mode, 0u, 0u,
                  1u, 0u, static_cast<unsigned>(data.size()), 0u, 0u, rmaj, rmin,
                  static_cast<unsigned>(name.size() + 1), 0u);
    out_.append(hdr, 110);
    out_.append(name);
    out_.push_back('\0');
    pad();
    out_.append(data);
    pad();
  }
  void pad() { out_.append((4 - out_.size() % 4) % 4, '\0'); }
  std::string out_;
  unsigned ino_ = 0;
};

}  // namespace

std::string kernel_kit_location(const std::string& configured) {
  if (!configured.empty()) return configured;
  if (const char* env = std::getenv("SANDLET_MICROVM_KERNEL"); env && *env) return env;
  return kDefaultKit;
}

std::string accel_setting() {
  const char* env = std::getenv("SANDLET_MICROVM_ACCEL");
  return env ? env : "";
}

KernelKit find_kernel_kit(const std::string& configured, bool modules) {
  const std::string where = kernel_kit_location(configured);
  const std::string setting = !configured.empty() ? "the runtime's microVM kernel"
                              : std::getenv("SANDLET_MICROVM_KERNEL") && *std::getenv("SANDLET_MICROVM_KERNEL")
                                  ? "$SANDLET_MICROVM_KERNEL"
                                  : "the default microVM kernel";
  KernelKit kit;
  kit.dir = where;
  kit.vmlinux = where + "/vmlinux";
  struct stat st;
  if (::stat(kit.vmlinux.c_str(), &st) != 0 || !S_ISREG(st.st_mode))
    throw Error(Code::kNotFound, setting + " is missing: no kernel at " + kit.vmlinux +
                                     " (make one with scripts/microvm/make-kernel-kit.sh; docs/backends/microvm.md)");
  if (auto rel = sys::read_file_if_exists(where + "/release", 256)) {
    kit.release = *rel;
    while (!kit.release.empty() && kit.release.back() == '\n') kit.release.pop_back();
  }
  if (!modules) return kit;
  if (auto order = sys::read_file_if_exists(where + "/modules/order", 1 << 16)) {
    size_t pos = 0;
    while (pos < order->size()) {
      size_t end = order->find('\n', pos);
      if (end == std::string::npos) end = order->size();
      std::string name = order->substr(pos, end - pos);
      pos = end + 1;
      if (name.empty()) continue;
      if (name.find('/') != std::string::npos || name[0] == '.')
        throw Error(Code::kInvalidArgument, setting + ": " + where + "/modules/order names \"" + name + "\", not a file of modules/");
      kit.modules.push_back(name);
    }
  }
  return kit;
}

std::string initramfs_for(const KernelKit& kit, const std::string& cache_dir) {
  // Named by what goes in: the init's digest, the kit's path, and each module's name, size and mtime
  // (hashing megabytes of modules on every process's first create would cost more than it saves).
  image::Sha256 h;
  h.update(std::string_view(sandlet_vm_init_sha256));
  h.update(kit.dir);
  for (const std::string& m : kit.modules) {
    struct stat st;
    const std::string path = kit.dir + "/modules/" + m;
    if (::stat(path.c_str(), &st) != 0) throw_errno("microVM kernel kit: module " + path);
    h.update(m + ":" + std::to_string(st.st_size) + ":" + std::to_string(st.st_mtim.tv_sec) + "." +
             std::to_string(st.st_mtim.tv_nsec) + "\n");
  }
  const std::string path = cache_dir + "/initramfs-" + image::to_hex(h.finish()).substr(0, 24) + ".cpio";
  if (::access(path.c_str(), R_OK) == 0) return path;
  sys::mkdir_p(cache_dir, 0755);
  CpioWriter w;
  for (const char* d : {"dev", "proc", "sys", "newroot", "upper", "layers", "modules"}) w.dir(d);
  w.char_device("dev/console", 0600, 5, 1);
  w.file("init", 0755, vm_init_bytes());
  std::string order;
  for (const std::string& m : kit.modules) {
    w.file("modules/" + m, 0644, sys::read_file(kit.dir + "/modules/" + m, 64u << 20));
    order += m + "\n";
  }
  w.file("modules/order", 0644, order);
  const std::string tmp = path + ".tmp." + sys::random_hex(8);
  sys::write_new_file(tmp, w.finish(), 0644);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int e = errno;
    ::unlink(tmp.c_str());
    throw_errno("install the microVM initramfs at " + path, e);
  }
  return path;
}

std::string vm_init_binary(const std::string& dir) {
  sys::mkdir_p(dir, 0700);
  const std::string path = dir + "/sandlet-vm-init-" + std::string(sandlet_vm_init_sha256).substr(0, 16);
  const size_t size = static_cast<size_t>(sandlet_vm_init_blob_end - sandlet_vm_init_blob);
  struct stat st;
  if (::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == ::geteuid() && !(st.st_mode & 022) &&
      static_cast<size_t>(st.st_size) == size)
    return path;
  const std::string tmp = path + ".tmp." + sys::random_hex(8);
  sys::write_new_file(tmp, vm_init_bytes(), 0555);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int e = errno;
    ::unlink(tmp.c_str());
    throw_errno("install sandlet-vm-init at " + path, e);
  }
  return path;
}

}  // namespace sandlet::microvm
