// The link between a gateway and its supervisor (supervisor.hpp). The gateway tells the supervisor every
// sandbox it attaches (the attach request as received, with duplicates of its descriptors: namespace, init
// pidfd, cgroup, log files), every update of a sandbox's policy and every detach; the supervisor keeps
// them, and hands them to the gateway it starts after this one died, which attaches them again before it
// serves. Messages are JSON on a SOCK_SEQPACKET pair, descriptors as SCM_RIGHTS:
//   gateway -> supervisor  {"op":"remember","id":ID,"request":TEXT} + fds | {"op":"update","id":ID,"request":TEXT}
//                          | {"op":"forget","id":ID} | {"op":"attaching","id":ID} | {"op":"replayed"}
//   supervisor -> gateway  {"op":"replay","request":TEXT} + fds ... then {"op":"end"}
#pragma once
#include <deque>
#include <string>
#include <vector>

#include "sys/fd.hpp"

namespace sandlet::netgw {

struct Replay {
  std::string request;
  std::vector<sys::UniqueFd> fds;
};

class Journal final {
 public:
  // Non-blocking: a stopped supervisor must not stall the gateway's loop (see flush()).
  explicit Journal(sys::UniqueFd sock);
  // A message the supervisor cannot take now waits, in order, and goes with the next message or tick.
  void remember(const std::string& id, const std::string& request, const std::vector<int>& fds) noexcept;
  void update(const std::string& id, const std::string& request) noexcept;
  void forget(const std::string& id) noexcept;
  // Around the replay: which sandbox is being re-attached, then that all were (a gateway that dies in
  // between is not given that sandbox again).
  void attaching(const std::string& id) noexcept;
  void replayed() noexcept;
  // What the supervisor kept from the gateways before this one, read until its end mark.
  std::vector<Replay> replay();
  // Sends what waited because the supervisor was behind (the gateway's tick calls it).
  void flush() noexcept;

 private:
  struct Pending {
    std::string message;
    std::vector<sys::UniqueFd> fds;
  };
  static constexpr size_t kOutboxMax = 16384;  // beyond it the supervisor is gone in all but name
  void send(const std::string& message, const std::vector<int>& fds) noexcept;
  sys::UniqueFd sock_;
  std::deque<Pending> outbox_;
};

}  // namespace sandlet::netgw
