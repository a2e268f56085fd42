// Peers sandlet is compared with: bubblewrap (the same command in the same rootfs) and a plain host
// fork+exec as a floor.
#pragma once

#include "proc.hpp"

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace bench {

// Path of bwrap on PATH; throws BenchError when missing (install bubblewrap).
std::string find_bwrap();
std::string bwrap_version();

// bwrap --unshare-all --die-with-parent --ro-bind ROOTFS / --proc /proc --dev /dev CMD...
Command bwrap_command(const std::filesystem::path &rootfs, const std::vector<std::string> &cmd);

// /bin/true of the host, spawned directly: the floor for any exec.
Command host_true();

// N idle bwrap sandboxes (`/bin/sleep 1000000`), killed with their whole process tree on destruction.
// Spawned from the calling thread only: bwrap's --die-with-parent follows the spawning *thread*.
class IdleBwrapFleet final {
 public:
  explicit IdleBwrapFleet(const std::filesystem::path &rootfs);
  ~IdleBwrapFleet() { kill_all(); }
  IdleBwrapFleet(const IdleBwrapFleet &) = delete;
  IdleBwrapFleet &operator=(const IdleBwrapFleet &) = delete;

  // Starts n sandboxes keeping up to `in_flight` starting at once; returns each one's spawn-to-ready
  // time (ready = its `sleep` runs). Throws if one dies or takes longer than 30 s.
  std::vector<std::uint64_t> start(std::size_t n, unsigned in_flight);
  std::size_t size() const { return pids_.size(); }
  const std::vector<pid_t> &pids() const { return pids_; }
  std::string command() const { return cmd_.str(); }
  void kill_all() noexcept;

 private:
  bool ready(pid_t pid);  // its process tree has reached `sleep`
  Command cmd_;
  std::vector<pid_t> pids_;
};

}  // namespace bench
