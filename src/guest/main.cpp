// sandlet-init: PID 1 of a container sandbox. Receives its configuration and kernel objects from the
// host on fd 3, turns the fresh namespaces into the sandbox, reports ready, then serves exec and file
// requests on the listening socket the host handed in until the host stops it or a time limit expires.
// When it exits, the kernel kills every process of the sandbox's pid namespace: that is the teardown.
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include "guest/file_rules.hpp"
#include "guest/host_mounts.hpp"
#include "guest/run_once.hpp"
#include "guest/seccomp_notify.hpp"
#include "guest/server.hpp"
#include "guest/setup.hpp"
#include "guest/status.hpp"
#include "guest/toolkit.hpp"
#include "guest/workdir.hpp"

using namespace sandlet::guest;
namespace proto = sandlet::proto;

namespace {

[[noreturn]] void fail(const Status& s) {
  proto::ErrorReply r;
  r.code = s.code == SANDLET_OK ? static_cast<uint32_t>(SANDLET_INTERNAL) : s.code;
  r.err_no = s.err_no;
  r.message = s.message;
  log_line("start-up failed: %s", s.message.c_str());
  send_frame_blocking(kSetupFd, proto::InitMsg::kError, r.encode());
  _exit(1);
}

// Spawned commands and the agent rely on 0/1/2 being open (fd 0 is the /dev/null stdin of execs
// without stdin; new pipes must never land on 0-2).
void ensure_std_fds() {
  for (int fd = 0; fd < 3; ++fd) {
    if (fcntl(fd, F_GETFD) >= 0) continue;
    int n = open("/dev/null", O_RDWR);
    if (n >= 0 && n != fd) {
      dup2(n, fd);
      close(n);
    }
  }
}

}  // namespace

int main() {
  // Before anything can fork: SIGCHLD/SIGTERM/SIGINT go to a signalfd; SIGPIPE becomes EPIPE.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGCHLD);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigprocmask(SIG_SETMASK, &set, nullptr);  // SETMASK: the host starts us with every signal blocked
  signal(SIGPIPE, SIG_IGN);
  ensure_std_fds();
  // (Output and stdin queues reach megabytes per connection: the init's allocator, rt/alloc.c, maps
  // blocks above 256 KiB on their own, so that memory goes back to the system when the connection ends.)

  // Many concurrent execs need many fds; commands get the original limit back, the hard one capped at
  // kCommandNofileMax (every sandbox's open files count against the host's one fs.file-max).
  static struct rlimit original;
  const struct rlimit* child_nofile = nullptr;
  constexpr rlim_t kCommandNofileMax = 65536;
  if (getrlimit(RLIMIT_NOFILE, &original) == 0) {
    struct rlimit raised = {original.rlim_max, original.rlim_max};
    if (original.rlim_cur < original.rlim_max) (void)setrlimit(RLIMIT_NOFILE, &raised);
    if (original.rlim_max > kCommandNofileMax) original.rlim_max = kCommandNofileMax;
    if (original.rlim_cur > original.rlim_max) original.rlim_cur = original.rlim_max;
    child_nofile = &original;
  }

  // Phase 1 (possibly long before the sandbox is asked for: warm pool): the filesystem view.
  InitFds fds;
  Status s = receive_stage(kSetupFd, &fds);
  if (!s.ok()) fail(s);
  s = setup_filesystem(fds);
  if (!s.ok()) fail(s);
  if (!send_frame_blocking(kSetupFd, proto::InitMsg::kStaged, std::string())) _exit(1);
  // Phase 2: who the sandbox is.
  proto::InitConfig cfg;
  int stdio[3];
  static int mount_fds[proto::kMaxMounts];
  int toolkit = -1;
  int denial_log = -1;
  s = receive_config(kSetupFd, &cfg, stdio, mount_fds, &toolkit, &denial_log);
  if (!s.ok()) fail(s);
  if (s.ok() && (cfg.flags & proto::kInitResolverConf)) s = write_resolver_conf();
  if (s.ok()) s = attach_host_mounts(cfg.mounts, mount_fds);  // before anything of the sandbox runs
  // Below a host mount if the workdir is there; before the file rules, which may make its parent read-only.
  if (s.ok()) s = make_workdir(cfg.workdir);
  // The kernel files were masked while staging if the stage said so: the host stages with the spec's own
  // choice and hands a pooled sandbox only to a spec that made the same one. A mismatch fails closed.
  if (s.ok() && static_cast<bool>(cfg.flags & proto::kInitMaskKernelFiles) != kernel_files_masked())
    s = make_status(SANDLET_INTERNAL, EINVAL, "staged with other kernel-file masks than the configuration asks for");
  const bool own_mounts = toolkit >= 0 || (cfg.flags & proto::kInitHasFileRules);
  if (s.ok() && own_mounts) s = allow_detached_mounts(true);
  if (s.ok() && toolkit >= 0) s = attach_toolkit(toolkit), toolkit = -1;
  // Last of the mounts: a rule covers the host mounts and the toolkit's pinned files below its path.
  if (s.ok() && (cfg.flags & proto::kInitHasFileRules)) s = apply_file_rules(cfg.file_rules);
  if (toolkit >= 0) close(toolkit);
  if (Status off = allow_detached_mounts(false); s.ok()) s = off;
  if (!s.ok()) fail(s);
  s = setup_identity(cfg);
  if (!s.ok()) fail(s);
  // Commands without stdin inherit fd 0: make it the sandbox's own /dev/null, whatever the host passed.
  if (int null = open("/dev/null", O_RDWR | O_CLOEXEC); null >= 0) {
    dup2(null, 0);
    close(null);
  }
  // Installed once on the agent and inherited by every command (installing it per command would compile
  // the filter on every exec).
  std::string bpf = std::move(cfg.seccomp_bpf);
  if (cfg.flags & proto::kInitRunOnce) {
    if (fds.listener >= 0) close(fds.listener);  // nobody connects to a one-shot sandbox
    s = install_seccomp_counted(bpf, denial_log);
    if (!s.ok()) fail(s);
    if (!send_frame_blocking(kSetupFd, proto::InitMsg::kReady, std::string())) _exit(1);
    run_once(cfg, stdio, child_nofile);
  }
  Server server(std::move(cfg), fds, child_nofile);
  s = server.init();
  if (!s.ok()) fail(s);
  s = install_seccomp_counted(bpf, denial_log);
  if (!s.ok()) fail(s);
  if (!send_frame_blocking(kSetupFd, proto::InitMsg::kReady, std::string())) {
    log_line("could not report ready (errno %d); exiting", errno);
    _exit(1);
  }
  close(kSetupFd);  // the host does not need it after ready
  server.warm_up();
  server.run();
}
