// Helpers shared by the unit tests (Catch2): expected errors, temp dirs, shell commands, files.
#pragma once
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <functional>
#include <string>

#include "common/error.hpp"
#include "sys/fd.hpp"
#include "sys/fs_util.hpp"

namespace unit {

// Runs `fn`, which must throw a sandlet::Error; returns it (a failed check records the case otherwise).
inline sandlet::Error expect_error(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const sandlet::Error& e) {
    return e;
  } catch (const std::exception& e) {
    FAIL("threw a non-sandlet exception: " << e.what());
  }
  FAIL("did not throw");
  return sandlet::Error(sandlet::Code::kOk, "");  // not reached
}

// A fresh directory under /tmp, removed with everything in it at the end of the scope.
struct TempDir {
  std::string path;
  explicit TempDir(const std::string& tag = "unit") {
    std::string tmpl = "/tmp/sandlet-" + tag + "-test-XXXXXX";
    REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
    path = tmpl;
  }
  ~TempDir() {
    try {
      sandlet::sys::remove_tree(path);
    } catch (...) {
    }
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string operator/(const std::string& name) const { return path + "/" + name; }
};

// Exit status of a shell command (-1 if it did not exit normally).
inline int run(const std::string& cmd) {
  int st = std::system(cmd.c_str());
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

inline void sh(const std::string& cmd) {
  INFO(cmd);
  REQUIRE(run(cmd) == 0);
}

inline void write_file(const std::string& path, const std::string& data, mode_t mode = 0644) {
  sandlet::sys::UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode));
  REQUIRE(fd);
  size_t done = 0;
  while (done < data.size()) {
    ssize_t w = ::write(fd.get(), data.data() + done, data.size() - done);
    REQUIRE(w > 0);
    done += static_cast<size_t>(w);
  }
}

}  // namespace unit
