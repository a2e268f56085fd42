// The agent's end of a real socketpair, played by a thread that does whatever the test's script says with
// its socket and then closes it: for tests that drive the host's agent clients with forged or broken agents.
#pragma once
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <thread>

#include "sys/fd.hpp"
#include "unit_helpers.hpp"

struct ForgedAgent {
  sandlet::sys::UniqueFd host;           // the host's end, for the code under test
  std::atomic<uint64_t> written{0};      // what the agent sent that the host could have read
  std::atomic<uint64_t> read_bytes{0};   // what drain() took from the host
  std::thread thread;

  explicit ForgedAgent(std::function<void(int fd, ForgedAgent&)> script) {
    int sv[2];
    REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
    host.reset(sv[0]);
    thread = std::thread([this, script, fd = sv[1]] {
      script(fd, *this);
      ::close(fd);
    });
  }
  ~ForgedAgent() { thread.join(); }

  // Sends all of `bytes`; false once the host has gone away.
  bool put(int fd, const std::string& bytes) {
    size_t off = 0;
    while (off < bytes.size()) {
      const ssize_t n = ::send(fd, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
      if (n <= 0) return false;
      off += static_cast<size_t>(n);
      written += static_cast<uint64_t>(n);
    }
    return true;
  }
  // Reads and drops what the host sends until it closes its end.
  void drain(int fd) {
    char buf[65536];
    for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) read_bytes += static_cast<uint64_t>(n);
  }
};
