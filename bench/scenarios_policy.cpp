// policy: what the default seccomp profile costs. The filter cannot be switched off in a sandlet sandbox
// (nothing in a spec removes it, and the bench adds no way to), so the cost is measured where only the
// filter differs: host processes of the same workload with and without the very program the library
// embeds (the bench compiles it from the same rules; a unit test checks they are equal), paired
// iteration by iteration. For context, the same workloads inside a sandlet sandbox, and inside bubblewrap
// (whose default installs no seccomp filter) on the same root filesystem.
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

#include <optional>
#include <string>

#include "policy/seccomp/profile_rules.hpp"

namespace bench {
namespace json = boost::json;

namespace {

constexpr long kLoopCalls = 200000;

enum class Work { kExecTrue, kFindRootfs, kFindUsr, kLoopGetppid, kLoopIoctl };

// fork; the child installs `bpf` (unless empty) as a sandbox's init does, once and untimed (a sandbox pays
// that at create, not per command), then times the work in a grandchild that inherits the filter, and
// reports the time through a pipe. Only async-signal-safe calls after fork.
void work_in_child(Work work, const char *find_dir) {
  const int null = ::open("/dev/null", O_WRONLY);
  ::dup2(null, 1);
  switch (work) {
    case Work::kExecTrue: ::execl("/bin/true", "true", nullptr); break;
    case Work::kFindRootfs:
    case Work::kFindUsr: ::execl("/usr/bin/find", "find", find_dir, nullptr); break;
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

std::uint64_t run_child(const std::string &bpf, Work work, const std::string &rootfs) {
  const char *find_dir = work == Work::kFindRootfs ? rootfs.c_str() : "/usr/include";
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
    if (worker == 0) work_in_child(work, find_dir);
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

json::object host_pair(const Context &ctx, const std::string &bpf, Work work, std::size_t n) {
  const std::string rootfs = ctx.rootfs.string();
  const TimedOp with = [&](unsigned) { return run_child(bpf, work, rootfs); };
  const TimedOp without = [&](unsigned) { return run_child(std::string(), work, rootfs); };
  const PairedRun r = run_paired(with, without, n, 1, ctx.opt.warmup);
  json::object out;
  json::object w, wo;
  put_summary(w, summarize(r.ours_ns));
  put_summary(wo, summarize(r.peer_ns));
  out["with_default_profile"] = std::move(w);
  out["without_filter"] = std::move(wo);
  // Paired: > 1 is the filter's slowdown.
  out["ratio_with_vs_without"] = round3(paired_ratio_median(r.ours_ns, r.peer_ns));
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
  json::object host;
  host["exec_true"] = host_pair(ctx, bpf, Work::kExecTrue, n);
  host["find_rootfs"] = host_pair(ctx, bpf, Work::kFindRootfs, n);
  host["find_usr_include"] = host_pair(ctx, bpf, Work::kFindUsr, n);
  json::object loop_getppid = host_pair(ctx, bpf, Work::kLoopGetppid, n);
  loop_getppid["calls"] = kLoopCalls;
  host["loop_getppid"] = std::move(loop_getppid);
  json::object loop_ioctl = host_pair(ctx, bpf, Work::kLoopIoctl, n);
  loop_ioctl["calls"] = kLoopCalls;
  host["loop_ioctl_fionread"] = std::move(loop_ioctl);

  json::object out;
  out["profile"] = "default-v1";
  out["filter_instructions"] = bpf.size() / sizeof(sock_filter);
  out["host_same_program"] = std::move(host);
  out["sandbox_exec_true"] = in_sandbox(ctx, {"/bin/true"}, n);
  out["sandbox_find_root"] = in_sandbox(ctx, {"/usr/bin/find", "/", "-xdev"}, n);
  return out;
}

}  // namespace bench
