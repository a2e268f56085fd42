#include "guest/setup.hpp"

#include "guest/file_rules.hpp"
#include "guest/frame_parse.hpp"

#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <net/if.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <time.h>

#include <cstring>

namespace sandlet::guest {
namespace {

// recvmsg() that also collects any SCM_RIGHTS fds into fds[] (they arrive with the first bytes).
// Room for the most any set-up frame carries: a one-shot command's stdio and every host mount.
constexpr size_t kMaxConfigFds = 3 + proto::kMaxMounts + 2;  // + the toolkit, the denial log

ssize_t recv_with_fds(int sock, char* buf, size_t len, int* fds, size_t* nfds, size_t max_fds, bool* ctrunc) {
  alignas(struct cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxConfigFds)];
  for (;;) {
    struct iovec iov = {buf, len};
    struct msghdr msg = {};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    ssize_t n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) {
      struct pollfd p = {sock, POLLIN, 0};
      poll(&p, 1, -1);
      continue;
    }
    if (n < 0) return n;
    if (msg.msg_flags & MSG_CTRUNC) *ctrunc = true;
    for (struct cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
      size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      const int* p = reinterpret_cast<const int*>(CMSG_DATA(c));
      for (size_t i = 0; i < count; ++i) {
        int fd;
        std::memcpy(&fd, p + i, sizeof fd);
        if (*nfds < max_fds) fds[(*nfds)++] = fd;
        else close(fd);  // more fds than the contract allows: not ours to keep
      }
    }
    return n;
  }
}

Status recv_exact(int sock, char* buf, size_t len, int* fds, size_t* nfds, size_t max_fds, bool* ctrunc) {
  size_t got = 0;
  while (got < len) {
    ssize_t n = recv_with_fds(sock, buf + got, len - got, fds, nfds, max_fds, ctrunc);
    if (n < 0) return errno_status(errno, "read init config from setup socket");
    if (n == 0) return make_status(SANDLET_INTERNAL, 0, "read init config: setup socket closed by the host");
    got += static_cast<size_t>(n);
  }
  return Status::Ok();
}

// ---- the steps ---------------------------------------------------------------------------------------

Status make_mounts_private() {
  if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0)
    return errno_status(errno, "make mounts private");
  return Status::Ok();
}

// The detached root mount needs a place in our (private) mount tree for pivot_root; mounting over an
// existing host directory here only changes our own namespace, so nothing is created on the host.
Status attach_rootfs(int rootfd) {
  static const char* const kCandidates[] = {"/mnt", "/tmp", "/root"};
  const char* target = nullptr;
  for (const char* c : kCandidates) {
    struct stat st;
    if (stat(c, &st) == 0 && S_ISDIR(st.st_mode)) { target = c; break; }
  }
  if (!target) return make_status(SANDLET_INTERNAL, ENOENT, "attach root filesystem: no /mnt, /tmp or /root to mount on");
  if (move_mount(rootfd, "", AT_FDCWD, target, MOVE_MOUNT_F_EMPTY_PATH) != 0)
    return errno_statusf(errno, "attach root filesystem on %s", target);
  close(rootfd);
  if (chdir(target) != 0) return errno_statusf(errno, "chdir %s", target);
  return Status::Ok();
}

Status ensure_dir(const char* path, mode_t mode) {
  if (mkdir(path, mode) == 0) {
    (void)chmod(path, mode);  // mkdir applied the umask (tmp needs 1777)
    return Status::Ok();
  }
  if (errno == EEXIST) return Status::Ok();
  return errno_statusf(errno, "mkdir /%s", path);
}

