#include "backends/container/container_sandbox.hpp"
#include "backends/container/container_starting.hpp"
#include "backends/container/denial_log.hpp"
#include "backends/host/memory_reclaim.hpp"
#include "backends/host/net_gateway_reattach.hpp"
#include "backends/host/sandbox_net.hpp"

#include <signal.h>

#include <chrono>
#include <thread>

#include "common/error.hpp"
#include "sys/fs_util.hpp"
#include "sys/pidfd.hpp"
#include "sys/unix_socket.hpp"

namespace sandlet::container {
namespace {

constexpr int kExitWaitMs = 10000;
constexpr int kFreezeWaitMs = 5000;

// A record is the runtime's own file, but a damaged one must not make reclaim remove or kill anything
// outside this backend's own groups.
bool ours(const sys::CgroupSystem& cgroups, const std::string& path) {
  if (path.empty()) return true;
  for (const std::string& h : {cgroups.v2_root, cgroups.memory_v1, cgroups.pids_v1, cgroups.cpu_v1}) {
    if (h.empty()) continue;
    const std::string parent = sys::CgroupSystem::group_path(h, "");
    if (path.size() > parent.size() && path.compare(0, parent.size(), parent) == 0 &&
        path.find('/', parent.size()) == std::string::npos && path.find("..") == std::string::npos)
      return true;
  }
  return false;
}

}  // namespace

ContainerSandbox::ContainerSandbox(std::shared_ptr<ContainerNode> node, std::string id, std::string dir,
                                   ContainerState state)
    : BackendSandbox("container"), node_(std::move(node)), id_(std::move(id)), dir_(std::move(dir)),
      state_(std::move(state)) {}

ContainerSandbox::~ContainerSandbox() {
  if (!preparing_) return;
  // A start that did not finish: its init is killed and its groups removed by StartingInit's owners; the
  // uid range goes back to the table.
  starting_.reset();
  node_->slots->release(state_.slot, dir_);
  if (state_.net_gateway) node_->gateway().detach(id_);
}

bool ContainerSandbox::alive() const {
  // A descriptor of the init where we hold one: no /proc reads (a pooled sandbox is checked at every take).
  const int pidfd = starting_ ? starting_->init.pidfd() : pidfd_.get();
  if (pidfd >= 0) return !sys::pidfd_wait_exit(pidfd, 0);
  return sys::process_alive(state_.init_pid, state_.init_start);
}

sys::UniqueFd ContainerSandbox::connect() const { return sys::connect_unix(state_.agent_socket); }

bool ContainerSandbox::ended() {
  if (pidfd_) return sys::pidfd_reap_if_exited(pidfd_.get());
  return !alive();
}

void ContainerSandbox::kill() noexcept {
  // PID 1 first (the kernel then kills its whole pid namespace), then the cgroup (anything that left the
  // namespace). Through a pidfd: ours, or one opened and checked against the recorded start time.
  if (pidfd_) {
    sys::pidfd_signal(pidfd_.get(), SIGKILL);
  } else {
    sys::UniqueFd fd = sys::open_pidfd_checked(state_.init_pid, state_.init_start);
    sys::pidfd_signal(fd.get(), SIGKILL);
  }
  if (!state_.cgroups.v2.empty() && ours(node_->cgroups, state_.cgroups.v2))
    (void)sys::try_write_existing(state_.cgroups.v2 + "/cgroup.kill", "1");
}

void ContainerSandbox::reclaim() {
  if (pidfd_) {
    sys::pidfd_wait_exit(pidfd_.get(), kExitWaitMs);
    sys::pidfd_reap_if_exited(pidfd_.get());  // our child: no zombie left
  } else {
    sys::UniqueFd fd = sys::open_pidfd_checked(state_.init_pid, state_.init_start);
    sys::pidfd_wait_exit(fd.get(), kExitWaitMs);
  }
  // Groups as recorded, or (a crash before the record held them) where they would be.
  sys::CgroupPaths groups = state_.cgroups.v2.empty() ? sys::cgroup_paths_for(node_->cgroups, id_) : state_.cgroups;
  bool valid = ours(node_->cgroups, groups.v2);
  for (const auto& p : groups.v1) valid = valid && ours(node_->cgroups, p);
  if (!valid) throw Error(Code::kDataLoss, "sandbox " + id_ + ": its record names cgroups outside sandlet's");
  // The uid range goes back only once nothing of the sandbox runs: the next sandbox may get it.
  if (!sys::kill_and_remove_cgroups(groups)) throw Error(Code::kInternal, "sandbox " + id_ + ": cgroup still busy after kill");
  node_->slots->release(state_.slot, dir_);
  // The gateway drops a sandbox whose init has ended by itself; this only makes it prompt.
  if (state_.net_gateway) node_->gateway().detach(id_);
}

NetGatewayClient& ContainerNode::gateway() {
  std::lock_guard<std::mutex> lk(netgw_mutex);
  if (!netgw) netgw = make_node_gateway(root, net_uplink_netns);
  return *netgw;
}

// cgroup v2 freezer (the controller-less cgroup2 tree of hybrid hosts has it too): the write starts the
// freeze; cgroup.events says when every process of the group (per-exec groups included) has stopped.
void ContainerSandbox::freeze(bool frozen) {
  if (state_.cgroups.v2.empty()) throw Error(Code::kFailedPrecondition, "sandbox " + id_ + " has no cgroup");
  sys::write_existing(state_.cgroups.v2 + "/cgroup.freeze", frozen ? "1" : "0");
  const std::string want = frozen ? "frozen 1" : "frozen 0";
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(kFreezeWaitMs);
  for (int spin = 0;; ++spin) {
    auto events = sys::read_file_if_exists(state_.cgroups.v2 + "/cgroup.events", 4096);
    if (!events) throw Error(Code::kFailedPrecondition, "sandbox " + id_ + " is gone");
    if (events->find(want) != std::string::npos) return;
    if (std::chrono::steady_clock::now() > deadline)
      throw Error(Code::kDeadlineExceeded, "sandbox " + id_ + ": cgroup did not report '" + want + "' within " +
                                               std::to_string(kFreezeWaitMs / 1000) + " s");
    std::this_thread::sleep_for(std::chrono::microseconds(spin < 20 ? 100 : 2000));
  }
}

// (The filter is found from the recorded group: a damaged record must not lead to another group's.)
void ContainerSandbox::net_update(const NetworkPolicy& policy) {
  if (!ours(node_->cgroups, state_.cgroups.v2))
    throw Error(Code::kDataLoss, "sandbox " + id_ + ": its record names a cgroup outside sandlet's");
  update_sandbox_network(state_.net_gateway ? &node_->gateway() : nullptr, state_.cgroups.v2, id_, policy,
                         node_->net_uplink_netns);
}

boost::json::object ContainerSandbox::net_stats() const {
  if (!ours(node_->cgroups, state_.cgroups.v2))
    throw Error(Code::kDataLoss, "sandbox " + id_ + ": its record names a cgroup outside sandlet's");
  boost::json::object o =
      sandbox_network_stats(state_.net_gateway ? &node_->gateway() : nullptr, state_.cgroups.v2, id_, dir_);
  // Sockets of a family the seccomp profile refuses (AF_VSOCK, AF_PACKET, ...): counted by the init.
  uint64_t sockets = 0;
  try {
    const boost::json::object seccomp = read_denial_log(dir_, UINT64_MAX);
    if (const auto* by = seccomp.if_contains("by_syscall"); by && by->is_object())
      for (const char* call : {"socket", "socketpair"})
        if (const auto* n = by->as_object().if_contains(call); n && n->is_number()) sockets += n->to_number<uint64_t>();
  } catch (const std::exception&) {
    // no denial log (a sandbox without the counting init): none counted
  }
  o["socket_families_refused"] = sockets;
  return o;
}

boost::json::object ContainerSandbox::seccomp_stats(uint64_t after_seq) const { return read_denial_log(dir_, after_seq); }

void ContainerSandbox::pause() { freeze(true); }
void ContainerSandbox::resume() { freeze(false); }
uint64_t ContainerSandbox::reclaim_memory() { return reclaim_frozen_memory(state_.cgroups, node_->cgroups.memory_v1); }

}  // namespace sandlet::container
