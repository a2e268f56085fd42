// The container backend: a sandbox is sandlet's init as PID 1 of fresh user/mount/pid/ipc/uts/net/cgroup
// namespaces, in its own cgroup, on an OverlayFS root (idmapped layers + size-capped tmpfs upper).
// Creation is a linear pipeline of small steps; every kernel object is held by an RAII owner until the
// sandbox reports ready, so a failure at any step unwinds to nothing.
#include "backends/container/container_backend.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <optional>
#include <cstdlib>

#include "common/error.hpp"
#include "proto/agent_protocol.hpp"
#include "proto/wire.hpp"
#include "runtime/embedded_init.hpp"
#include "runtime/exec_env.hpp"
#include "sys/fs_util.hpp"
#include "sys/mount_api.hpp"
#include "sys/sandbox_dev.hpp"
#include "sys/seccomp_filter.hpp"
#include "sys/spawn_init.hpp"
#include "sys/unix_socket.hpp"

namespace sandlet {
namespace {

constexpr uint32_t kIdsPerSandbox = 65536;
constexpr int kReadyTimeoutMs = 20000;

// What a stuck init is doing, for the error message: state and kernel wait channel.
std::string describe_stuck(pid_t pid) {
  std::string base = "/proc/" + std::to_string(pid);
  auto stat = sys::read_file_if_exists(base + "/stat", 4096).value_or("?");
  auto wchan = sys::read_file_if_exists(base + "/wchan", 256).value_or("?");
  auto stack = sys::read_file_if_exists(base + "/stack", 4096).value_or("");
  size_t p = stat.rfind(')');
  std::string state = p != std::string::npos && p + 2 < stat.size() ? stat.substr(p + 2, 1) : "?";
  for (auto& c : stack)
    if (c == '\n') c = ' ';
  return "init pid " + std::to_string(pid) + " state " + state + ", waiting in " + wchan + " [" + stack + "]";
}

// Reads one frame from the setup socket, waiting at most `timeout_ms`.
bool read_setup_frame(int fd, proto::FrameHeader& h, std::string& payload, int timeout_ms, pid_t pid) {
  std::string buf;
  auto fill = [&](size_t want) {
    while (buf.size() < want) {
      pollfd p{fd, POLLIN, 0};
      int r = ::poll(&p, 1, timeout_ms);
      if (r < 0 && errno == EINTR) continue;
      if (r == 0)
        throw Error(Code::kDeadlineExceeded, "sandbox init did not report ready within " +
                                                 std::to_string(timeout_ms / 1000) + " s (" + describe_stuck(pid) + ")");
      char tmp[4096];
      ssize_t n = ::read(fd, tmp, std::min(sizeof tmp, want - buf.size()));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      buf.append(tmp, static_cast<size_t>(n));
    }
    return true;
  };
  if (!fill(proto::kHeaderSize)) return false;
  if (!proto::decode_header(buf.data(), &h)) throw Error(Code::kInternal, "sandbox init sent a malformed frame");
  if (!fill(proto::kHeaderSize + h.len)) return false;
  payload = buf.substr(proto::kHeaderSize);
  return true;
}

// A started init waiting for its configuration, and everything it needs.
struct ContainerPrepared final : Backend::Prepared {
  ContainerPrepared(sys::SandboxCgroup cg, sys::PausedInit in) : cgroup(std::move(cg)), init(std::move(in)) {}
  bool fits(const Spec& spec) const override {
    return !staged || (layers == spec.layers && disk == spec.limits.disk);
  }
  sys::SandboxCgroup cgroup;
  sys::PausedInit init;
  sys::UniqueFd setup;     // host end of the init's fd 3
  sys::UniqueFd dev;       // the sandbox's /dev, when made ahead (handed to the init when staged)
  sys::UniqueFd listener;  // the agent's socket (handed to the init when staged)
  sys::UniqueFd userns;
  // Staged: the init has its root filesystem (these layers, this disk size) and sits pivoted into it.
  bool staged = false;
  std::vector<std::string> layers;
  uint64_t disk = 0;
};

std::string describe_exit(const sys::PausedInit& init) {
  siginfo_t info = {};
  if (::waitid(P_PIDFD, static_cast<id_t>(init.pidfd()), &info, WEXITED | WNOWAIT | WNOHANG | __WALL) == 0 &&
      info.si_pid != 0) {
    if (info.si_code == CLD_EXITED) {
      switch (info.si_status) {
        case 119: return "could not join its v1 cgroups";
        case 120: return "could not be started";
        case 121: return "could not switch to root inside its user namespace";
        case 126: return "could not exec the embedded init";
        default: return "exit status " + std::to_string(info.si_status);
      }
    }
    return "killed by signal " + std::to_string(info.si_status);
  }
  return "no exit status";
}

// Reads the init's answer to a setup step; a kError carries the init's own message.
void expect_setup_reply(ContainerPrepared& p, proto::Msg want, const char* step) {
  proto::FrameHeader h;
  std::string payload;
  if (!read_setup_frame(p.setup.get(), h, payload, kReadyTimeoutMs, p.init.pid()))
    throw Error(Code::kInternal, std::string("sandbox init exited during ") + step + " (" + describe_exit(p.init) + ")");
  if (h.type == proto::Msg::kError) {
    proto::ErrorReply err;
    proto::ErrorReply::decode(payload, &err);
    throw Error(static_cast<Code>(err.code), "sandbox setup failed: " + err.message, err.err_no);
  }
  if (h.type != want) throw Error(Code::kInternal, std::string("sandbox init sent an unexpected frame during ") + step);
}

// Phase 1 of the init's start-up: its root filesystem, idmapped into its user namespace, and its /dev.
// Sent, then awaited separately, so that a cold create can queue its configuration behind it (one round
// trip). Built while the init execs (it has not asked for them yet), so off the critical path.
void send_stage(ContainerPrepared& p, const std::vector<std::string>& layers, uint64_t disk, uid_t root_uid,
                const HostContext& host) {
  sys::UniqueFd dev = p.dev ? std::move(p.dev) : sys::build_sandbox_dev(root_uid, root_uid);
  sys::OverlayRootfs rootfs = sys::build_overlay_rootfs(layers, p.userns.get(), root_uid, disk);
  if (host.close_in_background) host.close_in_background(std::move(rootfs.sources));
  wire::Writer w;
  w.u32(proto::kInitHasCgroup);
  sys::send_with_fds(p.setup.get(), proto::frame(proto::Msg::kInitStage, w.data()),
                     {rootfs.root.get(), dev.get(), p.listener.get(), p.cgroup.v2_fd()});
  p.listener.reset();
}

void await_staged(ContainerPrepared& p, const std::vector<std::string>& layers, uint64_t disk) {
  expect_setup_reply(p, proto::Msg::kInitStaged, "filesystem set-up");
  p.staged = true;
  p.layers = layers;
  p.disk = disk;
}

void stage(ContainerPrepared& p, const std::vector<std::string>& layers, uint64_t disk, uid_t root_uid,
           const HostContext& host) {
  send_stage(p, layers, disk, root_uid, host);
  await_staged(p, layers, disk);
}

class ContainerBackend final : public Backend {
 public:
  explicit ContainerBackend(const HostContext& host) : host_(host) {}

