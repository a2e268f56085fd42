// kill -9 of the process that ends a sandbox, between its retirement and its reclaim, and in the middle of
// removing its directory after the reclaim: the next runtime's gc finishes the job. (A kill at each step of a create is in the conformance suite,
// test/conformance/create_steps_test.cpp, for every backend.)
#include <spawn.h>
#include <sys/wait.h>

#include <fstream>

#include "integration/harness.hpp"

extern char** environ;

namespace {

// Runs the crash helper; returns the signal that killed it (0 when it exited, then *exit_code).
int run_crash_helper(const std::vector<std::string>& args, int* exit_code) {
  std::vector<char*> argv;
  std::string helper = SANDLET_CRASH_HELPER;
  argv.push_back(helper.data());
  std::vector<std::string> copy = args;
  for (auto& a : copy) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid;
  REQUIRE(::posix_spawn(&pid, helper.c_str(), nullptr, nullptr, argv.data(), environ) == 0);
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  *exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return WIFSIGNALED(status) ? WTERMSIG(status) : 0;
}

bool cgroups_gone(const std::string& id) {
  for (const std::string& parent : {cgroup2_parent(), std::string("/sys/fs/cgroup/memory/sandlet"),
                                    std::string("/sys/fs/cgroup/pids/sandlet"), std::string("/sys/fs/cgroup/cpu/sandlet")})
    if (fs::exists(parent + "/" + id)) return false;
  return true;
}

}  // namespace

TEST_CASE("kill -9 while a destroyed sandbox is retired or its directory removed: gc finishes its reclaim", "[lifecycle][crash]") {
  // Both fire when a sandbox ends: here when the helper's runtime closes and ends its owned one. Retired:
  // nothing reclaimed yet. Removing: all reclaimed, the directory emptied but for the record (which goes
  // last), so gc reclaims a second time: reclaim is idempotent.
  const std::string point = GENERATE(std::string("runtime.retired"), std::string("runtime.removing"));
  INFO("killed at " << point);
  char tmpl[] = "/tmp/sandlet-it-crash-XXXXXX";
  std::string root = ::mkdtemp(tmpl);
  int code = 0;
  CHECK(run_crash_helper({root, SANDLET_TEST_ROOTFS, point, "container", "1"}, &code) == SIGKILL);
  const std::vector<std::string> ids = test_support::sandbox_ids_under(root);
  CHECK(ids.size() == 1);  // its retired directory, the record inside
  for (const auto& id : ids) CHECK(fs::exists(root + "/sandboxes/.reclaim-" + id + "/record.json"));
  {
    auto rt = sandlet::Runtime::open(root);
    rt.gc();
  }
  std::error_code ec;
  CHECK(test_support::sandbox_ids_under(root).empty());
  for (const auto& id : ids) CHECK(cgroups_gone(id));
  CHECK(mounts_mentioning(root) == 0);
  fs::remove_all(root, ec);
}

TEST_CASE("a retired directory without its record (a removal cut short) is removed by the next gc", "[lifecycle][crash]") {
  char tmpl[] = "/tmp/sandlet-it-crash-XXXXXX";
  std::string root = ::mkdtemp(tmpl);
  auto rt = sandlet::Runtime::open(root);
  const std::string dir = root + "/sandboxes/.reclaim-0123456789ab";
  REQUIRE(fs::create_directory(dir));
  std::ofstream(dir + "/agent.sock") << "";  // a removal that lost its record first, then was cut short
  CHECK(rt.gc() == 1);
  CHECK(test_support::sandbox_ids_under(root).empty());
  rt.close();
  std::error_code ec;
  fs::remove_all(root, ec);
}
