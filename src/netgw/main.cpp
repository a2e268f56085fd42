// The gateway's executable (embedded in libsandlet.so and started from there, see
// backends/container/net_gateway_client.hpp):
//   sandlet-netgw serve --root R [--uplink-netns PATH] [--idle-exit-ms N] [--ready-fd N]
// It detaches itself (a new session, reparented away from the starter, whose sandboxes may be detached
// and outlive it), takes the root's lock (one gateway per root) and writes one byte to --ready-fd once its
// control socket listens ("b": another gateway holds the lock; "e<message>": it failed).
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "netgw/gateway.hpp"
#include "netgw/netgw_paths.hpp"
#include "sys/fs_util.hpp"

using namespace sandlet;

namespace {

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
  auto fail = [&](const std::string& why) {
    std::fprintf(stderr, "sandlet-netgw: %s\n", why.c_str());
    if (ready_fd >= 0) {
      const std::string msg = "e" + why;
      (void)!::write(ready_fd, msg.data(), msg.size());
    }
    return 1;
  };
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
    netgw::Gateway gw(o);
    std::fprintf(stderr, "sandlet-netgw: serving %s (pid %d)\n", o.root.c_str(), ::getpid());
    const int rc = gw.run(ready_fd);
    (void)!::ftruncate(lock, 0);
    return rc;
  } catch (const std::exception& e) {
    return fail(e.what());
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 2 && std::strcmp(argv[1], "serve") == 0) return serve(argc, argv);
  std::fprintf(stderr, "usage: sandlet-netgw serve --root DIR [--uplink-netns PATH] [--idle-exit-ms N]\n");
  return 2;
}