  std::unique_ptr<Prepared> prepare(SandboxRecord& rec, const std::string& dir, const Spec* stage_for,
                                    const Limits* limits) override {
    // 1. cgroup, delegated to the sandbox's root.
    auto cgroup = sys::SandboxCgroup::create(host_.cgroups, rec.id, rec.uid_base, limits);
    rec.cgroups = cgroup.paths();

    // 2. The agent's listening socket, on a host path only the runtime can reach; the network namespace.
    //    A process's first create usually waits for its namespace (made on another thread): the sandbox's
    //    /dev is made meanwhile. Otherwise /dev is made while the init execs (send_stage).
    rec.agent_socket = dir + "/agent.sock";
    sys::UniqueFd listener = sys::listen_unix(rec.agent_socket);
    sys::UniqueFd dev;
    sys::UniqueFd netns = host_.netns->try_take();
    if (!netns) {
      dev = sys::build_sandbox_dev(rec.uid_base, rec.uid_base);
      netns = host_.netns->take();
    }

    // 3. The init, paused in its new namespaces until ids are mapped. Every init starts with a parent-death
    //    signal (bound to this long-lived runtime thread); a detached sandbox's init drops it on config.
    sys::UniqueFd setup_host, setup_child;
    sys::socket_pair(setup_host, setup_child);
    sys::InitSpawnParams params;
    params.exec_fd = embedded_init_fd(host_.init_cache_dir);
    params.setup_fd = setup_child.get();
    params.cgroup_fd = cgroup.v2_fd();
    params.join_v1_fds = cgroup.v1_join_fds();
    params.die_with_parent = true;
    params.new_netns = false;
    std::optional<sys::PausedInit> spawned;
    {
      sys::ScopedNetns in_sandbox_net(netns.get());  // the child inherits this thread's network namespace
      spawned.emplace(sys::PausedInit::spawn(params));
    }
    auto prepared = std::make_unique<ContainerPrepared>(std::move(cgroup), std::move(*spawned));
    prepared->setup = std::move(setup_host);
    prepared->listener = std::move(listener);
    prepared->dev = std::move(dev);
    setup_child.reset();
    sys::PausedInit& init = prepared->init;

    prepared->cgroup.close_v1_join_fds();  // the child holds its own copies until it has joined
    init.map_ids(rec.uid_base, kIdsPerSandbox);
    init.resume();  // the init execs and waits for its configuration
    // PID 1 should survive the sandbox's own OOM kills; the agent resets this for every command.
    // Best effort: lowering it needs CAP_SYS_RESOURCE, which some hosts withhold even from root; the
    // tiny init is then still the OOM killer's last choice by size. (Written while the init execs: nothing
    // of the sandbox runs before its configuration.)
    (void)sys::try_write_existing("/proc/" + std::to_string(init.pid()) + "/oom_score_adj", "-1000");
    prepared->userns.reset(::open(("/proc/" + std::to_string(init.pid()) + "/ns/user").c_str(), O_RDONLY | O_CLOEXEC));
    if (!prepared->userns) throw_errno("open user namespace of sandbox init");
    rec.init_pid = init.pid();
    rec.init_start = sys::process_start_time(init.pid()).value_or(0);
    if (stage_for) stage(*prepared, stage_for->layers, stage_for->limits.disk, rec.uid_base, host_);
    return prepared;
  }

