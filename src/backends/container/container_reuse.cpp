// FnCall's hooks on a container (backend.hpp: set_limits, reuse_mark, unchanged_since). Reuse is decided
// by the host, never trusted to the guest: after a call, a container is as it was marked only when
//  - its cgroup holds as many processes as when it was marked (the exec's own group is killed at its exit;
//    anything that escaped, e.g. into a group of its own, shows up here). The count is the pids
//    controller's, on cgroup v2 or, on a hybrid host, v1; killed processes leave it a moment after the
//    exec's reply, so a higher count is re-read for a bounded while;
//  - statfs (free blocks and inodes) and the root directory's ctime are unchanged for /, /tmp, /dev and
//    /dev/shm, seen through the init's /proc/<pid>/root (the overlay's statfs is its upper tmpfs's): a file
//    written, created, removed or renamed changes one of them;
//  - its IPC namespace holds no SysV object (sysv_probe.hpp).
// A live overlay's upper cannot be cleared safely while mounted, so a call that wrote anything always
// costs a fresh container (the price of never reusing a dirty one).
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "backends/container/container_sandbox.hpp"
#include "backends/host/sandbox_cgroup.hpp"
#include "common/error.hpp"
#include "sys/fs_util.hpp"

namespace sandlet::container {
namespace {

struct Fingerprint {
  struct Fs {
    bool ok = false;
    uint64_t bfree = 0, ffree = 0;
    int64_t ctime_s = 0, ctime_ns = 0;
    bool operator==(const Fs& o) const {
      return ok == o.ok && bfree == o.bfree && ffree == o.ffree && ctime_s == o.ctime_s && ctime_ns == o.ctime_ns;
    }
  };
  Fs fs[4];
  int64_t pids = -1;
  bool operator==(const Fingerprint& o) const {
    for (int i = 0; i < 4; ++i)
      if (!(fs[i] == o.fs[i])) return false;
    return pids == o.pids;
  }
};

const char* const kWatched[4] = {"", "/tmp", "/dev", "/dev/shm"};

int64_t read_pids(const std::string& path) {
  if (path.empty()) return -1;
  const auto n = sys::read_u64_file(path);
  return n ? static_cast<int64_t>(*n) : -1;
}

Fingerprint fingerprint(pid_t init_pid, const std::string& pids_file) {
  Fingerprint fp;
  const std::string root = "/proc/" + std::to_string(init_pid) + "/root";
  for (int i = 0; i < 4; ++i) {
    const std::string p = root + kWatched[i] + "/";
    struct statfs sf;
    struct stat st;
    if (::statfs(p.c_str(), &sf) != 0 || ::stat(p.c_str(), &st) != 0) continue;
    fp.fs[i].ok = true;
    fp.fs[i].bfree = sf.f_bfree;
    fp.fs[i].ffree = sf.f_ffree;
    fp.fs[i].ctime_s = st.st_ctim.tv_sec;
    fp.fs[i].ctime_ns = st.st_ctim.tv_nsec;
  }
  fp.pids = read_pids(pids_file);
  return fp;
}

// The pids controller's count: the v2 group's when it has the controller, else the v1 pids group's
// (hybrid hosts). "" when neither exists (the count is then not compared).
std::string pids_current_file(const sys::CgroupPaths& paths) {
  const std::string v2 = paths.v2 + "/pids.current";
  if (::access(v2.c_str(), R_OK) == 0) return v2;
  for (const auto& p : paths.v1)
    if (::access((p + "/pids.current").c_str(), R_OK) == 0) return p + "/pids.current";
  return {};
}

struct ContainerReuseMark final : BackendSandbox::ReuseMark {
  pid_t init_pid = 0;
  std::string pids_file;
  sys::UniqueFd ipc_ns;
  Fingerprint clean;
};

}  // namespace

std::unique_ptr<BackendSandbox::ReuseMark> ContainerSandbox::reuse_mark() const {
  auto mark = std::make_unique<ContainerReuseMark>();
  mark->init_pid = state_.init_pid;
  mark->pids_file = pids_current_file(state_.cgroups);
  mark->ipc_ns.reset(::open(("/proc/" + std::to_string(state_.init_pid) + "/ns/ipc").c_str(), O_RDONLY | O_CLOEXEC));
  if (!mark->ipc_ns) throw_errno("reuse check: open the IPC namespace of sandbox " + id_);
  mark->clean = fingerprint(mark->init_pid, mark->pids_file);
  return mark;
}

bool ContainerSandbox::unchanged_since(const ReuseMark& base) const {
  const auto* clean_mark = dynamic_cast<const ContainerReuseMark*>(&base);
  if (!clean_mark || clean_mark->init_pid != state_.init_pid) return false;
  const Fingerprint& clean = clean_mark->clean;
  // Killed stragglers may still be counted right after the exec's reply: only a higher process count with
  // everything else equal is re-read, up to ~200 ms.
  Fingerprint now = fingerprint(clean_mark->init_pid, clean_mark->pids_file);
  for (int i = 0; i < 200 && now.pids > clean.pids; ++i) {
    Fingerprint same_files = now;
    same_files.pids = clean.pids;
    if (!(same_files == clean)) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    now.pids = read_pids(clean_mark->pids_file);
  }
  if (!(now == clean)) return false;
  return !node_->sysv.has_objects(clean_mark->ipc_ns.get());
}

void ContainerSandbox::set_limits(const Limits& limits) {
  set_running_limits(node_->cgroups, state_.cgroups, limits);
}

}  // namespace sandlet::container
