#include "guest/vm/guest_boot.hpp"

#include <errno.h>
#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>

namespace sandlet::guest::vm {

namespace {

bool read_small_file(const char* path, std::string* out) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[4096];
  out->clear();
  for (;;) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n <= 0) break;
    out->append(buf, static_cast<size_t>(n));
    if (out->size() > (1u << 20)) break;
  }
  close(fd);
  return true;
}

std::string trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\r')) s.pop_back();
  return s;
}

Status mount_at(const char* src, const char* target, const char* type, unsigned long flags, const char* data) {
  mkdir(target, 0755);
  if (mount(src, target, type, flags, data) != 0) return errno_statusf(errno, "mount %s on %s", type, target);
  return Status::Ok();
}

// The block device whose serial is `serial` ("vdb"), found through sysfs.
std::string disk_with_serial(const char* serial) {
  int dir = open("/sys/block", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0) return "";
  std::string found;
  char buf[4096];
  for (;;) {
    long n = syscall(SYS_getdents64, dir, buf, sizeof buf);
    if (n <= 0) break;
    for (long off = 0; off < n;) {
      struct Entry {
        uint64_t ino;
        int64_t off;
        unsigned short reclen;
        unsigned char type;
        char name[];
      };
      const Entry* e = reinterpret_cast<const Entry*>(buf + off);
      off += e->reclen;
      if (std::strncmp(e->name, "vd", 2) != 0) continue;
      std::string value;
      if (read_small_file(("/sys/block/" + std::string(e->name) + "/serial").c_str(), &value) &&
          trimmed(value) == serial)
        found = e->name;
    }
  }
  close(dir);
  return found;
}

}  // namespace

long cmdline_number(const char* key, long fallback) {
  std::string line;
  if (!read_small_file("/proc/cmdline", &line)) return fallback;
  const std::string want = std::string(key) + "=";
  size_t at = 0;
  while ((at = line.find(want, at)) != std::string::npos) {
    if (at == 0 || line[at - 1] == ' ') {
      long v = 0;
      size_t i = at + want.size();
      bool any = false;
      while (i < line.size() && line[i] >= '0' && line[i] <= '9') v = v * 10 + (line[i++] - '0'), any = true;
      return any ? v : fallback;
    }
    at += want.size();
  }
  return fallback;
}