Status mount_proc() {
  if (mount("proc", "proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) != 0)
    return errno_status(errno, "mount /proc");
  return Status::Ok();
}

// /dev comes from the host, nodes and all (mknod is not allowed in a user namespace); devpts and shm are
// this sandbox's own, mounted here so that they belong to its user namespace.
Status mount_dev(int devfd) {
  if (move_mount(devfd, "", AT_FDCWD, "dev", MOVE_MOUNT_F_EMPTY_PATH) != 0) return errno_status(errno, "attach /dev");
  close(devfd);
  if (mount("devpts", "dev/pts", "devpts", MS_NOSUID | MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620,gid=5") != 0 &&
      mount("devpts", "dev/pts", "devpts", MS_NOSUID | MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620") != 0)
    return errno_status(errno, "mount /dev/pts");
  // Bounded (tmpfs pages outlive the processes that wrote them; the default is half the host's memory).
  if (mount("shm", "dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777,size=256m,nr_inodes=16384") != 0)
    return errno_status(errno, "mount /dev/shm");
  return Status::Ok();
}

// pivot_root(".", ".") stacks the old root on top of the new one; detaching it leaves only the sandbox.
Status pivot_into_cwd() {
  if (syscall(SYS_pivot_root, ".", ".") != 0) return errno_status(errno, "pivot_root");
  if (umount2(".", MNT_DETACH) != 0) return errno_status(errno, "detach old root");
  if (chdir("/") != 0) return errno_status(errno, "chdir /");
  return Status::Ok();
}

Status set_hostname(const std::string& name) {
  if (name.empty()) return Status::Ok();
  if (sethostname(name.data(), name.size()) != 0) return errno_statusf(errno, "sethostname \"%s\"", name.c_str());
  return Status::Ok();
}

Status loopback_up() {
  int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (s < 0) return errno_status(errno, "socket for lo");
  struct ifreq ifr = {};
  std::strncpy(ifr.ifr_name, "lo", IFNAMSIZ - 1);
  Status st;
  if (ioctl(s, SIOCGIFFLAGS, &ifr) != 0) {
    st = errno_status(errno, "get lo flags");
  } else {
    ifr.ifr_flags = static_cast<short>(ifr.ifr_flags | IFF_UP);
    if (ioctl(s, SIOCSIFFLAGS, &ifr) != 0) st = errno_status(errno, "bring lo up");
  }
  close(s);
  return st;
}

Status make_nonblocking(int fd) {
  int fl = fcntl(fd, F_GETFL);
  if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) != 0) return errno_status(errno, "make listening socket non-blocking");
  return Status::Ok();
}

Status lock_down() {
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return errno_status(errno, "set no_new_privs");
  // Non-dumpable: sandbox processes need CAP_SYS_PTRACE (which execs do not get) to ptrace the agent
  // or read its /proc/1/{mem,fd,environ}.
  if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0) return errno_status(errno, "clear dumpable");
  return Status::Ok();
}

}  // namespace

Status check_seccomp(const std::string& bpf) {
  if (bpf.size() % sizeof(struct sock_filter) != 0 || bpf.size() / sizeof(struct sock_filter) > BPF_MAXINSNS)
    return make_status(SANDLET_INTERNAL, 0, "install seccomp filter: size is not a valid sock_filter[]");
  return Status::Ok();
}

// Last step: the filter may forbid what the steps above needed (mount, pivot_root, ...).
Status install_seccomp(const std::string& bpf) {
  if (bpf.empty()) return Status::Ok();
  if (Status s = check_seccomp(bpf); !s.ok()) return s;
  struct sock_fprog prog;
  prog.len = static_cast<unsigned short>(bpf.size() / sizeof(struct sock_filter));
  prog.filter = reinterpret_cast<struct sock_filter*>(const_cast<char*>(bpf.data()));
  if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) != 0)
    return errno_status(errno, "install seccomp filter");
  return Status::Ok();
}

bool send_frame_blocking(int fd, proto::InitMsg type, const std::string& payload) {
  std::string f = proto::frame(type, payload);
  size_t off = 0;
  while (off < f.size()) {
    ssize_t n = send(fd, f.data() + off, f.size() - off, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) {
      struct pollfd p = {fd, POLLOUT, 0};
      poll(&p, 1, -1);
      continue;
    }
    if (n <= 0) return false;
    off += static_cast<size_t>(n);
  }
  return true;
}

