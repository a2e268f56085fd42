#include "guest/seccomp_notify.hpp"

#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "guest/rt/syscall.h"
#include "guest/seccomp_eval.hpp"
#include "guest/setup.hpp"
#include "proto/denial_log.hpp"

namespace sandlet::guest {
namespace {

proto::DenialLog* g_log = nullptr;
int g_listener = -1;
alignas(16) char g_stack[16 * 1024];
// The program as compiled (denials as SECCOMP_RET_ERRNO | errno), to find each notified call's errno.
struct sock_filter g_program[BPF_MAXINSNS];
size_t g_program_len = 0;

// The errno the filter as compiled gives `d`: EPERM, EAFNOSUPPORT for a refused socket family, ...
int denied_errno(const struct seccomp_data& d) {
  const uint32_t ret = seccomp_eval(g_program, g_program_len, d);
  if ((ret & SECCOMP_RET_ACTION_FULL) != SECCOMP_RET_ERRNO || (ret & SECCOMP_RET_DATA) == 0) return EPERM;
  return static_cast<int>(ret & SECCOMP_RET_DATA);
}

// The thread shares the init's memory but not its C runtime (whose errno and allocator are single
// threaded): only raw system calls here.
void record(const struct seccomp_data& d, uint32_t pid, int error) {
  const uint32_t nr = static_cast<uint32_t>(d.nr);
  struct timespec ts = {};
  SANDLET_RT_SYSCALL(SYS_clock_gettime, CLOCK_REALTIME, &ts, 0, 0, 0, 0);
  const uint64_t seq = g_log->last_seq + 1;
  proto::DenialRecord& r = g_log->ring[(seq - 1) % proto::kDenialLogRing];
  __atomic_store_n(&r.seq, 0, __ATOMIC_RELEASE);
  r.time_ns = static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
  r.nr = nr;
  r.pid = pid;
  r.error = static_cast<uint32_t>(error);
  r.reserved = 0;
  for (int k = 0; k < 3; ++k) r.args[k] = d.args[k];
  __atomic_store_n(&r.seq, seq, __ATOMIC_RELEASE);
  if (nr < proto::kDenialLogSyscalls)
    __atomic_store_n(&g_log->by_nr[nr], g_log->by_nr[nr] + 1, __ATOMIC_RELAXED);
  else
    __atomic_store_n(&g_log->other, g_log->other + 1, __ATOMIC_RELAXED);
  __atomic_store_n(&g_log->total, g_log->total + 1, __ATOMIC_RELAXED);
  __atomic_store_n(&g_log->last_seq, seq, __ATOMIC_RELEASE);
}

int supervise(void*) {
  const uint64_t all = ~0ull;  // signals are the init's (its signalfd), never this thread's
  SANDLET_RT_SYSCALL(SYS_rt_sigprocmask, SIG_SETMASK, &all, 0, sizeof all, 0, 0);
  for (;;) {
    struct seccomp_notif req;
    memset(&req, 0, sizeof req);  // the kernel refuses a buffer that is not zeroed
    long r = SANDLET_RT_SYSCALL(SYS_ioctl, g_listener, SECCOMP_IOCTL_NOTIF_RECV, &req, 0, 0, 0);
    if (r == -EINTR || r == -ENOENT) continue;  // ENOENT: the caller was killed before we read it
    if (r < 0) break;
    const int error = denied_errno(req.data);
    record(req.data, req.pid, error);
    struct seccomp_notif_resp resp;
    memset(&resp, 0, sizeof resp);
    resp.id = req.id;
    resp.error = -error;
    SANDLET_RT_SYSCALL(SYS_ioctl, g_listener, SECCOMP_IOCTL_NOTIF_SEND, &resp, 0, 0, 0);  // ENOENT: it died
  }
  // Never leave a caller waiting on a thread that is gone: without a listener the kernel fails the
  // notified calls (ENOSYS) instead. They stay denied.
  SANDLET_RT_SYSCALL(SYS_close, g_listener, 0, 0, 0, 0, 0);
  __atomic_store_n(&g_log->counting, 0u, __ATOMIC_RELEASE);
  return 0;
}

bool map_log(int fd) {
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size != proto::kDenialLogSize) return false;
  void* p = mmap(nullptr, proto::kDenialLogSize, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) return false;
  // Commands forked from the init must not carry a writable view of the log into their own code.
  SANDLET_RT_SYSCALL(SYS_madvise, p, proto::kDenialLogSize, MADV_DONTFORK, 0, 0, 0);
  g_log = static_cast<proto::DenialLog*>(p);
  g_log->magic = proto::kDenialLogMagic;
  g_log->version = proto::kDenialLogVersion;
  return true;
}

}  // namespace

Status install_seccomp_counted(std::string& bpf, int log_fd) {
  if (log_fd < 0 || bpf.empty()) {
    if (log_fd >= 0) close(log_fd);
    return install_seccomp(bpf);
  }
  const bool mapped = map_log(log_fd);
  close(log_fd);
  if (!mapped) return make_status(SANDLET_INTERNAL, EINVAL, "map the seccomp denial log");
  if (Status s = check_seccomp(bpf); !s.ok()) return s;
  std::string notified = bpf;
  auto* insns = reinterpret_cast<struct sock_filter*>(notified.data());
  const size_t n = notified.size() / sizeof(struct sock_filter);
  memcpy(g_program, bpf.data(), bpf.size());  // check_seccomp: at most BPF_MAXINSNS
  g_program_len = n;
  // Every denial, whatever its errno: the supervisor answers each with the errno the program names.
  for (size_t i = 0; i < n; ++i)
    if (insns[i].code == (BPF_RET | BPF_K) && (insns[i].k & SECCOMP_RET_ACTION_FULL) == SECCOMP_RET_ERRNO)
      insns[i].k = SECCOMP_RET_USER_NOTIF;
  struct sock_fprog prog;
  prog.len = static_cast<unsigned short>(n);
  prog.filter = insns;
  const long fd = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER, &prog);
  if (fd < 0) return install_seccomp(bpf);  // no listener here (an outer filter has one): uncounted
  g_listener = static_cast<int>(fd);
  constexpr int kThread = CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND | CLONE_THREAD | CLONE_SYSVSEM;
  if (clone(supervise, g_stack + sizeof g_stack, kThread, nullptr) < 0) {
    // The filter is in place and notifies a listener nobody reads: close it, so denied calls fail
    // (ENOSYS) rather than wait.
    close(g_listener);
    g_listener = -1;
    return make_status(SANDLET_INTERNAL, errno, "start the seccomp supervisor");
  }
  __atomic_store_n(&g_log->counting, 1u, __ATOMIC_RELEASE);
  return Status::Ok();
}

}  // namespace sandlet::guest
