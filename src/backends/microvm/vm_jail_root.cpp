#include "backends/microvm/vm_jail_root.hpp"

#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <climits>

#include "common/error.hpp"

namespace sandlet::microvm {

JailRoot JailRoot::plan(const std::string& dir, uid_t uid, bool kvm, const std::string& qemu) {
  if (qemu.rfind("/usr/", 0) != 0)
    throw Error(Code::kUnavailable, "QEMU at " + qemu + " is outside /usr: the microVM's jail shows it only /usr");
  JailRoot j;
  j.dir_ = dir;
  j.uid_ = uid;
  j.ops_.push_back({Op::kTmpfs, "", dir});
  j.ops_.push_back({Op::kMkdir, "", dir + "/usr"});
  j.ops_.push_back({Op::kBindReadOnly, "/usr", dir + "/usr"});
  // The root's entries that point into /usr on a merged-/usr host are links there too; real directories
  // (an older layout) are bound read-only.
  for (const char* name : {"bin", "sbin", "lib", "lib32", "lib64", "libx32"}) {
    const std::string host = std::string("/") + name;
    struct stat st;
    if (::lstat(host.c_str(), &st) != 0) continue;
    if (S_ISLNK(st.st_mode)) {
      char target[PATH_MAX];
      ssize_t n = ::readlink(host.c_str(), target, sizeof target - 1);
      if (n <= 0) continue;
      j.ops_.push_back({Op::kSymlink, std::string(target, static_cast<size_t>(n)), dir + host});
    } else if (S_ISDIR(st.st_mode)) {
      j.ops_.push_back({Op::kMkdir, "", dir + host});
      j.ops_.push_back({Op::kBindReadOnly, host, dir + host});
    }
  }
  j.ops_.push_back({Op::kMkdir, "", dir + "/etc"});
  if (::access("/etc/ld.so.cache", R_OK) == 0) j.ops_.push_back({Op::kBindDevice, "/etc/ld.so.cache", dir + "/etc/ld.so.cache"});
  j.ops_.push_back({Op::kMkdir, "", dir + "/dev"});
  for (const char* node : {"null", "zero", "urandom", "random"})
    j.ops_.push_back({Op::kBindDevice, std::string("/dev/") + node, dir + "/dev/" + node});
  // /dev/kvm as a node of the jail's own, owned by its uid: hosts differ in who may open the host's (root
  // only, or a kvm group), and this one is reachable only from the jail's mount namespace.
  if (kvm) {
    struct stat kst;
    if (::stat("/dev/kvm", &kst) != 0 || !S_ISCHR(kst.st_mode)) throw_errno("stat /dev/kvm");
    j.ops_.push_back({Op::kOwnDevice, "", dir + "/dev/kvm", kst.st_rdev});
  }
  j.ops_.push_back({Op::kSymlink, "/proc/self/fd", dir + "/dev/fd"});  // QEMU opens its files as /dev/fd/N
  j.ops_.push_back({Op::kMkdir, "", dir + "/proc"});
  j.ops_.push_back({Op::kProc, "", dir + "/proc"});
  j.ops_.push_back({Op::kTmp, "", dir + "/tmp"});
  j.ops_.push_back({Op::kSeal, "", dir});
  return j;
}

bool JailRoot::enter() const noexcept {
  for (const Op& op : ops_) {
    const char* a = op.a.c_str();
    const char* b = op.b.c_str();
    switch (op.kind) {
      case Op::kTmpfs:
        if (::mount("tmpfs", b, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,nr_inodes=256,mode=0755") != 0) return false;
        break;
      case Op::kMkdir:
        if (::mkdir(b, 0755) != 0) return false;
        break;
      case Op::kBindReadOnly:
        if (::mount(a, b, nullptr, MS_BIND | MS_REC, nullptr) != 0 ||
            ::mount(nullptr, b, nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV, nullptr) != 0)
          return false;
        break;
      case Op::kBindDevice: {
        int fd = ::open(b, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (fd < 0) return false;
        ::close(fd);
        if (::mount(a, b, nullptr, MS_BIND, nullptr) != 0 ||
            ::mount(nullptr, b, nullptr, MS_REMOUNT | MS_BIND | MS_NOSUID | MS_NOEXEC, nullptr) != 0)
          return false;
        break;
      }
      case Op::kOwnDevice:
        // Made in the root's tmpfs (nodev), then bound onto itself as a mount that allows devices.
        if (::mknod(b, S_IFCHR | 0600, op.rdev) != 0 || ::chown(b, uid_, uid_) != 0 ||
            ::mount(b, b, nullptr, MS_BIND, nullptr) != 0 ||
            ::mount(nullptr, b, nullptr, MS_REMOUNT | MS_BIND | MS_NOSUID | MS_NOEXEC, nullptr) != 0)
          return false;
        break;
      case Op::kSymlink:
        if (::symlink(a, b) != 0) return false;
        break;
      case Op::kProc:
        // Only the jail's uid's processes (QEMU and its multiplexer) are visible in it.
        if (::mount("proc", b, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, "hidepid=2") != 0) return false;
        break;
      case Op::kTmp:
        if (::mkdir(b, 0700) != 0 || ::chown(b, uid_, uid_) != 0) return false;
        break;
      case Op::kSeal:
        if (::chdir(b) != 0 || ::mkdir(".old", 0700) != 0 || ::syscall(SYS_pivot_root, ".", ".old") != 0 ||
            ::umount2(".old", MNT_DETACH) != 0 || ::rmdir(".old") != 0 || ::chdir("/") != 0)
          return false;
        if (::mount(nullptr, "/", nullptr, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, "size=1m,nr_inodes=256,mode=0755") != 0)
          return false;
        break;
    }
  }
  return true;
}

}  // namespace sandlet::microvm
