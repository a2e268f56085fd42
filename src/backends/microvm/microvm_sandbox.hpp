// One microVM sandbox: QEMU (its `microvm` machine) booting the kit's kernel into sandlet-vm-init, under a
// host-side channel multiplexer that is QEMU's parent (guest/vm/host_mux.cpp). Both run jailed: the
// sandbox's own cgroup (guest RAM plus QEMU's overhead, CPU quota, pids), its own unprivileged uid, fresh
// network, IPC, UTS and mount namespaces, no_new_privs, and QEMU's own seccomp sandbox. The agent inside is
// the container's (same protocol), reached by a stream of the multiplexer per connection.
#pragma once
#include <memory>
#include <optional>
#include <string>

#include "backends/backend.hpp"
#include "backends/microvm/microvm_node.hpp"
#include "sys/cgroup.hpp"
#include "sys/fd.hpp"

namespace sandlet::microvm {

struct MicrovmState {
  int slot = -1;
  uint32_t uid = 0;        // QEMU's and the multiplexer's uid on the host
  pid_t mux_pid = 0;
  uint64_t mux_start = 0;
  sys::CgroupPaths cgroups;
  bool net_gateway = false;  // the node gateway holds this sandbox (a network policy)
  boost::json::object to_json() const;
  static MicrovmState from_json(const boost::json::object& o);
};

class MicrovmSandbox final : public BackendSandbox {
 public:
  MicrovmSandbox(std::shared_ptr<MicrovmNode> node, std::string id, std::string dir, MicrovmState state);
  ~MicrovmSandbox() override;

  void set_layer_images(std::vector<LayerImage> images) override {
    if (!launched_for_) images_ = std::move(images);
  }
  // A warm pool's VM: launched now for `staged` (its layers as `images`) in `shape`; finish() then only
  // configures it, for a spec it fits().
  void launch_ahead(const Spec& staged, const Shape& shape, std::vector<LayerImage> images);
  bool fits(const Spec& spec) const override;
  // Made by prepare() in this process (not adopted from a record): until it launches, it is alive.
  void mark_prepared() { prepared_here_ = true; }
  void finish(const Spec& spec, OneShot* one_shot) override;
  boost::json::object state() const override { return state_.to_json(); }
  bool alive() const override;
  sys::UniqueFd connect() const override;
  int exit_fd() const override { return pidfd_.get(); }
  bool ended() override;
  void kill() noexcept override;
  void reclaim() override;
  void pause() override;
  void resume() override;
  void net_update(const NetworkPolicy& policy) override;
  boost::json::object net_stats() const override;

  // Why a spec cannot run as a microVM ("" when it can): names the field.
  static std::string unsupported(const Spec& spec);

 private:
  void launch(const Spec& spec);
  void attach_gateway(const Spec& spec);
  void configure(const Spec& spec, int timeout_ms);
  std::string console_tail() const;
  void check_own_cgroup() const;
  std::string path(const char* name) const { return dir_ + "/" + name; }

  std::shared_ptr<MicrovmNode> node_;
  const std::string id_, dir_;
  MicrovmState state_;
  bool starting_ = false;  // finish() began and has not succeeded: dropping this object undoes it
  sys::UniqueFd pidfd_;    // the multiplexer, our child (sandboxes started here)
  std::vector<LayerImage> images_;  // the spec's layers (set_layer_images)
  std::optional<Spec> launched_for_;  // launch_ahead(): what the VM was launched for
  sys::UniqueFd netns_;               // QEMU's network namespace until the gateway has it (a policy)
  bool prepared_here_ = false;        // mark_prepared()
};

}  // namespace sandlet::microvm
