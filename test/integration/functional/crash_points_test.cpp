// kill -9 of the creating process at each step of a create: whatever the crash leaves (records, uid slots,
// cgroups, processes, layer mounts) is cleaned up by the next runtime's gc.
#include <spawn.h>
#include <sys/wait.h>

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

// The ids of the sandboxes the crash left under `root` (directories, retired ones too).
std::vector<std::string> ids_under(const std::string& root) {
  std::vector<std::string> ids;
  std::error_code ec;
  for (auto& e : fs::directory_iterator(root + "/sandboxes", ec)) {
    std::string name = e.path().filename();
    if (name.rfind(".reclaim-", 0) == 0) name = name.substr(9);
    ids.push_back(name);
  }
  return ids;
}

bool cgroups_gone(const std::string& id) {
  for (const std::string& parent : {cgroup2_parent(), std::string("/sys/fs/cgroup/memory/sandlet"),
                                    std::string("/sys/fs/cgroup/pids/sandlet"), std::string("/sys/fs/cgroup/cpu/sandlet")})
    if (fs::exists(parent + "/" + id)) return false;
  return true;
}

const char* const kCreatePoints[] = {
    "runtime.record",    "container.slot",  "container.cgroup", "container.spawned", "runtime.prepared",
    "container.staging", "container.ready", "runtime.finished", "runtime.running",
};

void crash_then_gc(const std::string& point, const std::string& creates) {
  INFO("fault point " << point << ", " << creates << " create(s)");
  char tmpl[] = "/tmp/sandlet-it-crash-XXXXXX";
  std::string root = ::mkdtemp(tmpl);
  int code = 0;
  int sig = run_crash_helper({root, SANDLET_TEST_ROOTFS, point, "container", creates}, &code);
  CHECK(sig == SIGKILL);  // every point is on the path of a (cold or pooled) create
  const std::vector<std::string> ids = ids_under(root);
  {
    sandlet::RuntimeOptions o;
    o.disable_warm_pool = true;
    auto rt = sandlet::Runtime::open(root, o);  // sweeps at open
    rt.gc();
    CHECK(rt.list().empty());
  }
  std::error_code ec;
  size_t left = 0;
  for (auto& e : fs::directory_iterator(root + "/sandboxes", ec)) {
    UNSCOPED_INFO("left behind: " << e.path());
    ++left;
  }
  CHECK(left == 0);
  for (const auto& id : ids) {
    INFO("sandbox " << id);
    CHECK(cgroups_gone(id));
  }
  for (const std::string& slots : {std::string("/run/sandlet/slots"), std::string("/dev/shm/sandlet-state/slots")}) {
    for (auto& e : fs::directory_iterator(slots, ec)) {
      std::string target = fs::read_symlink(e.path(), ec).string();
      CHECK(target.rfind(root + "/", 0) != 0);
    }
  }
  CHECK(mounts_mentioning(root) == 0);
  fs::remove_all(root, ec);
}

}  // namespace

TEST_CASE("kill -9 at each step of a cold create: gc leaves nothing", "[lifecycle][crash]") {
  for (const char* point : kCreatePoints) crash_then_gc(point, "1");
}

TEST_CASE("kill -9 at each step of a create served by the warm pool: gc leaves nothing", "[lifecycle][crash][warm]") {
  // The third create, once the pool has a sandbox ready: a hit, which only finishes the start.
  for (const char* point : {"runtime.prepared", "container.ready", "runtime.finished", "runtime.running"})
    crash_then_gc(point, "3");
}

TEST_CASE("kill -9 while the warm pool prepares: gc leaves nothing", "[lifecycle][crash][warm]") {
  // Armed from the second create on, when the pool's thread starts: it and the (cold) create race to the
  // point; either dying there must leave nothing behind.
  for (const char* point : {"container.slot", "container.cgroup", "container.spawned"}) crash_then_gc(point, "2");
}

TEST_CASE("kill -9 while a destroyed sandbox is retired: gc finishes its reclaim", "[lifecycle][crash]") {
  char tmpl[] = "/tmp/sandlet-it-crash-XXXXXX";
  std::string root = ::mkdtemp(tmpl);
  int code = 0;
  // runtime.retired fires when a sandbox ends: here when the helper's runtime closes and ends its owned one.
  CHECK(run_crash_helper({root, SANDLET_TEST_ROOTFS, "runtime.retired", "container", "1"}, &code) == SIGKILL);
  {
    auto rt = sandlet::Runtime::open(root);
    rt.gc();
  }
  std::error_code ec;
  CHECK(ids_under(root).empty());
  CHECK(mounts_mentioning(root) == 0);
  fs::remove_all(root, ec);
}
