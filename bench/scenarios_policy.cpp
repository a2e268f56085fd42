// policy: what the default seccomp profile costs. The filter cannot be switched off in a sandlet sandbox
// (nothing in a spec removes it, and the bench adds no way to), so the cost is measured where only the
// filter differs: host processes of the same workload with no filter, with a one-instruction allow-all
// filter (what the kernel charges any filtered task), and with the very program the library embeds (the
// bench compiles it from the same rules; a unit test checks they are equal), interleaved iteration by
// iteration. For context, the same workloads inside a sandlet sandbox, and inside bubblewrap (whose
// default installs no seccomp filter) on the same root filesystem.
#include "capi.hpp"
#include "peers.hpp"
#include "report.hpp"
#include "runner.hpp"
#include "scenarios.hpp"
#include "stats.hpp"

#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <optional>
#include <string>

#include "policy/seccomp/profile_rules.hpp"
#include "policy/seccomp/profile_table.hpp"

namespace bench {
namespace json = boost::json;

namespace {

constexpr long kLoopCalls = 200000;

enum class Work { kExecTrue, kFindRootfs, kFindUsr, kCompileC, kLoopGetppid, kLoopIoctl };

// A C file that pulls in the usual headers (the compiler's system calls are mostly opening and reading them).
constexpr const char *kCompileSource = R"(#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <unistd.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <pthread.h>
#include <math.h>
struct node { struct node *next; double v; char name[32]; };
static double sum(const struct node *n) { double s = 0; for (; n; n = n->next) s += sqrt(n->v); return s; }
int main(int argc, char **argv) {
  struct node *head = NULL;
  for (int i = 0; i < argc * 1000; ++i) {
    struct node *n = malloc(sizeof *n);
    if (!n) return errno;
    snprintf(n->name, sizeof n->name, "%d:%s", i, argv[0]);
    n->v = strlen(n->name) * 1.5; n->next = head; head = n;
  }
  struct stat st; int fd = open(argv[0], O_RDONLY); if (fd >= 0 && fstat(fd, &st) == 0) printf("%ld\n", (long)st.st_size);
  printf("%f %u\n", sum(head), (unsigned)htons(80));
  return 0;
}
)";

// The filter every arm but one installs, and the one that allows everything: what any seccomp filter costs.
const sock_filter kAllowAll[] = {{BPF_RET | BPF_K, 0, 0, SECCOMP_RET_ALLOW}};

// fork; the child installs `bpf` (unless empty) as a sandbox's init does, once and untimed (a sandbox pays
// that at create, not per command), then times the work in a grandchild that inherits the filter, and
// reports the time through a pipe. Only async-signal-safe calls after fork.
void work_in_child(Work work, const char *path) {
  const int null = ::open("/dev/null", O_WRONLY);
  ::dup2(null, 1);
  switch (work) {
    case Work::kExecTrue: ::execl("/bin/true", "true", nullptr); break;
    case Work::kFindRootfs:
    case Work::kFindUsr: ::execl("/usr/bin/find", "find", path, nullptr); break;
    case Work::kCompileC: ::execl("/usr/bin/cc", "cc", "-O1", "-c", path, "-o", "/dev/null", nullptr); break;
    case Work::kLoopGetppid:
      for (long i = 0; i < kLoopCalls; ++i) ::syscall(SYS_getppid);
      ::_exit(0);
    case Work::kLoopIoctl: {  // ioctl's result depends on its arguments: the filter runs for each call
      int n = 0;
      for (long i = 0; i < kLoopCalls; ++i) ::ioctl(null, FIONREAD, &n);
      ::_exit(0);
    }
  }
  ::_exit(127);
}

// `path`: the directory find walks, or the file cc compiles.
std::uint64_t run_child(const std::string &bpf, Work work, const std::string &path) {
  int pipefd[2];
  if (::pipe2(pipefd, O_CLOEXEC) != 0) throw BenchError("pipe2 failed");
  const pid_t pid = ::fork();
  if (pid < 0) throw BenchError("fork failed");
  if (pid == 0) {
    if (!bpf.empty()) {
      sock_fprog prog{static_cast<unsigned short>(bpf.size() / sizeof(sock_filter)),
                      reinterpret_cast<sock_filter *>(const_cast<char *>(bpf.data()))};
      if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
          ::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) != 0)
        ::_exit(120);
    }
    const std::uint64_t t0 = now_ns();
    const pid_t worker = ::fork();
    if (worker == 0) work_in_child(work, path.c_str());
    int st = 0;
    if (worker < 0 || ::waitpid(worker, &st, 0) != worker || !WIFEXITED(st) || WEXITSTATUS(st) != 0) ::_exit(121);
    const std::uint64_t t = now_ns() - t0;
    ::_exit(::write(pipefd[1], &t, sizeof t) == sizeof t ? 0 : 122);
  }
  ::close(pipefd[1]);
  std::uint64_t t = 0;
  const bool got = ::read(pipefd[0], &t, sizeof t) == sizeof t;
  ::close(pipefd[0]);
  const int st = wait_child(pid);
  if (!got || !WIFEXITED(st) || WEXITSTATUS(st) != 0) throw BenchError("policy workload: " + describe_status(st));
  return t;
}

