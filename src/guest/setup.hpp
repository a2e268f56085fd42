// Start-up of the init: receive the InitConfig (and its fds) on the setup socket, then turn the fresh
// namespaces into the sandbox (mounts, pivot, hostname, loopback, seccomp). A linear pipeline of small
// steps; the first failure is reported to the host as a kError frame naming the step.
#pragma once
#include "guest/status.hpp"
#include "proto/init_protocol.hpp"

namespace sandlet::guest {

constexpr int kSetupFd = 3;

struct InitFds {
  int rootfs = -1;    // detached mount to pivot into
  int dev = -1;       // detached /dev to attach
  int listener = -1;  // agent listening socket (made non-blocking here)
  int cgroup = -1;    // sandbox cgroup2 dir, or -1
  int upper = -1;     // the writable layer's mount (kept at kInitUpperFd), or -1
  bool mask_kernel_files = false;  // kInitMaskKernelFiles in the stage: masked while staging
  // A microVM's agent: `listener` is a SOCK_SEQPACKET socket on which each new connection arrives as an
  // SCM_RIGHTS descriptor with a one-byte port (guest/vm/guest_pid1.hpp), instead of a listening socket.
  bool listener_passes_fds = false;
};

// Reads the kInitStage frame and its SCM_RIGHTS fds from `sock`.
Status receive_stage(int sock, InitFds* fds);
// Reads the kInitConfig frame; stdio[] receives a one-shot command's descriptors (-1 where none),
// mount_fds[] (room for proto::kMaxMounts) one per cfg->mounts entry, *toolkit_fd the toolkit's mount and
// *denial_log_fd the seccomp denial log (each -1 when not sent).
Status receive_config(int sock, proto::InitConfig* cfg, int stdio[3], int* mount_fds, int* toolkit_fd,
                      int* denial_log_fd);

// Phase 1: the filesystem view (root, /proc, /dev, pivot) and the namespace counters.
Status setup_filesystem(const InitFds& fds);
// Phase 2: hostname, detach, no_new_privs, non-dumpable. (The seccomp filter comes after the server's
// set-up, see install_seccomp.)
Status setup_identity(const proto::InitConfig& cfg);
// kInitResolverConf: /etc/resolv.conf becomes proto::kResolverConf (a symlink there is replaced by the
// file). Before the host mounts, so that a mount of the spec at that path still wins. A read-only root
// filesystem is left as it is.
Status write_resolver_conf();

// Raises (true) the mount-namespace counter for the configuration's own detached mounts, or sets it to 0
// for good (false; call before anything of the sandbox runs).
Status allow_detached_mounts(bool allow);
// The per-user-namespace counters of every namespace type set to 0: no process may make one (the mount
// counter stays writable for allow_detached_mounts until that is called with false).
Status forbid_new_namespaces();
// `path` bound onto itself read-only (nosuid, nodev, noexec) in this mount namespace: what is mounted there
// can no longer be written through it (/proc/sys, a microVM's /sys).
Status bind_read_only(const char* path);

// Installs the host's struct sock_filter[] (no-op when empty). Call last: the agent itself runs under
// the filter, which typically forbids mount and the like.
Status install_seccomp(const std::string& bpf);
// Validates a filter without installing it.
Status check_seccomp(const std::string& bpf);

// Blocking write of one frame (setup socket only; the serving loop never blocks).
bool send_frame_blocking(int fd, proto::InitMsg type, const std::string& payload);

}  // namespace sandlet::guest