namespace {
// One setup frame of `type` with up to `max_fds` SCM_RIGHTS fds (closed again on error).
constexpr size_t kMaxStageFds = 5;
Status receive_setup_frame(int sock, proto::InitMsg type, std::string* payload, int* got_fds, size_t max_fds,
                           size_t* nfds, bool* ctrunc) {
  char hdr[proto::kHeaderSize];
  Status st = recv_exact(sock, hdr, sizeof hdr, got_fds, nfds, max_fds, ctrunc);
  proto::FrameHeader h{};
  if (st.ok()) {
    // Checked before the payload is allocated or read.
    if (std::string bad = check_setup_header(hdr, type, &h); !bad.empty())
      st = make_status(SANDLET_INTERNAL, EPROTO, "read setup frame: " + bad);
  }
  if (st.ok()) {
    payload->resize(h.len);
    st = recv_exact(sock, payload->data(), payload->size(), got_fds, nfds, max_fds, ctrunc);
  }
  if (!st.ok()) {
    for (size_t i = 0; i < *nfds; ++i) close(got_fds[i]);
    *nfds = 0;
  }
  return st;
}
}  // namespace

Status receive_stage(int sock, InitFds* fds) {
  int got_fds[kMaxStageFds];
  size_t nfds = 0;
  bool ctrunc = false;
  std::string payload;
  Status st = receive_setup_frame(sock, proto::InitMsg::kStage, &payload, got_fds, kMaxStageFds, &nfds, &ctrunc);
  if (!st.ok()) return st;
  uint32_t flags = 0;
  const bool flags_ok = decode_stage(payload, &flags);
  const bool has_cgroup = flags & proto::kInitHasCgroup, has_upper = flags & proto::kInitHasUpper;
  size_t want = 3 + has_cgroup + has_upper;
  if (!flags_ok || ctrunc || nfds != want) {
    for (size_t i = 0; i < nfds; ++i) close(got_fds[i]);
    return make_status(SANDLET_INTERNAL, EBADF,
                       "read init stage: expected " + std::to_string(want) + " fds, got " + std::to_string(nfds));
  }
  fds->rootfs = got_fds[0];
  fds->dev = got_fds[1];
  fds->listener = got_fds[2];
  fds->cgroup = has_cgroup ? got_fds[3] : -1;
  fds->upper = has_upper ? got_fds[3 + has_cgroup] : -1;
  fds->mask_kernel_files = flags & proto::kInitMaskKernelFiles;
  return Status::Ok();
}

Status receive_config(int sock, proto::InitConfig* cfg, int stdio[3], int* mount_fds, int* toolkit_fd,
                      int* denial_log_fd) {
  *toolkit_fd = -1;
  *denial_log_fd = -1;
  int got_fds[kMaxConfigFds];
  size_t nfds = 0;
  bool ctrunc = false;
  std::string payload;
  for (int i = 0; i < 3; ++i) stdio[i] = -1;
  Status st = receive_setup_frame(sock, proto::InitMsg::kConfig, &payload, got_fds, kMaxConfigFds, &nfds, &ctrunc);
  if (!st.ok()) return st;
  auto close_fds = [&] {
    for (size_t i = 0; i < nfds; ++i) close(got_fds[i]);
  };
  if (!proto::InitConfig::decode(payload, cfg)) {
    close_fds();
    return make_status(SANDLET_INTERNAL, EPROTO, "read init config: malformed InitConfig");
  }
  // A one-shot command's stdio, in order, for the bits set, then one per host mount; nothing else may
  // come with the frame.
  const uint32_t bits = (cfg->flags & proto::kInitRunOnce) ? cfg->run_once.stdio : 0;
  size_t want = cfg->mounts.size() + ((cfg->flags & proto::kInitHasToolkit) ? 1 : 0) +
                ((cfg->flags & proto::kInitHasDenialLog) ? 1 : 0);
  for (int i = 0; i < 3; ++i) want += (bits >> i) & 1;
  if (nfds != want || ctrunc) {
    close_fds();
    return make_status(SANDLET_INTERNAL, EPROTO, "read init config: wrong number of descriptors (stdio and mounts)");
  }
  size_t next = 0;
  for (int i = 0; i < 3; ++i)
    if ((bits >> i) & 1) stdio[i] = got_fds[next++];
  for (size_t i = 0; i < cfg->mounts.size(); ++i) mount_fds[i] = got_fds[next++];
  if (cfg->flags & proto::kInitHasToolkit) *toolkit_fd = got_fds[next++];
  if (cfg->flags & proto::kInitHasDenialLog) *denial_log_fd = got_fds[next++];
  return Status::Ok();
}

