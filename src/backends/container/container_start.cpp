// The container start pipeline: prepare (spec-independent, may run ahead in a warm pool) and finish.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <optional>

#include "backends/container/container_sandbox.hpp"
#include "backends/container/container_starting.hpp"
#include "backends/container/denial_log.hpp"
#include "backends/host/dns_log.hpp"
#include "backends/host/init_file_policy.hpp"
#include "backends/container/embedded_init.hpp"
#include "backends/container/init_setup.hpp"
#include "backends/container/kernel_support.hpp"
#include "backends/host/netgw_counters.hpp"
#include "backends/host/sandbox_cgroup.hpp"
#include "backends/container/sandbox_dev.hpp"
#include "backends/host/sandbox_net.hpp"
#include "backends/container/spawn_init.hpp"
#include "common/error.hpp"
#include "common/fault_point.hpp"
#include "policy/seccomp_profile.hpp"
#include "proto/init_protocol.hpp"
#include "proto/wire.hpp"
#include "spec/exec_env.hpp"
#include "sys/fs_util.hpp"
#include "sys/mount_api.hpp"
#include "sys/unix_socket.hpp"

namespace sandlet::container {
namespace {


// The spec's host directories as detached mounts for the init (sent with the configuration), cloned now:
// a sandbox staged ahead gets the directories as they are when it is handed out.
std::vector<sys::UniqueFd> clone_mounts(const Spec& spec, int userns_fd, proto::InitConfig& config) {
  static_assert(proto::kMaxMounts == 64, "the spec's limit (spec_mounts.cpp)");
  std::vector<sys::UniqueFd> fds;
  fds.reserve(spec.mounts.size());
  for (size_t i = 0; i < spec.mounts.size(); ++i) {
    const Mount& m = spec.mounts[i];
    fds.push_back(sys::host_dir_clone(m.source, m.readonly, userns_fd,
                                      "mounts[" + std::to_string(i) + "].source " + m.source));
    config.mounts.push_back({m.target, m.readonly ? proto::kMountReadOnly : 0u});
  }
  if (!fds.empty()) config.flags |= proto::kInitHasMounts;
  return fds;
}

// The toolkit (a host directory, or a store layer's mounted directory once the runtime resolved it) as a
// detached read-only mount, sent last with the configuration.
sys::UniqueFd clone_toolkit(const Spec& spec, int userns_fd, proto::InitConfig& config) {
  if (spec.toolkit.empty()) return {};
  config.flags |= proto::kInitHasToolkit;
  return sys::host_dir_clone(spec.toolkit, true, userns_fd, "toolkit " + spec.toolkit);
}


}  // namespace

void ContainerSandbox::prepare(const Spec* stage_for, const Limits* limits) {
  // 1. A uid range of its own, node-wide.
  preparing_ = true;
  state_.slot = node_->slots->claim(dir_);
  state_.uid_base = SlotTable::uid_base(state_.slot);
  fault_point("container.slot");

  // 2. cgroup, delegated to the sandbox's root.
  auto cgroup = SandboxCgroup::create(node_->cgroups, id_, state_.uid_base, limits);
  state_.cgroups = cgroup.paths();
  fault_point("container.cgroup");

  // 3. The agent's listening socket, on a host path only the runtime can reach; the network namespace.
  //    A process's first create usually waits for its namespace (made on another thread): the sandbox's
  //    /dev is made meanwhile. Otherwise /dev is made while the init execs (send_stage).
  state_.agent_socket = dir_ + "/agent.sock";
  sys::UniqueFd listener = sys::listen_unix(state_.agent_socket);
  sys::UniqueFd dev;
  sys::UniqueFd netns = node_->netns.try_take();
  if (!netns) {
    dev = build_sandbox_dev(state_.uid_base, state_.uid_base);
    netns = node_->netns.take();
  }

  // 4. The init, paused in its new namespaces until ids are mapped. Every init starts with a parent-death
  //    signal (bound to this long-lived runtime thread); a detached sandbox's init drops it on config.
  sys::UniqueFd setup_host, setup_child;
  sys::socket_pair(setup_host, setup_child);
  InitSpawnParams params;
  params.exec_fd = embedded_init_fd(node_->init_cache_dir);
  params.setup_fd = setup_child.get();
  params.cgroup_fd = cgroup.v2_fd();
  params.join_v1_fds = cgroup.v1_join_fds();
  params.die_with_parent = true;
  params.new_netns = false;
  std::optional<PausedInit> spawned;
  {
    ScopedNetns in_sandbox_net(netns.get());  // the child inherits this thread's network namespace
    spawned.emplace(PausedInit::spawn(params));
  }
  starting_ = std::make_unique<StartingInit>(std::move(cgroup), std::move(*spawned));
  StartingInit& s = *starting_;
  s.setup = std::move(setup_host);
  s.listener = std::move(listener);
  s.dev = std::move(dev);
  setup_child.reset();
  fault_point("container.spawned");

  s.cgroup.close_v1_join_fds();  // the child holds its own copies until it has joined
  s.init.map_ids(state_.uid_base, SlotTable::kIdsPerSlot);
  s.init.resume();  // the init execs and waits for its configuration
  // PID 1 should survive the sandbox's own OOM kills; the agent resets this for every command.
  // Best effort: lowering it needs CAP_SYS_RESOURCE, which some hosts withhold even from root; the
  // tiny init is then still the OOM killer's last choice by size. (Written while the init execs: nothing
  // of the sandbox runs before its configuration.) Through the legacy oom_adj (-17 is -1000): a privileged
  // write to oom_score_adj would also set the floor every descendant inherits (oom_score_adj_min), and
  // root inside could then lower its commands back to -1000.
  (void)sys::try_write_existing("/proc/" + std::to_string(s.init.pid()) + "/oom_adj", "-17");
  s.userns.reset(::open(("/proc/" + std::to_string(s.init.pid()) + "/ns/user").c_str(), O_RDONLY | O_CLOEXEC));
  if (!s.userns) throw_errno("open user namespace of sandbox init");
  state_.init_pid = s.init.pid();
  state_.init_start = sys::process_start_time(s.init.pid()).value_or(0);
  if (stage_for) {
    const bool mask = stage_for->policy.mask_kernel_files;
    state_.upper_mnt_id = s.send_stage(stage_for->layers, stage_for->limits.disk, mask, state_.uid_base, *node_);
    s.await_staged(stage_for->layers, stage_for->limits.disk, mask);
  }
}

bool ContainerSandbox::fits(const Spec& spec) const {
  return starting_ && (!starting_->staged || (starting_->layers == spec.layers && starting_->disk == spec.limits.disk &&
                                               starting_->masked == spec.policy.mask_kernel_files));
}

void ContainerSandbox::finish(const Spec& spec, OneShot* one_shot) {
  if (!starting_) throw Error(Code::kFailedPrecondition, "sandbox " + id_ + ": finish without prepare");
  StartingInit& s = *starting_;
  require_accepted_guarantees(host_guarantees(node_->cgroups), spec);
  s.cgroup.apply_limits(spec.limits);
  s.cgroup.apply_cpu_class(spec_priority(spec) == SpecPriority::kBatch, state_.init_pid);
  state_.cgroups = s.cgroup.paths();  // apply_cpu_class may have made the v1 cpu group
  // The allowlist, before anything of the sandbox's own runs (the init waits for its configuration).
  const bool gateway = !spec.network.none;
  const NetIds net = attach_network_policy(s.cgroup.v2_fd(), spec.network);
  state_.net_rules_map = net.rules_map;
  state_.net_stats_map = net.stats_map;
  if (gateway) {
    // Connectivity through the node's gateway, before anything of the sandbox runs. A failure here (or
    // later) ends the init: its routes go with its namespace, and the gateway drops what it holds for it
    // when the init's pidfd reports the exit.
    const std::string ns_path = "/proc/" + std::to_string(s.init.pid()) + "/ns/net";
    const sys::UniqueFd ns(::open(ns_path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!ns) throw_errno("open " + ns_path);
    const sys::UniqueFd dns_log = spec.network.dns.empty() ? sys::UniqueFd() : open_dns_log(dir_, true);
    const sys::UniqueFd counters = open_netgw_counters(dir_, true);
    attach_network_gateway(node_->gateway(), id_, ns.get(), s.init.pidfd(), s.cgroup.v2_fd(), spec.network,
                           dns_log ? dns_log.get() : -1, counters.get());
    state_.net_gateway = true;
  }
  state_.cgroups = s.cgroup.paths();

  // 5. Root filesystem and /dev (unless staged ahead with the same environment): sent now, the reply
  //    read after the configuration has been queued behind it.
  const bool stage_now = !s.staged;
  if (stage_now)
    state_.upper_mnt_id = s.send_stage(spec.layers, spec.limits.disk, spec.policy.mask_kernel_files, state_.uid_base, *node_);
  else if (!fits(spec))
    throw Error(Code::kInternal, "prepared sandbox staged for other layers or kernel-file masks");
  fault_point("container.staging");

  // 6. Identity and policy; wait for the init to report ready.
  proto::InitConfig config;
  config.hostname = spec.hostname;
  config.workdir = spec.workdir;
  config.user = spec.user;
  config.env = base_env(spec);
  config.seccomp_bpf = policy::seccomp_bpf_for(spec.policy.seccomp);  // cached per distinct policy
  config.max_lifetime_ms = static_cast<uint64_t>(std::llround(spec.max_lifetime_s * 1000));
  config.idle_timeout_ms = static_cast<uint64_t>(std::llround(spec.idle_timeout_s * 1000));
  if (spec.on_expiry == OnExpiry::kKeep) config.keep_ms = static_cast<uint64_t>(std::llround(spec.keep_s * 1000));
  config.flags = proto::kInitHasCgroup;  // lo is already up in the pooled network namespace
  if (!spec.network.none && !spec.network.dns.empty()) config.flags |= proto::kInitResolverConf;
  if (spec.lifetime == Lifetime::kDetached) config.flags |= proto::kInitDetached;
  const std::vector<sys::UniqueFd> mounts = clone_mounts(spec, s.userns.get(), config);
  const sys::UniqueFd toolkit = clone_toolkit(spec, s.userns.get(), config);
  host::add_file_policy(spec.policy, config);
  sys::UniqueFd denial_log;  // denials counted by the init (guest/seccomp_notify.hpp)
  if (!config.seccomp_bpf.empty()) {
    denial_log = make_denial_log(dir_);
    config.flags |= proto::kInitHasDenialLog;
  }
  std::vector<int> passed;  // descriptors sent with the configuration
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
      passed.push_back(one_shot->stdio[i]);
    }
  }
  for (const auto& m : mounts) passed.push_back(m.get());  // after the stdio ones (init_protocol.hpp)
  if (toolkit) passed.push_back(toolkit.get());
  if (denial_log) passed.push_back(denial_log.get());     // last
  try {
    sys::send_with_fds(s.setup.get(), proto::frame(proto::InitMsg::kConfig, config.encode()), passed);
  } catch (const Error&) {
    // An init that failed its filesystem set-up has exited: its own error, not EPIPE, says why.
    if (stage_now) s.await_staged(spec.layers, spec.limits.disk, spec.policy.mask_kernel_files);
    throw;
  }
  if (stage_now) s.await_staged(spec.layers, spec.limits.disk, spec.policy.mask_kernel_files);
  s.expect(proto::InitMsg::kReady, "start-up");
  fault_point("container.ready");
  if (one_shot) one_shot->report = std::move(s.setup);  // the command's exit arrives there
  s.cgroup.release();
  pidfd_ = s.init.release();
  starting_.reset();
  preparing_ = false;
}

}  // namespace sandlet::container
