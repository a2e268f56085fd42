// The loader's executable (embedded in libsandlet.so and started from there, see loader_client.hpp):
//   sandlet-loader holder --root R [--cache-max B] [--fetch-unit B] [--concurrency N] [--fill-timeout-ms T]
//                         [--ready-fd N] [--adopt FD]
//   sandlet-loader fetch --fd N [--fetch-unit B] [--concurrency N] [--fill-timeout-ms T]
// The holder detaches itself (a new session, reparented away from the starter, which may be a trainer about
// to die) and writes one byte to --ready-fd once its control socket listens.
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "common/error.hpp"
#include "lazy/fetcher.hpp"
#include "lazy/holder.hpp"
#include "lazy/loader_protocol.hpp"
#include "lazy/takeover.hpp"
#include "sys/fs_util.hpp"

using namespace sandlet;

namespace {

uint64_t number(const char* s, const char* what) {
  char* end = nullptr;
  errno = 0;
  unsigned long long v = std::strtoull(s, &end, 10);
  if (errno || !end || *end) {
    std::fprintf(stderr, "sandlet-loader: bad %s '%s'\n", what, s);
    std::exit(2);
  }
  return v;
}

int holder(int argc, char** argv) {
  lazy::HolderOptions o;
  int ready_fd = -1, adopt_fd = -1;
  for (int i = 2; i + 1 < argc; i += 2) {
    std::string k = argv[i];
    if (k == "--root") o.root = argv[i + 1];
    else if (k == "--cache-max") o.settings.cache_max_bytes = number(argv[i + 1], k.c_str());
    else if (k == "--fetch-unit") o.settings.fetch_unit = static_cast<uint32_t>(number(argv[i + 1], k.c_str()));
    else if (k == "--concurrency") o.settings.fetch_concurrency = static_cast<uint32_t>(number(argv[i + 1], k.c_str()));
    else if (k == "--fill-timeout-ms") o.settings.fill_timeout_ms = static_cast<uint32_t>(number(argv[i + 1], k.c_str()));
    else if (k == "--ready-fd") ready_fd = static_cast<int>(number(argv[i + 1], k.c_str()));
    else if (k == "--adopt") adopt_fd = static_cast<int>(number(argv[i + 1], k.c_str()));
  }
  if (o.root.empty()) {
    std::fprintf(stderr, "sandlet-loader: holder needs --root\n");
    return 2;
  }
  char self[4096];
  ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return 1;
  self[n] = 0;
  o.self_exe = self;
  // Detach: the grandchild serves; the starter reaps the child at once.
  pid_t pid = ::fork();
  if (pid < 0) return 1;
  if (pid > 0) {
    ::waitpid(pid, nullptr, 0);  // the middle process exits at once; the server is reparented away
    return 0;
  }
  ::setsid();
  pid = ::fork();
  if (pid < 0) _exit(1);
  if (pid > 0) _exit(0);
  if (ready_fd >= 0) ::fcntl(ready_fd, F_SETFD, FD_CLOEXEC);  // not the fetcher's
  // Nothing of the starter's stdio stays open here (a pipe would never see its end); errors go to a log.
  int devnull = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  if (devnull >= 0) {
    ::dup2(devnull, 0);
    ::dup2(devnull, 1);
  }
  sandlet::sys::mkdir_p(lazy::loader_dir(o.root), 0700);
  // Appended to: a holder that finds the lock taken leaves the running one's log alone, and a successor's
  // log tells what happened to its predecessor. A new holder starts it afresh once the lock is its own.
  int log = ::open((lazy::loader_dir(o.root) + "/loader.log").c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | O_APPEND, 0600);
  if (log >= 0) ::dup2(log, 2);
  else if (devnull >= 0) ::dup2(devnull, 2);
  // The last process the OOM killer should pick: its death lets unfilled ranges of mounted lazy layers read
  // as zeros (best effort: without CAP_SYS_RESOURCE a negative value is refused).
  for (const char* adj : {"-1000", "-999", "-500"}) {
    int f = ::open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
    if (f < 0) break;
    bool ok = ::write(f, adj, std::strlen(adj)) > 0;
    ::close(f);
    if (ok) break;
  }
  try {
    sandlet::sys::mkdir_p(lazy::loader_dir(o.root), 0700);
    // One per root: a second holder finds the lock taken and leaves (the starter then connects to the first).
    int lock = -1;
    if (adopt_fd >= 0) {
      // The successor of a killed holder: the fetcher that outlived it kept the lock (the same open file, so
      // taking it again succeeds) and the group.
      o.adopt = lazy::read_handover(sandlet::sys::UniqueFd(adopt_fd));
      o.settings = o.adopt->settings;
      lock = o.adopt->lock;
      ::fcntl(lock, F_SETFD, FD_CLOEXEC);
      if (o.adopt->root != o.root || ::flock(lock, LOCK_EX | LOCK_NB) != 0)
        throw Error(Code::kInvalidArgument, "the handover is not this root's loader lock");
    } else {
      lock = ::open(lazy::loader_lock_path(o.root).c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
      if (lock < 0 || ::flock(lock, LOCK_EX | LOCK_NB) != 0) {
        if (ready_fd >= 0) (void)::write(ready_fd, "b", 1);
        return 0;
      }
      if (log >= 0) (void)::ftruncate(2, 0);
    }
    o.lock_fd = lock;
    std::string pid_text = std::to_string(::getpid()) + "\n";
    (void)::ftruncate(lock, 0);
    (void)::pwrite(lock, pid_text.data(), pid_text.size(), 0);
    return lazy::run_holder_ready(o, ready_fd);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sandlet-loader holder: %s\n", e.what());
    if (ready_fd >= 0) {
      std::string msg = std::string("e") + e.what();
      (void)::write(ready_fd, msg.data(), msg.size());
    }
    return 1;
  }
}

int fetch(int argc, char** argv) {
  lazy::FetcherOptions o;
  for (int i = 2; i + 1 < argc; i += 2) {
    std::string k = argv[i];
    if (k == "--fd") o.fd = static_cast<int>(number(argv[i + 1], k.c_str()));
    else if (k == "--fetch-unit") o.fetch_unit = static_cast<uint32_t>(number(argv[i + 1], k.c_str()));
    else if (k == "--concurrency") o.concurrency = static_cast<uint32_t>(number(argv[i + 1], k.c_str()));
    else if (k == "--fill-timeout-ms") o.fill_timeout_ms = static_cast<uint32_t>(number(argv[i + 1], k.c_str()));
  }
  if (o.fd < 0) return 2;
  ::fcntl(o.fd, F_SETFD, FD_CLOEXEC);
  // No death signal from the holder: when it is killed, this process hands its group to a successor.
  try {
    return lazy::run_fetcher(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sandlet-loader fetch: %s\n", e.what());
    return 1;
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 2 && std::strcmp(argv[1], "holder") == 0) return holder(argc, argv);
  if (argc >= 2 && std::strcmp(argv[1], "fetch") == 0) return fetch(argc, argv);
  std::fprintf(stderr, "usage: sandlet-loader holder --root DIR ... | fetch --fd N ...\n");
  return 2;
}
