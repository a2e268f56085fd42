// The gateway's executable (embedded in libsandlet.so and started from there, see
// backends/host/net_gateway_client.hpp):
//   sandlet-netgw serve --root R [--uplink-netns PATH] [--idle-exit-ms N] [--ready-fd N]
// It detaches itself (a new session, reparented away from the starter, whose sandboxes may be detached
// and outlive it), takes the root's lock (one gateway per root), raises its descriptor limit, and runs the
// gateway under a supervisor (supervisor.hpp) that starts it again if it dies. One byte goes to
// --ready-fd once the gateway serves ("b": another gateway holds the lock; "e<message>": it failed).
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "lazy/seqpacket.hpp"
#include "network/gateway/gateway.hpp"
#include "network/gateway/journal.hpp"
#include "network/gateway/limits.hpp"
#include "network/gateway/netgw_paths.hpp"
#include "network/gateway/supervisor.hpp"
#include "sys/fs_util.hpp"

using namespace sandlet;

namespace {

// As many descriptors as the gateway's own bounds need (limits.hpp). Raising the hard limit needs
// CAP_SYS_RESOURCE; without it the soft limit goes up to the hard one and the budgets follow what is there.
void raise_fd_limit() {
  rlimit r{};
  if (::getrlimit(RLIMIT_NOFILE, &r) != 0) return;
  if (r.rlim_max < netgw::kFdsWanted) {
    const rlimit want{netgw::kFdsWanted, netgw::kFdsWanted};
    if (::setrlimit(RLIMIT_NOFILE, &want) == 0) return;
  }
  r.rlim_cur = std::min<rlim_t>(std::max<rlim_t>(r.rlim_cur, netgw::kFdsWanted), r.rlim_max);
  (void)::setrlimit(RLIMIT_NOFILE, &r);
}

int serve(int argc, char** argv) {
  netgw::GatewayOptions o;
  int ready_fd = -1;
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    if (k == "--root") o.root = argv[i + 1];
    else if (k == "--uplink-netns") o.uplink_netns = argv[i + 1];
    else if (k == "--idle-exit-ms") o.idle_exit_ms = std::atoi(argv[i + 1]);
    else if (k == "--ready-fd") ready_fd = std::atoi(argv[i + 1]);
  }
  if (o.root.empty()) {
    std::fprintf(stderr, "sandlet-netgw: serve needs --root\n");
    return 2;
  }
  const pid_t pid = ::fork();
  if (pid < 0) return 1;
  if (pid > 0) {
    ::waitpid(pid, nullptr, 0);
    return 0;
  }
  ::setsid();
  if (::fork() != 0) _exit(0);
  ::signal(SIGPIPE, SIG_IGN);
  const int devnull = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  if (devnull >= 0) ::dup2(devnull, 0), ::dup2(devnull, 1);
  auto fail = [](int ready, const std::string& why) {
    std::fprintf(stderr, "sandlet-netgw: %s\n", why.c_str());
    if (ready >= 0) {
      const std::string msg = "e" + why;
      (void)!::write(ready, msg.data(), msg.size());
    }
  };
  sys::UniqueFd control;
  try {
    sys::mkdir_p(netgw::gateway_dir(o.root), 0700);
    const int log = ::open(netgw::log_path(o.root).c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | O_APPEND, 0600);
    if (log >= 0) ::dup2(log, 2);
    const int lock = ::open(netgw::lock_path(o.root).c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (lock < 0 || ::flock(lock, LOCK_EX | LOCK_NB) != 0) {
      if (ready_fd >= 0) (void)!::write(ready_fd, "b", 1);
      return 0;
    }
    const std::string pid_text = std::to_string(::getpid()) + "\n";
    (void)!::ftruncate(lock, 0);
    (void)!::pwrite(lock, pid_text.data(), pid_text.size(), 0);
    raise_fd_limit();
    // The control socket belongs to the supervisor: a gateway that dies leaves it listening, and its
    // successor accepts what queued meanwhile.
    control = lazy::seqpacket_listen(netgw::control_socket_path(o.root));
    o.control_fd = control.get();
    std::fprintf(stderr, "sandlet-netgw: serving %s (supervisor pid %d)\n", o.root.c_str(), ::getpid());
    netgw::SupervisorOptions so;
    so.ready_fd = ready_fd;
    const int rc = netgw::supervise(so, [&](sys::UniqueFd journal_fd, int ready, uint64_t restarts) {
      try {
        netgw::Journal journal(std::move(journal_fd));
        netgw::GatewayOptions g = o;
        g.journal = &journal;
        g.restarts = restarts;
        netgw::Gateway gw(g);
        return gw.run(ready);
      } catch (const std::exception& e) {
        fail(ready, e.what());
        return restarts == 0 ? 2 : 1;  // the first one failing to start: nothing to supervise
      }
    });
    (void)!::ftruncate(lock, 0);
    return rc;
  } catch (const std::exception& e) {
    fail(ready_fd, e.what());
    return 1;
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 2 && std::strcmp(argv[1], "serve") == 0) return serve(argc, argv);
  std::fprintf(stderr, "usage: sandlet-netgw serve --root DIR [--uplink-netns PATH] [--idle-exit-ms N]\n");
  return 2;
}