// No process in the sandbox may create namespaces (nested user namespaces are a classic kernel attack
// surface). The per-user-namespace counters enforce it in the kernel for clone, clone3 and unshare alike,
// which lets the seccomp filter allow clone3 (whose flags BPF cannot read) and the agent spawn with
// CLONE_INTO_CGROUP.
namespace {
int g_mnt_ns_counter = -1;  // max_mnt_namespaces, kept writable for allow_detached_mounts
}

// fsmount and open_tree(OPEN_TREE_CLONE) each make an anonymous mount namespace, which the counter above
// forbids: the configuration's own mounts (policy, toolkit) are made with it raised, then it is 0 for good.
Status allow_detached_mounts(bool allow) {
  if (g_mnt_ns_counter < 0) return Status::Ok();
  const char* v = allow ? "1024" : "0";
  if (syscall(SYS_pwrite64, g_mnt_ns_counter, v, std::strlen(v), 0) != static_cast<long>(std::strlen(v)))
    return errno_status(errno, "write /proc/sys/user/max_mnt_namespaces");
  if (!allow) close(g_mnt_ns_counter), g_mnt_ns_counter = -1;
  return Status::Ok();
}

Status forbid_new_namespaces() {
  // Opened relative to the directory: eight lookups of /proc/sys/user/ cost more than the writes.
  int dir = open("/proc/sys/user", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0) return errno_status(errno, "open /proc/sys/user");
  for (const char* kind : {"user", "mnt", "pid", "net", "ipc", "uts", "cgroup", "time"}) {
    char name[40];
    snprintf(name, sizeof name, "max_%s_namespaces", kind);
    const bool keep = kind[0] == 'm' && kind[1] == 'n';  // "mnt"
    int fd = openat(dir, name, O_WRONLY | O_CLOEXEC);
    if (fd < 0) {
      if (errno == ENOENT) continue;  // a kernel without this namespace type
      int e = errno;
      close(dir);
      return errno_statusf(e, "open /proc/sys/user/%s", name);
    }
    ssize_t n = write(fd, "0", 1);
    int e = errno;
    if (keep && n == 1) g_mnt_ns_counter = fd;
    else close(fd);
    if (n != 1) {
      close(dir);
      return errno_statusf(e, "write /proc/sys/user/%s", name);
    }
  }
  close(dir);
  return Status::Ok();
}

// /proc/sys read-only (as other runtimes do): root inside could otherwise raise the counters above
// again, or touch the sandbox's other namespace-scoped kernel settings. Mount calls are denied to commands
// by the seccomp filter, so this cannot be undone from inside.
Status bind_read_only(const char* path) {
  if (mount(path, path, nullptr, MS_BIND | MS_REC, nullptr) != 0) return errno_statusf(errno, "bind %s", path);
  if (mount(nullptr, path, nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) != 0)
    return errno_statusf(errno, "make %s read-only", path);
  return Status::Ok();
}

Status protect_proc_sys() { return bind_read_only("/proc/sys"); }

