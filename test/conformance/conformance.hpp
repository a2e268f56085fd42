// The conformance suite's fixture and helpers. Every backend must pass this suite; it uses the public C++
// API (sandlet/sandlet.hpp) and the library only, plus what any user can see on the host (/proc, the
// cgroup tree, the mount table).
//
// Which backend a run tests comes from SANDLET_CONFORMANCE_BACKENDS (conformance_main.cpp); the layer its
// sandboxes use from SANDLET_CONFORMANCE_ROOTFS (default: the build's busybox test root filesystem).
#pragma once
#include <sys/types.h>

#include <catch2/catch.hpp>
#include <functional>
#include <string>
#include <vector>

#include "sandlet/sandlet.hpp"

namespace conformance {

const std::string& backend();
const std::string& rootfs();
// This test binary (it doubles as the "owner" process some tests kill: conformance_owner.cpp).
const std::string& self_exe();
// The owner process's entry point: `conformance-tests --owner ...`.
int owner_main(int argc, char** argv);
// Set only in a binary linked with the library's core (conformance-create-steps): from now on the owner
// process dies by SIGKILL the first time it reaches the named create step ("-": never, it prints each
// step's name the first time instead; "": disarmed).
extern void (*arm_fault_points)(const std::string& point);

// ---- what the host sees --------------------------------------------------------------------------------

std::string slurp(const std::string& path);
bool wait_until(const std::function<bool()>& cond, double seconds);
// Host processes whose argv is exactly `argv` (read from /proc/PID/cmdline).
std::vector<pid_t> host_pids_with_argv(const std::vector<std::string>& argv);
// Host processes whose cgroup path (any hierarchy) has a component named `id`.
std::vector<pid_t> host_pids_in_cgroup(const std::string& id);
// Directories named `id` in the host's cgroup tree (searched three levels deep).
std::vector<std::string> cgroup_dirs_named(const std::string& id);
std::vector<std::string> mount_lines();

// A `sleep N` whose N no other test uses: its processes can be found inside and on the host.
struct Sleeper {
  Sleeper();
  std::string seconds;
  std::string cmd() const { return "sleep " + seconds; }
  std::vector<std::string> argv() const { return {"sleep", seconds}; }
  int inside(sandlet::Sandbox& sb) const;  // how many run in `sb` (-1 when the exec failed)
  size_t on_host() const { return host_pids_with_argv(argv()).size(); }
};

// ---- the fixture ---------------------------------------------------------------------------------------

// A fresh runtime root and runtime; every sandbox the test makes is remembered so that check_no_leaks()
// can look for anything of it left on the host. The destructor destroys what a failed test left and
// removes the root.
class Fixture {
 public:
  explicit Fixture(const sandlet::RuntimeOptions& options = sandlet::RuntimeOptions());
  ~Fixture();
  Fixture(const Fixture&) = delete;
  Fixture& operator=(const Fixture&) = delete;

  sandlet::Runtime& rt() { return rt_; }
  const std::string& root() const { return root_; }
  // The backend under test and the test layer.
  static sandlet::Spec spec();
  sandlet::Sandbox create(const sandlet::Spec& s);
  sandlet::Sandbox create() { return create(spec()); }
  void track(const std::string& id) { ids_.push_back(id); }

  // Closes the runtime, runs gc from a fresh one, then checks that no process, cgroup, mount or file of
  // any tracked sandbox is left. The runtime is reopened afterwards (a test may go on).
  void check_no_leaks();

 private:
  std::string root_;
  sandlet::Runtime rt_;
  std::vector<std::string> ids_;
  std::vector<std::string> mounts_before_;
};

// ---- small helpers -------------------------------------------------------------------------------------

// Runs `sh -c script`, REQUIREs exit code 0, returns stdout.
std::string out(sandlet::Sandbox& sb, const std::string& script);
sandlet::ExecResult sh(sandlet::Sandbox& sb, const std::string& script, double timeout_s = 30);
// Runs `f`, REQUIREs that it throws sandlet::Error, and returns that error.
sandlet::Error error_of(const std::function<void()>& f);
std::string code_name(const sandlet::Error& e);
bool contains(const std::string& haystack, const std::string& needle);

// An owner process (this binary with --owner ARGS...): its first line of stdout, then kill -9.
class Owner {
 public:
  explicit Owner(const std::vector<std::string>& args);
  ~Owner();
  Owner(const Owner&) = delete;
  Owner& operator=(const Owner&) = delete;
  // The next line it prints ("" at end of file or after `timeout_s`).
  std::string line(double timeout_s = 60);
  void kill9();  // SIGKILL, then reaps it
  int wait();    // reaps it; its wait status
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
  int out_ = -1;
  std::string buf_;
};

}  // namespace conformance
