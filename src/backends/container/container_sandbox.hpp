// One container sandbox: sandlet's init as PID 1 of fresh user/mount/pid/ipc/uts/cgroup namespaces and a
// network namespace made ahead, in its own cgroup, on an OverlayFS root (idmapped layers + size-capped tmpfs
// upper). A start is a linear pipeline of small steps (container_start.cpp); every kernel object is held
// by an RAII owner until the sandbox reports ready, so a failure at any step unwinds to nothing.
#pragma once
#include <memory>
#include <optional>
#include <string>

#include "backends/backend.hpp"
#include "backends/container/container_node.hpp"
#include "backends/container/container_state.hpp"

namespace sandlet::container {

struct StartingInit;  // the kernel objects of a start in progress (container_starting.hpp)

class ContainerSandbox final : public BackendSandbox {
 public:
  // A sandbox to prepare (`state` empty) or one adopted from its record.
  ContainerSandbox(std::shared_ptr<ContainerNode> node, std::string id, std::string dir, ContainerState state);
  ~ContainerSandbox() override;

  // The first half of a start (Backend::prepare).
  void prepare(const Spec* stage_for, const Limits* limits);
  bool fits(const Spec& spec) const override;
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
  uint64_t reclaim_memory() override;
  uint64_t snapshot(const std::function<void(const WritableLayer&)>& running,
                    const std::function<void(const WritableLayer&)>& frozen) override;  // container_snapshot.cpp
  void net_update(const NetworkPolicy& policy) override;
  boost::json::object net_stats() const override;
  boost::json::object seccomp_stats(uint64_t after_seq) const override;
  // FnCall's hooks (container_reuse.cpp).
  void set_limits(const Limits& limits) override;
  std::unique_ptr<ReuseMark> reuse_mark() const override;
  bool unchanged_since(const ReuseMark& clean) const override;

 private:
  void freeze(bool frozen);
  sys::UniqueFd writable_layer() const;  // the upper directory, checked (container_snapshot.cpp)

  std::shared_ptr<ContainerNode> node_;
  const std::string id_, dir_;
  ContainerState state_;
  bool preparing_ = false;              // prepare() began and finish() has not succeeded
  std::unique_ptr<StartingInit> starting_;  // the start's kernel objects, from prepare() until finish()
  sys::UniqueFd pidfd_;                 // the init, our child (sandboxes started here)
};

}  // namespace sandlet::container