// The writable layer's mount, at the fixed descriptor the host takes it from (close-on-exec: no command
// inherits it).
Status keep_upper(int fd) {
  if (fd < 0) return Status::Ok();
  if (fd != proto::kInitUpperFd) {
    if (dup3(fd, proto::kInitUpperFd, O_CLOEXEC) < 0) return errno_status(errno, "keep the writable layer");
    close(fd);
  }
  return Status::Ok();
}

Status setup_filesystem(const InitFds& fds) {
  umask(022);
  // Build with -DSANDLET_GUEST_TIMING to log each step's duration to fd 2.
#ifdef SANDLET_GUEST_TIMING
  struct timespec t0;
  clock_gettime(CLOCK_MONOTONIC, &t0);
#define STEP(expr)                                                                                  \
  do {                                                                                              \
    Status s_ = (expr);                                                                             \
    struct timespec t1;                                                                             \
    clock_gettime(CLOCK_MONOTONIC, &t1);                                                            \
    log_line("%-40s %7lld ns", #expr, (t1.tv_sec - t0.tv_sec) * 1000000000LL + (t1.tv_nsec - t0.tv_nsec)); \
    t0 = t1;                                                                                        \
    if (!s_.ok()) return s_;                                                                        \
  } while (0)
#else
#define STEP(expr)                 \
  do {                             \
    Status s_ = (expr);            \
    if (!s_.ok()) return s_;       \
  } while (0)
#endif
  STEP(make_mounts_private());
  STEP(attach_rootfs(fds.rootfs));
  STEP(ensure_dir("proc", 0555));
  STEP(ensure_dir("dev", 0755));
  STEP(ensure_dir("tmp", 01777));
  STEP(mount_proc());
  STEP(mount_dev(fds.dev));
  STEP(pivot_into_cwd());
  // Before forbid_new_namespaces: each stand-in is a detached mount first.
  if (fds.mask_kernel_files) STEP(mask_kernel_files());
  STEP(make_nonblocking(fds.listener));
  STEP(keep_upper(fds.upper));
  STEP(forbid_new_namespaces());
  STEP(protect_proc_sys());
#undef STEP
  return Status::Ok();
}

Status write_resolver_conf() {
  if (mkdir("/etc", 0755) != 0 && errno != EEXIST) {
    if (errno == EROFS) return Status::Ok();
    return errno_status(errno, "resolver: mkdir /etc");
  }
  struct stat sb;
  if (lstat("/etc/resolv.conf", &sb) == 0 && S_ISLNK(sb.st_mode) && unlink("/etc/resolv.conf") != 0 && errno != ENOENT) {
    if (errno == EROFS) return Status::Ok();
    return errno_status(errno, "resolver: replace the symlink /etc/resolv.conf");
  }
  const int fd = open("/etc/resolv.conf", O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) {
    if (errno == EROFS) return Status::Ok();
    return errno_status(errno, "resolver: write /etc/resolv.conf");
  }
  const size_t len = std::strlen(proto::kResolverConf);
  const bool ok = write(fd, proto::kResolverConf, len) == static_cast<ssize_t>(len) && fchmod(fd, 0644) == 0;
  const int e = errno;
  close(fd);
  return ok ? Status::Ok() : errno_status(e, "resolver: write /etc/resolv.conf");
}

Status setup_identity(const proto::InitConfig& cfg) {
  if (Status s = set_hostname(cfg.hostname); !s.ok()) return s;
  if (cfg.flags & proto::kInitLoopbackUp)
    if (Status s = loopback_up(); !s.ok()) return s;
  // Started with a parent-death signal (the host's creating thread); a detached sandbox outlives it.
  if ((cfg.flags & proto::kInitDetached) && prctl(PR_SET_PDEATHSIG, 0, 0, 0, 0) != 0)
    return errno_status(errno, "clear parent-death signal");
  return lock_down();
}

}  // namespace sandlet::guest