  sys::UniqueFd finish(std::unique_ptr<Prepared> base, SandboxRecord& rec, OneShot* one_shot) override {
    std::unique_ptr<ContainerPrepared> p(static_cast<ContainerPrepared*>(base.release()));
    const Spec& spec = rec.spec;
    p->cgroup.apply_limits(spec.limits);
    rec.cgroups = p->cgroup.paths();

    // 4. Root filesystem and /dev (unless staged ahead with the same environment): sent now, the reply
    //    read after the configuration has been queued behind it.
    const bool stage_now = !p->staged;
    if (stage_now) send_stage(*p, spec.layers, spec.limits.disk, rec.uid_base, host_);
    else if (!p->fits(spec)) throw Error(Code::kInternal, "prepared sandbox staged for other layers");

    // 5. Identity and policy; wait for the init to report ready.
    proto::InitConfig config;
    config.hostname = spec.hostname;
    config.workdir = spec.workdir;
    config.user = spec.user;
    config.env = base_env(spec);
    config.seccomp_bpf = sys::baseline_seccomp_bpf();
    config.max_lifetime_ms = static_cast<uint64_t>(std::llround(spec.max_lifetime_s * 1000));
    config.idle_timeout_ms = static_cast<uint64_t>(std::llround(spec.idle_timeout_s * 1000));
    config.flags = proto::kInitHasCgroup;  // lo is already up in the pooled network namespace
    if (spec.lifetime == Lifetime::kDetached) config.flags |= proto::kInitDetached;
    std::vector<int> stdio;
    if (one_shot) {
      config.flags |= proto::kInitRunOnce;
      proto::RunOnce& run = config.run_once;
      run.argv = one_shot->argv;
      run.env = merge_env(config.env, one_shot->env);  // over the spec as resolved (environment defaults)
      run.cwd = one_shot->cwd;
      run.user = one_shot->user;
      run.timeout_ms = one_shot->timeout_ms;
      for (int i = 0; i < 3; ++i) {
        if (one_shot->stdio[i] < 0) continue;
        run.stdio |= 1u << i;
        stdio.push_back(one_shot->stdio[i]);
      }
    }
    try {
      sys::send_with_fds(p->setup.get(), proto::frame(proto::Msg::kInitConfig, config.encode()), stdio);
    } catch (const Error&) {
      // An init that failed its filesystem set-up has exited: its own error, not EPIPE, says why.
      if (stage_now) await_staged(*p, spec.layers, spec.limits.disk);
      throw;
    }
    if (stage_now) await_staged(*p, spec.layers, spec.limits.disk);
    expect_setup_reply(*p, proto::Msg::kInitReady, "start-up");
    if (one_shot) one_shot->report = std::move(p->setup);  // the command's exit arrives there
    p->cgroup.release();
    return p->init.release();
  }

 private:
  const HostContext& host_;
};

}  // namespace

std::unique_ptr<Backend> make_container_backend(const HostContext& host) {
  return std::make_unique<ContainerBackend>(host);
}

std::string probe_container() {
  auto max_userns = sys::read_file_if_exists("/proc/sys/user/max_user_namespaces", 64);
  if (max_userns && std::atol(max_userns->c_str()) == 0) return "user namespaces are disabled (user.max_user_namespaces = 0)";
  auto fs = sys::read_file_if_exists("/proc/filesystems", 1 << 16);
  if (!fs || fs->find("\toverlay\n") == std::string::npos) return "the kernel has no OverlayFS";
  if (::geteuid() != 0) return "the container backend needs root (CAP_SYS_ADMIN) on the host";
  try {
    sys::CgroupSystem::detect();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace sandlet