// Three arms, interleaved iteration by iteration (the first arm rotates, against order effects): no
// filter, a one-instruction allow-all filter, and the library's program. The allow-all arm separates what
// the kernel charges any filtered task (its seccomp work on every system call entry) from what our
// program adds (it runs only for calls the kernel's per-filter allow cache cannot answer).
json::object host_pair(const Context &ctx, const std::string &bpf, Work work, const std::string &path, std::size_t n) {
  const std::string allow_all(reinterpret_cast<const char *>(kAllowAll), sizeof kAllowAll);
  const std::string *arms[3] = {nullptr, &allow_all, &bpf};
  std::vector<std::uint64_t> ns[3];
  const std::string none;
  for (std::size_t i = 0; i < ctx.opt.warmup + n; ++i) {
    throw_if_stopped();
    for (int k = 0; k < 3; ++k) {
      const int arm = static_cast<int>((i + k) % 3);
      const std::uint64_t t = run_child(arms[arm] ? *arms[arm] : none, work, path);
      if (i >= ctx.opt.warmup) ns[arm].push_back(t);
    }
  }
  json::object out;
  const char *names[3] = {"without_filter", "allow_all_filter", "with_default_profile"};
  for (int arm = 0; arm < 3; ++arm) {
    json::object o;
    put_summary(o, summarize(ns[arm]));
    out[names[arm]] = std::move(o);
  }
  // Paired (same iteration): > 1 is a slowdown.
  out["ratio_with_vs_without"] = round3(paired_ratio_median(ns[2], ns[0]));
  out["ratio_allow_all_vs_without"] = round3(paired_ratio_median(ns[1], ns[0]));
  out["ratio_with_vs_allow_all"] = round3(paired_ratio_median(ns[2], ns[1]));
  return out;
}

json::object in_sandbox(const Context &ctx, const std::vector<const char *> &argv, std::size_t n) {
  Runtime rt(ctx.root, ctx.opt.workers, ctx.opt.warm_pool);
  const Spec spec(ctx.rootfs);
  Sandbox sb = create_sandbox(rt.get(), spec);
  std::vector<std::uint64_t> run_ns;
  const TimedOp ours = [&](unsigned) {
    std::uint64_t in = 0;
    const auto t0 = now_ns();
    exec_ok(sb, argv, &in);
    run_ns.push_back(in);
    return now_ns() - t0;
  };
  std::optional<Command> bwrap;
  TimedOp peer;
  if (ctx.opt.peer) {
    std::vector<std::string> cmd(argv.begin(), argv.end());
    bwrap.emplace(bwrap_command(ctx.rootfs, cmd));
    peer = [&](unsigned) { return bwrap->run_ok(); };
  }
  const PairedRun r = run_paired(ours, peer, n, 1, ctx.opt.warmup);
  json::object out;
  put_latency(out, summarize(r.ours_ns), r.ours_throughput());
  out["in_sandbox_run_p50_ms"] = round3(summarize(run_ns).p50_ms);
  if (bwrap) out["peer"] = peer_json("bwrap (no seccomp filter)", bwrap->str(), summarize(r.peer_ns), r.peer_throughput());
  sb.destroy();
  return out;
}

}  // namespace

json::object scenario_policy(const Context &ctx) {
  const std::size_t n = iterations_of(ctx);
  const std::string bpf = sandlet::seccomp::build_default_seccomp_bpf();
  const std::string source = (ctx.root / "policy-compile.c").string();
  {
    std::ofstream f(source);
    f << kCompileSource;
    if (!f) throw BenchError("policy: cannot write " + source);
  }
  json::object host;
  host["exec_true"] = host_pair(ctx, bpf, Work::kExecTrue, "", n);
  host["find_rootfs"] = host_pair(ctx, bpf, Work::kFindRootfs, ctx.rootfs.string(), n);
  host["find_usr_include"] = host_pair(ctx, bpf, Work::kFindUsr, "/usr/include", n);
  host["compile_c"] = host_pair(ctx, bpf, Work::kCompileC, source, n);
  json::object loop_getppid = host_pair(ctx, bpf, Work::kLoopGetppid, "", n);
  loop_getppid["calls"] = kLoopCalls;
  host["loop_getppid"] = std::move(loop_getppid);
  json::object loop_ioctl = host_pair(ctx, bpf, Work::kLoopIoctl, "", n);
  loop_ioctl["calls"] = kLoopCalls;
  host["loop_ioctl_fionread"] = std::move(loop_ioctl);

  json::object out;
  out["profile"] = std::string(sandlet::seccomp::kNewestProfile);
  out["filter_instructions"] = bpf.size() / sizeof(sock_filter);
  out["host_same_program"] = std::move(host);
  out["sandbox_exec_true"] = in_sandbox(ctx, {"/bin/true"}, n);
  out["sandbox_find_root"] = in_sandbox(ctx, {"/usr/bin/find", "/", "-xdev"}, n);
  return out;
}

}  // namespace bench
