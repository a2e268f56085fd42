// The microVM agent's process: the same Server as a container's init, set up from the configuration the
// host sends on the boot port's stream instead of the container's set-up socket.
#include <errno.h>
#include <fcntl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>

#include "guest/file_rules.hpp"
#include "guest/seccomp_notify.hpp"
#include "guest/server.hpp"
#include "guest/setup.hpp"
#include "guest/status.hpp"
#include "guest/toolkit.hpp"
#include "guest/workdir.hpp"
#include "guest/vm/guest_boot.hpp"
#include "guest/vm/guest_lockdown.hpp"
#include "guest/vm/guest_net.hpp"
#include "guest/vm/guest_pid1.hpp"
#include "proto/vm_channel.hpp"

namespace sandlet::guest::vm {

namespace {

// Blocks for the next stream from PID 1; returns its socket and port.
int next_stream(int ctl, uint8_t* port) {
  for (;;) {
    char cbuf[CMSG_SPACE(sizeof(int))];
    struct iovec iov = {port, 1};
    struct msghdr msg = {};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = cbuf;
    msg.msg_controllen = sizeof cbuf;
    ssize_t n = recvmsg(ctl, &msg, MSG_CMSG_CLOEXEC);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) _exit(1);  // PID 1 is gone
    struct cmsghdr* c = CMSG_FIRSTHDR(&msg);
    int fd = -1;
    if (c && c->cmsg_type == SCM_RIGHTS && c->cmsg_len == CMSG_LEN(sizeof(int))) __builtin_memcpy(&fd, CMSG_DATA(c), sizeof fd);
    if (fd >= 0) return fd;
  }
}

[[noreturn]] void fail(int sock, const Status& s) {
  proto::ErrorReply r;
  r.code = s.code == SANDLET_OK ? static_cast<uint32_t>(SANDLET_INTERNAL) : s.code;
  r.err_no = s.err_no;
  r.message = s.message;
  log_line("start-up failed: %s", s.message.c_str());
  send_frame_blocking(sock, proto::InitMsg::kError, r.encode());
  _exit(1);
}

Status write_value(const char* path, const std::string& value, const char* field) {
  int f = open(path, O_WRONLY | O_CLOEXEC);
  if (f < 0) return errno_statusf(errno, "%s: open %s", field, path);
  const ssize_t n = write(f, value.data(), value.size());
  const int e = errno;
  close(f);
  if (n != static_cast<ssize_t>(value.size())) return errno_statusf(e, "%s: write %s to %s", field, value.c_str(), path);
  return Status::Ok();
}

// The sandbox's own cgroup, under which the agent makes one group per exec: its limits bind every command
// (the guest kernel and the agent stay outside them). A limit that cannot be set fails the start.
Status sandbox_cgroup(uint64_t pids_max, uint64_t memory_max, int* fd) {
  if (Status s = write_value("/sys/fs/cgroup/cgroup.subtree_control", "+pids +memory", "limits"); !s.ok()) return s;
  if (mkdir("/sys/fs/cgroup/sandbox", 0755) != 0) return errno_status(errno, "mkdir the sandbox's cgroup");
  if (pids_max)
    if (Status s = write_value("/sys/fs/cgroup/sandbox/pids.max", std::to_string(pids_max), "limits.pids"); !s.ok()) return s;
  if (memory_max) {
    if (Status s = write_value("/sys/fs/cgroup/sandbox/memory.max", std::to_string(memory_max), "limits.memory"); !s.ok())
      return s;
    (void)write_value("/sys/fs/cgroup/sandbox/memory.swap.max", "0", "limits.memory");  // no swap in the guest anyway
  }
  *fd = open("/sys/fs/cgroup/sandbox", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  return *fd >= 0 ? Status::Ok() : errno_status(errno, "open the sandbox's cgroup");
}

}  // namespace

void run_server(int ctl) {
  // PID 1 of a pid namespace of its own, as in a container: the sandbox sees its processes only, orphans
  // come back to the agent, and kill(-1) spares it.
  mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr);
  umount2("/proc", MNT_DETACH);
  mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr);
  // Commands without stdin inherit fd 0: /dev/null, not the guest's console.
  if (int null = open("/dev/null", O_RDWR | O_CLOEXEC); null >= 0) {
    dup2(null, 0);
    close(null);
  }
  uint8_t port = 0xff;
  int boot = -1;
  while (boot < 0) {
    int fd = next_stream(ctl, &port);
    if (port == proto::vmchan::kBootPort) boot = fd;
    else close(fd);  // nothing is served before the configuration
  }
  proto::InitConfig cfg;
  int stdio[3];
  static int mount_fds[proto::kMaxMounts];
  int toolkit = -1, denial_log = -1;
  if (Status s = receive_config(boot, &cfg, stdio, mount_fds, &toolkit, &denial_log); !s.ok()) fail(boot, s);
  if (cfg.flags & (proto::kInitRunOnce | proto::kInitHasMounts | proto::kInitHasToolkit))
    fail(boot, make_status(SANDLET_INTERNAL, EINVAL, "configuration asks for what a microVM does not do"));
  if (Status s = make_workdir(cfg.workdir); !s.ok()) fail(boot, s);  // before the file rules, as in a container
  if (Status s = setup_identity(cfg); !s.ok()) fail(boot, s);
  if (Status s = guest_network_up(cfg.flags & proto::kInitGuestNic); !s.ok()) fail(boot, s);
  if (cfg.flags & proto::kInitResolverConf)
    if (Status s = write_resolver_conf(); !s.ok()) fail(boot, s);  // before the rules: /etc may become read-only
  // The toolkit and the file policy, as in a container: mounts of the agent's namespace, before anything of
  // the sandbox runs (the toolkit first: a rule covers it too).
  if (cfg.flags & proto::kInitToolkitDisk) {
    int fd = -1;
    if (Status s = mount_toolkit_disk(&fd); !s.ok()) fail(boot, s);
    if (Status s = attach_toolkit(fd); !s.ok()) fail(boot, s);  // closes fd
  }
  if (cfg.flags & proto::kInitMaskKernelFiles)
    if (Status s = mask_kernel_files(); !s.ok()) fail(boot, s);
  if (cfg.flags & proto::kInitHasFileRules)
    if (Status s = apply_file_rules(cfg.file_rules); !s.ok()) fail(boot, s);

  static struct rlimit child_nofile = {1024, 65536};
  InitFds fds;
  fds.listener = ctl;
  fds.listener_passes_fds = true;
  if (Status s = sandbox_cgroup(cfg.pids_max, cfg.memory_max, &fds.cgroup); !s.ok()) fail(boot, s);
  // Last of the set-up: guest root must not get around the rules through the guest kernel's interfaces.
  if (Status s = lock_down_guest(); !s.ok()) fail(boot, s);
  std::string bpf = std::move(cfg.seccomp_bpf);
  Server server(std::move(cfg), fds, &child_nofile);
  if (Status s = server.init(); !s.ok()) fail(boot, s);
  if (Status s = install_seccomp_counted(bpf, denial_log); !s.ok()) fail(boot, s);
  if (!send_frame_blocking(boot, proto::InitMsg::kReady, std::string())) _exit(1);
  close(boot);
  server.warm_up();
  server.run();
}

}  // namespace sandlet::guest::vm
