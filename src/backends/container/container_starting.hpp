// The kernel objects of a container start in progress (StartingInit): made by prepare(),
// handed over to the running sandbox by finish(), destroyed (killing the init, removing its groups) when a
// start fails.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "backends/container/container_node.hpp"
#include "backends/container/init_setup.hpp"
#include "backends/host/sandbox_cgroup.hpp"
#include "backends/container/sandbox_dev.hpp"
#include "backends/container/spawn_init.hpp"
#include "proto/init_protocol.hpp"
#include "proto/wire.hpp"
#include "sys/mount_api.hpp"
#include "sys/unix_socket.hpp"

namespace sandlet::container {

constexpr int kReadyTimeoutMs = 20000;

// A started init waiting for its configuration, and everything it needs.
struct StartingInit {
  StartingInit(SandboxCgroup cg, PausedInit in) : cgroup(std::move(cg)), init(std::move(in)) {}
  SandboxCgroup cgroup;
  PausedInit init;
  sys::UniqueFd setup;     // host end of the init's fd 3
  sys::UniqueFd dev;       // the sandbox's /dev, when made ahead (handed to the init when staged)
  sys::UniqueFd listener;  // the agent's socket (handed to the init when staged)
  sys::UniqueFd userns;
  // Staged: the init has its root filesystem (these layers, this disk size, /proc's kernel files masked or
  // not) and sits pivoted into it.
  bool staged = false;
  std::vector<std::string> layers;
  uint64_t disk = 0;
  bool masked = false;

  void expect(proto::InitMsg want, const char* step) {
    expect_setup_reply(setup.get(), init.pidfd(), init.pid(), want, step, kReadyTimeoutMs);
  }
  // Phase 1 of the init's start-up: its root filesystem, idmapped into its user namespace, and its /dev.
  // Sent, then awaited separately, so that a cold create can queue its configuration behind it (one round
  // trip). Built while the init execs (it has not asked for them yet), so off the critical path. Returns the
  // mount id of the writable layer's tmpfs, which the init keeps (a snapshot checks it got that one).
  uint64_t send_stage(const std::vector<std::string>& lower, uint64_t disk_bytes, bool mask_kernel_files,
                      uid_t root_uid, const ContainerNode& node) {
    sys::UniqueFd root_dev = dev ? std::move(dev) : build_sandbox_dev(root_uid, root_uid);
    sys::OverlayRootfs rootfs = sys::build_overlay_rootfs(lower, userns.get(), root_uid, disk_bytes);
    // The last close of a detached mount waits for an RCU grace period: not on the create's path.
    wire::Writer w;
    w.u32(proto::kInitHasCgroup | proto::kInitHasUpper | (mask_kernel_files ? proto::kInitMaskKernelFiles : 0u));
    sys::send_with_fds(setup.get(), proto::frame(proto::InitMsg::kStage, w.data()),
                       {rootfs.root.get(), root_dev.get(), listener.get(), cgroup.v2_fd(), rootfs.upper.get()});
    listener.reset();
    rootfs.sources.push_back(std::move(rootfs.upper));
    if (node.in_background) {
      auto held = std::make_shared<std::vector<sys::UniqueFd>>(std::move(rootfs.sources));
      node.in_background([held] { held->clear(); });
    }
    return rootfs.upper_mnt_id;
  }
  void await_staged(const std::vector<std::string>& lower, uint64_t disk_bytes, bool mask_kernel_files) {
    expect(proto::InitMsg::kStaged, "filesystem set-up");
    staged = true;
    layers = lower;
    disk = disk_bytes;
    masked = mask_kernel_files;
  }
};

}  // namespace sandlet::container
