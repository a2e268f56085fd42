// The file system QEMU and its multiplexer see: a small tmpfs holding only read-only binds of /usr (QEMU,
// its libraries and firmware; the root's bin/lib links as the host has them), the loader's cache, the few
// device nodes QEMU opens, a /proc that shows only the jail's own processes (hidepid), and a 1 MiB /tmp.
// Everything else of the host (its /tmp, /dev/shm, /run, sockets, home directories) is out of reach.
#pragma once
#include <sys/types.h>

#include <string>
#include <vector>

namespace sandlet::microvm {

class JailRoot final {
 public:
  // Plans the root in `dir` (an empty directory that exists) for uid `uid`; allocates, so it is called
  // before the fork. Throws when the host lacks what QEMU needs (e.g. QEMU outside /usr).
  static JailRoot plan(const std::string& dir, uid_t uid, bool kvm, const std::string& qemu);
  // In the forked child, in its own mount namespace, as root: builds the root and pivots into it. Only
  // system calls. False (errno set) on failure.
  bool enter() const noexcept;

 private:
  struct Op {
    enum Kind { kTmpfs, kMkdir, kBindReadOnly, kBindDevice, kOwnDevice, kSymlink, kProc, kTmp, kSeal } kind;
    std::string a, b;  // source / target, or link target / link path
    dev_t rdev = 0;    // kOwnDevice: the device number
  };
  std::vector<Op> ops_;
  std::string dir_;
  uid_t uid_ = 0;
};

}  // namespace sandlet::microvm