Status mount_kernel_filesystems() {
  if (Status s = mount_at("devtmpfs", "/dev", "devtmpfs", MS_NOSUID, "mode=0755"); !s.ok()) return s;
  if (Status s = mount_at("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr); !s.ok()) return s;
  return mount_at("sysfs", "/sys", "sysfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr);
}

Status load_modules() {
  std::string order;
  if (!read_small_file("/modules/order", &order)) return Status::Ok();  // a kernel with everything built in
  size_t pos = 0;
  while (pos < order.size()) {
    size_t end = order.find('\n', pos);
    if (end == std::string::npos) end = order.size();
    std::string name = order.substr(pos, end - pos);
    pos = end + 1;
    if (name.empty()) continue;
    const std::string path = "/modules/" + name;
    int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return errno_statusf(errno, "open module %s", name.c_str());
    long r = syscall(SYS_finit_module, fd, "", 0);
    int e = errno;
    close(fd);
    unlink(path.c_str());  // the initramfs is RAM: give it back
    if (r != 0 && e != EEXIST) return errno_statusf(e, "load module %s", name.c_str());
  }
  return Status::Ok();
}

Status mount_root(int layers) {
  if (layers < 1 || layers > 64) return make_status(SANDLET_INTERNAL, EINVAL, "sandlet.layers out of range");
  // Disks appear as their drivers probe them: wait a little for the last one.
  std::string upper_dev;
  for (int tries = 0; tries < 2000; ++tries) {
    upper_dev = disk_with_serial("sl-upper");
    char serial[32];
    std::snprintf(serial, sizeof serial, "sl-layer%d", layers - 1);
    if (!upper_dev.empty() && !disk_with_serial(serial).empty()) break;
    struct timespec ts = {0, 1000 * 1000};
    syscall(SYS_nanosleep, &ts, nullptr);
  }
  if (upper_dev.empty()) return make_status(SANDLET_INTERNAL, ENODEV, "the writable disk (serial sl-upper) is missing");
  std::string lowerdir;
  for (int i = layers - 1; i >= 0; --i) {  // OverlayFS lists the top layer first
    char serial[32], target[32];
    std::snprintf(serial, sizeof serial, "sl-layer%d", i);
    std::snprintf(target, sizeof target, "/layers/%d", i);
    const std::string dev = disk_with_serial(serial);
    if (dev.empty()) return errno_statusf(ENODEV, "layer disk %s", serial);
    mkdir("/layers", 0755);
    // A store layer's data blobs are EROFS's extra devices, in order.
    std::string opts;
    for (int b = 0;; ++b) {
      char blob_serial[48];
      std::snprintf(blob_serial, sizeof blob_serial, "%s-b%d", serial, b);
      const std::string blob = disk_with_serial(blob_serial);
      if (blob.empty()) break;
      opts += (opts.empty() ? "device=/dev/" : ",device=/dev/") + blob;
    }
    if (Status s = mount_at(("/dev/" + dev).c_str(), target, "erofs", MS_RDONLY, opts.empty() ? nullptr : opts.c_str());
        !s.ok())
      return s;
    if (!lowerdir.empty()) lowerdir += ':';
    lowerdir += target;
  }
  if (Status s = mount_at(("/dev/" + upper_dev).c_str(), "/upper", "ext4", MS_NOSUID | MS_NODEV, nullptr); !s.ok())
    return s;
  mkdir("/upper/upper", 0755);
  mkdir("/upper/work", 0755);
  const std::string opts = "lowerdir=" + lowerdir + ",upperdir=/upper/upper,workdir=/upper/work";
  if (Status s = mount_at("overlay", "/newroot", "overlay", 0, opts.c_str()); !s.ok()) return s;
  // The kernel's file systems move into the new root; then it becomes "/" (the initramfs stays below,
  // emptied of its modules; PID 1 runs from it).
  for (const char* fs : {"/dev", "/proc", "/sys"}) {
    const std::string target = std::string("/newroot") + fs;
    mkdir(target.c_str(), 0755);
    if (mount(fs, target.c_str(), nullptr, MS_MOVE, nullptr) != 0) return errno_statusf(errno, "move %s", fs);
  }
  if (chdir("/newroot") != 0) return errno_status(errno, "chdir /newroot");
  if (mount(".", "/", nullptr, MS_MOVE, nullptr) != 0) return errno_status(errno, "move the root");
  if (syscall(SYS_chroot, ".") != 0) return errno_status(errno, "chroot");
  if (chdir("/") != 0) return errno_status(errno, "chdir /");
  if (Status s = mount_at("devpts", "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620");
      !s.ok())
    return s;
  unlink("/dev/ptmx");
  symlink("pts/ptmx", "/dev/ptmx");
  if (Status s = mount_at("shm", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777,size=256m"); !s.ok()) return s;
  return mount_at("cgroup2", "/sys/fs/cgroup", "cgroup2", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr);
}

Status mount_toolkit_disk(int* fd) {
  *fd = -1;
  const std::string dev = disk_with_serial("sl-toolkit");
  if (dev.empty()) return make_status(SANDLET_INTERNAL, ENODEV, "the toolkit's disk (serial sl-toolkit) is missing");
  const int fs = static_cast<int>(syscall(SYS_fsopen, "erofs", FSOPEN_CLOEXEC));
  if (fs < 0) return errno_status(errno, "toolkit: fsopen erofs");
  Status st;
  const std::string source = "/dev/" + dev;
  if (syscall(SYS_fsconfig, fs, FSCONFIG_SET_STRING, "source", source.c_str(), 0) != 0)
    st = errno_status(errno, "toolkit: its disk");
  for (int b = 0; st.ok(); ++b) {
    char serial[32];
    std::snprintf(serial, sizeof serial, "sl-toolkit-b%d", b);
    const std::string blob = disk_with_serial(serial);
    if (blob.empty()) break;
    const std::string device = "/dev/" + blob;
    if (syscall(SYS_fsconfig, fs, FSCONFIG_SET_STRING, "device", device.c_str(), 0) != 0)
      st = errno_status(errno, "toolkit: a data blob's disk");
  }
  if (st.ok() && syscall(SYS_fsconfig, fs, FSCONFIG_SET_FLAG, "ro", nullptr, 0) != 0) st = errno_status(errno, "toolkit: ro");
  if (st.ok() && syscall(SYS_fsconfig, fs, FSCONFIG_CMD_CREATE, nullptr, nullptr, 0) != 0)
    st = errno_status(errno, "toolkit: mount its EROFS image");
  if (st.ok()) {
    *fd = static_cast<int>(syscall(SYS_fsmount, fs, FSMOUNT_CLOEXEC, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV));
    if (*fd < 0) st = errno_status(errno, "toolkit: fsmount");
  }
  close(fs);
  return st;
}

}  // namespace sandlet::guest::vm
