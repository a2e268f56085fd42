// Test support: the fault-injecting proxy (test/support/fault_proxy.py) in front of a store server, started
// and stopped with this object; command() sends one control line ("throttle 100000", "fail_next 3",
// "down", "stats", ...) and returns the reply.
#pragma once
#include <string>

#include "support/child_process.hpp"

namespace test_support {

class FaultProxy final {
 public:
  explicit FaultProxy(uint16_t target_port) : dir_("proxy") {
    const std::string python = test_python();
    const std::string ready = dir_.path() + "/ready.json", log = dir_.path() + "/proxy.log";
    process_ = std::make_unique<ChildProcess>(
        std::vector<std::string>{python, SANDLET_TEST_SUPPORT_DIR "/fault_proxy.py", "--target",
                                 "127.0.0.1:" + std::to_string(target_port), "--ready", ready, "--max-lifetime",
                                 "900"},
        log, std::vector<std::string>{"PYTHONDONTWRITEBYTECODE=1"});
    if (!wait_until(*process_, 20, [&] { return std::filesystem::exists(ready); }))
      throw std::runtime_error("fault proxy did not start: " + read_text(log));
    const std::string json = read_text(ready);
    port_ = static_cast<uint16_t>(json_int(json, "port"));
    control_port_ = static_cast<uint16_t>(json_int(json, "control_port"));
  }
  ~FaultProxy() {
    if (control_fd_ >= 0) ::close(control_fd_);
  }
  FaultProxy(const FaultProxy&) = delete;
  FaultProxy& operator=(const FaultProxy&) = delete;

  uint16_t port() const { return port_; }

  std::string command(const std::string& line) {
    if (control_fd_ < 0) {
      control_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      a.sin_port = htons(control_port_);
      if (::connect(control_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0)
        throw std::runtime_error("cannot reach the fault proxy's control port");
    }
    const std::string out = line + "\n";
    if (::write(control_fd_, out.data(), out.size()) != static_cast<ssize_t>(out.size()))
      throw std::runtime_error("fault proxy control write failed");
    std::string reply;
    char c;
    while (::read(control_fd_, &c, 1) == 1 && c != '\n') reply += c;
    return reply;
  }
  long stat(const std::string& name) { return json_int(command("stats"), name); }

 private:
  TempDir dir_;
  std::unique_ptr<ChildProcess> process_;
  uint16_t port_ = 0, control_port_ = 0;
  int control_fd_ = -1;
};

}  // namespace test_support
