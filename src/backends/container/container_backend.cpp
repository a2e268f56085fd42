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
#include "proto/init_protocol.hpp"
#include "proto/wire.hpp"
#include "backends/container/embedded_init.hpp"
#include "runtime/exec_env.hpp"
#include "sys/fs_util.hpp"
#include "sys/mount_api.hpp"
#include "backends/container/sandbox_dev.hpp"
#include "policy/seccomp_profile.hpp"
#include "backends/container/sandbox_cgroup.hpp"
#include "backends/container/init_setup.hpp"
#include "backends/container/spawn_init.hpp"
#include "sys/unix_socket.hpp"

namespace sandlet {
namespace {

constexpr uint32_t kIdsPerSandbox = 65536;
constexpr int kReadyTimeoutMs = 20000;

// A started init waiting for its configuration, and everything it needs.
struct ContainerPrepared final : Backend::Prepared {
  ContainerPrepared(container::SandboxCgroup cg, container::PausedInit in) : cgroup(std::move(cg)), init(std::move(in)) {}
  bool fits(const Spec& spec) const override {
    return !staged || (layers == spec.layers && disk == spec.limits.disk);
  }
  container::SandboxCgroup cgroup;
  container::PausedInit init;
  sys::UniqueFd setup;     // host end of the init's fd 3
  sys::UniqueFd dev;       // the sandbox's /dev, when made ahead (handed to the init when staged)
  sys::UniqueFd listener;  // the agent's socket (handed to the init when staged)
  sys::UniqueFd userns;
  // Staged: the init has its root filesystem (these layers, this disk size) and sits pivoted into it.
  bool staged = false;
  std::vector<std::string> layers;
  uint64_t disk = 0;
};

// Reads the init's answer to a setup step; a kError carries the init's own message.
void expect_setup_reply(ContainerPrepared& p, proto::InitMsg want, const char* step) {
  container::expect_setup_reply(p.setup.get(), p.init.pidfd(), p.init.pid(), want, step, kReadyTimeoutMs);
}

// Phase 1 of the init's start-up: its root filesystem, idmapped into its user namespace, and its /dev.
// Sent, then awaited separately, so that a cold create can queue its configuration behind it (one round
// trip). Built while the init execs (it has not asked for them yet), so off the critical path.
void send_stage(ContainerPrepared& p, const std::vector<std::string>& layers, uint64_t disk, uid_t root_uid,
                const HostContext& host) {
  sys::UniqueFd dev = p.dev ? std::move(p.dev) : container::build_sandbox_dev(root_uid, root_uid);
  sys::OverlayRootfs rootfs = sys::build_overlay_rootfs(layers, p.userns.get(), root_uid, disk);
  if (host.close_in_background) host.close_in_background(std::move(rootfs.sources));
  wire::Writer w;
  w.u32(proto::kInitHasCgroup);
  sys::send_with_fds(p.setup.get(), proto::frame(proto::InitMsg::kStage, w.data()),
                     {rootfs.root.get(), dev.get(), p.listener.get(), p.cgroup.v2_fd()});
  p.listener.reset();
}

void await_staged(ContainerPrepared& p, const std::vector<std::string>& layers, uint64_t disk) {
  expect_setup_reply(p, proto::InitMsg::kStaged, "filesystem set-up");
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
    auto cgroup = container::SandboxCgroup::create(host_.cgroups, rec.id, rec.uid_base, limits);
    rec.cgroups = cgroup.paths();

    // 2. The agent's listening socket, on a host path only the runtime can reach; the network namespace.
    //    A process's first create usually waits for its namespace (made on another thread): the sandbox's
    //    /dev is made meanwhile. Otherwise /dev is made while the init execs (send_stage).
    rec.agent_socket = dir + "/agent.sock";
    sys::UniqueFd listener = sys::listen_unix(rec.agent_socket);
    sys::UniqueFd dev;
    sys::UniqueFd netns = host_.netns->try_take();
    if (!netns) {
      dev = container::build_sandbox_dev(rec.uid_base, rec.uid_base);
      netns = host_.netns->take();
    }

    // 3. The init, paused in its new namespaces until ids are mapped. Every init starts with a parent-death
    //    signal (bound to this long-lived runtime thread); a detached sandbox's init drops it on config.
    sys::UniqueFd setup_host, setup_child;
    sys::socket_pair(setup_host, setup_child);
    container::InitSpawnParams params;
    params.exec_fd = container::embedded_init_fd(host_.init_cache_dir);
    params.setup_fd = setup_child.get();
    params.cgroup_fd = cgroup.v2_fd();
    params.join_v1_fds = cgroup.v1_join_fds();
    params.die_with_parent = true;
    params.new_netns = false;
    std::optional<container::PausedInit> spawned;
    {
      container::ScopedNetns in_sandbox_net(netns.get());  // the child inherits this thread's network namespace
      spawned.emplace(container::PausedInit::spawn(params));
    }
    auto prepared = std::make_unique<ContainerPrepared>(std::move(cgroup), std::move(*spawned));
    prepared->setup = std::move(setup_host);
    prepared->listener = std::move(listener);
    prepared->dev = std::move(dev);
    setup_child.reset();
    container::PausedInit& init = prepared->init;

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
    config.seccomp_bpf = policy::baseline_seccomp_bpf();
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
      sys::send_with_fds(p->setup.get(), proto::frame(proto::InitMsg::kConfig, config.encode()), stdio);
    } catch (const Error&) {
      // An init that failed its filesystem set-up has exited: its own error, not EPIPE, says why.
      if (stage_now) await_staged(*p, spec.layers, spec.limits.disk);
      throw;
    }
    if (stage_now) await_staged(*p, spec.layers, spec.limits.disk);
    expect_setup_reply(*p, proto::InitMsg::kReady, "start-up");
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
