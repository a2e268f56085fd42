#include <signal.h>

#include <cstring>
#include <iostream>

#include "integration/harness.hpp"

TEST_CASE("invalid specs are rejected naming the field, and nothing is created", "[spec]") {
  Harness h;
  for (auto [json, field] : std::vector<std::pair<std::string, std::string>>{
           {R"({"layers":["/x"],"limits":{"memory":"1M"}})", "limits.memory"},
           {R"({"layers":["/x"],"lables":{}})", "lables"},
           {R"({"layers":["/x"],"hostname":"-bad-"})", "hostname"},
       }) {
    try {
      sandlet::Spec::from_json(json);
      FAIL("accepted " << json);
    } catch (const sandlet::Error& e) {
      CHECK(e.code() == SANDLET_INVALID_ARGUMENT);
      CHECK(std::string(e.what()).find(field) != std::string::npos);
    }
  }
  try {
    h.rt().create(sandlet::Spec().layer("/definitely/not/here"));
    FAIL("created with a missing layer");
  } catch (const sandlet::Error& e) {
    CHECK(e.code() == SANDLET_INVALID_ARGUMENT);
    CHECK(std::string(e.what()).find("layers[0]") != std::string::npos);
  }
  CHECK(h.sandbox_dirs().empty());
  h.check_no_leaks();
}

TEST_CASE("a runtime root that cannot be made: an error, not a crash", "[lifecycle]") {
  // /proc refuses new directories: the open fails half way, after the runtime object exists.
  for (const char* root : {"/proc/sandlet-test-root", "relative/root"}) {
    try {
      sandlet::Runtime::open(root);
      FAIL("opened a runtime at " << root);
    } catch (const sandlet::Error& e) {
      INFO(e.what());
      CHECK(std::string(e.what()).find(root) != std::string::npos);
    }
  }
}

TEST_CASE("a root filesystem the init cannot set up: its reason is reported and nothing is left", "[lifecycle]") {
  Harness h;
  // A layer above the rootfs whose /proc is a file: the init's mount of /proc fails inside the sandbox,
  // after the host has already queued the sandbox's configuration behind the filesystem.
  const std::string bad = h.root() + "/bad-layer";
  fs::create_directories(bad);
  std::ofstream(bad + "/proc") << "not a directory\n";
  for (int i = 0; i < 3; ++i) {
    try {
      h.rt().create(Harness::spec().layer(bad));
      FAIL("created on a root filesystem without a /proc directory");
    } catch (const sandlet::Error& e) {
      INFO(e.what());
      CHECK(std::string(e.what()).find("mount /proc") != std::string::npos);
    }
  }
  // (The warm pool, started by the second create, may hold sandboxes of its own until the runtime closes:
  // check_no_leaks looks after closing it.)
  h.check_no_leaks();
  fs::remove_all(bad);
}

namespace {
const std::string& parent_cgroup() {
  static const std::string p =
      fs::exists("/sys/fs/cgroup/unified") ? "/sys/fs/cgroup/unified/sandlet" : "/sys/fs/cgroup/sandlet";
  return p;
}
}  // namespace

TEST_CASE("the parent cgroups outlive runtimes; the next create uses them", "[lifecycle][gc]") {
  Harness h;
  h.rt().create(Harness::spec()).destroy();
  h.check_no_leaks();  // closes the runtime
  CHECK(fs::exists(parent_cgroup()));  // kept for the next runtime (a one-shot `sandlet run` would pay for it)
  sandlet::RuntimeOptions o;
  o.disable_warm_pool = true;
  {
    auto rt = sandlet::Runtime::open(h.root(), o);
    rt.gc();
  }
  // Removed or not (see below), the next create has them again.
  auto rt = sandlet::Runtime::open(h.root(), o);
  auto sb = rt.create(Harness::spec());
  CHECK(fs::exists(parent_cgroup() + "/" + sb.id()));
  CHECK(sb.exec({"true"}).exit_code == 0);
  sb.destroy();
  rt.close();
}

// Whether gc removes the parents can be seen only when no other process has a sandbox on this node: its
// own ctest entry (integration-idle-node) reports a skip otherwise.
TEST_CASE("an explicit gc removes the parent cgroups when no sandbox is left in them", "[lifecycle][gc][needs-idle-node]") {
  Harness h;
  h.rt().create(Harness::spec()).destroy();
  h.check_no_leaks();
  REQUIRE(fs::exists(parent_cgroup()));
  sandlet::RuntimeOptions o;
  o.disable_warm_pool = true;
  auto rt = sandlet::Runtime::open(h.root(), o);
  rt.gc();
  bool others = false;  // sandboxes of other processes on this machine keep the parents (and that is right)
  std::error_code ec;
  for (auto& e : fs::directory_iterator(parent_cgroup(), ec)) others = others || e.is_directory();
  if (others) {
    std::cout << "SANDLET-SKIP: other processes' sandboxes hold " << parent_cgroup() << ": removal not seen"
              << std::endl;
    return;
  }
  CHECK_FALSE(fs::exists(parent_cgroup()));
}

TEST_CASE("destroy removes every trace; handles then fail cleanly", "[lifecycle]") {
  Harness h;
  auto sb = h.rt().create(Harness::spec());
  std::string id = sb.id();
  CHECK(fs::exists(cgroup2_parent() + "/" + id));
  sb.destroy();
  // Gone from listings at once; host resources reclaimed in the background, shortly.
  CHECK(h.rt().list().empty());
  CHECK(wait_until([&] { return h.gone(id); }, 10));
  try {
    sb.exec({"true"});
    FAIL("exec after destroy");
  } catch (const sandlet::Error& e) {
    CHECK(e.code() == SANDLET_FAILED_PRECONDITION);
  }
  h.check_no_leaks();
}

TEST_CASE("closing the last handle of an owned sandbox destroys it", "[lifecycle]") {
  Harness h;
  std::string id;
  {
    auto sb = h.rt().create(Harness::spec());
    id = sb.id();
  }
  CHECK(wait_until([&] { return h.gone(id); }, 10));
  h.check_no_leaks();
}

TEST_CASE("detached sandboxes survive their creator; attach and exec from another process", "[lifecycle][attach]") {
  Harness h;
  setenv("SANDLET_ROOT", h.root().c_str(), 1);
  int status = 0;
  std::string id = host_sh(std::string(SANDLET_TEST_HELPER) + " create " + SANDLET_TEST_ROOTFS + " detached", &status);
  REQUIRE(status == 0);
  id.erase(id.find_last_not_of("\n") + 1);
  REQUIRE(id.size() == 12);
  // The creator exited; the sandbox lives on and is listed.
  auto listed = h.rt().list();
  REQUIRE(listed.size() == 1);
  CHECK(listed[0].id == id);
  CHECK(listed[0].state == "running");
  // Exec from yet another process, then from this one.
  CHECK(host_sh(std::string(SANDLET_TEST_HELPER) + " exec " + id + " echo hello", &status) == "hello\n");
  CHECK(status == 0);
  auto sb = h.rt().attach(id);
  CHECK(run_out(sb, "echo again") == "again\n");
  sb.destroy();
  // Gone from listings at once; host resources reclaimed in the background, shortly.
  CHECK(h.rt().list().empty());
  CHECK(wait_until([&] { return h.gone(id); }, 10));
  unsetenv("SANDLET_ROOT");
  h.check_no_leaks();
}

TEST_CASE("kill -9 of the creating process: owned sandboxes die and gc leaves nothing", "[lifecycle][gc]") {
  Harness h;
  setenv("SANDLET_ROOT", h.root().c_str(), 1);
  std::string cmd = std::string(SANDLET_TEST_HELPER) + " create " + SANDLET_TEST_ROOTFS + " owned hang";
  FILE* p = ::popen(("exec " + cmd).c_str(), "r");
  char line[64] = {};
  REQUIRE(fgets(line, sizeof line, p) != nullptr);
  std::string id(line);
  id.erase(id.find_last_not_of("\n") + 1);
  REQUIRE(id.size() == 12);
  auto listed = h.rt().list();
  REQUIRE(listed.size() == 1);
  std::string json = listed[0].json;
  // Find the creator's pid (the helper) from the record and kill it hard.
  auto pos = json.find("\"owner_pid\":");
  REQUIRE(pos != std::string::npos);
  pid_t owner = std::atoi(json.c_str() + pos + 12);
  pos = json.find("\"init_pid\":");
  pid_t init = std::atoi(json.c_str() + pos + 11);
  REQUIRE(::kill(owner, SIGKILL) == 0);
  ::pclose(p);
  // The parent-death signal takes the init (and with it the pid namespace) down.
  CHECK(wait_until([&] { return ::kill(init, 0) != 0; }, 10));
  CHECK(h.rt().gc() == 1);
  CHECK(h.gone(id));
  unsetenv("SANDLET_ROOT");
  h.check_no_leaks();
}

TEST_CASE("max lifetime is enforced by the sandbox itself", "[lifecycle]") {
  Harness h;
  auto sb = h.rt().create(Harness::spec().max_lifetime(1));
  std::string id = sb.id();
  CHECK(run_out(sb, "echo alive") == "alive\n");
  CHECK(wait_until([&] { return h.gone(id); }, 10));
  h.check_no_leaks();
}

TEST_CASE("labels filter the listing", "[list]") {
  Harness h;
  auto a = h.rt().create(Harness::spec().label("task", "a"));
  auto b = h.rt().create(Harness::spec().label("task", "b"));
  auto only_a = h.rt().list("task=a");
  REQUIRE(only_a.size() == 1);
  CHECK(only_a[0].id == a.id());
  CHECK(h.rt().list().size() == 2);
  h.check_no_leaks();
}

TEST_CASE("backends report availability and reasons", "[backends]") {
  Harness h;
  auto backends = h.rt().backends();
  bool container = false;
  bool fncall = false;
  for (auto& b : backends) {
    INFO(b.name);
    if (b.name == "container") container = b.available;
    if (b.name == "fncall") {
      // A calls-only row: available where its pools can run, and says on which backends.
      fncall = b.available;
      CHECK(b.details_json.find("\"pools_on\":[\"container\"") != std::string::npos);
      CHECK(b.capabilities == 0);
    }
    if (b.name == "microvm") CHECK(b.details_json.find("\"accelerator\"") != std::string::npos);
    CHECK_FALSE(b.summary.empty());
    if (!b.available) CHECK_FALSE(b.reason.empty());
  }
  CHECK(container);
  CHECK(fncall);
  // Names come from the registry: an unknown one, and a row that makes no sandboxes, are refused at create
  // naming the field; an unavailable backend is UNIMPLEMENTED with its reason.
  auto refused = [&](const char* backend) {
    try {
      h.rt().create(Harness::spec().backend(backend));
    } catch (const sandlet::Error& e) {
      return std::make_pair(e.code(), std::string(e.what()));
    }
    return std::make_pair(SANDLET_OK, std::string());
  };
  auto [code, what] = refused("docker");
  CHECK(code == SANDLET_INVALID_ARGUMENT);
  CHECK(what.find("'backend'") != std::string::npos);
  CHECK(what.find("container, fncall") != std::string::npos);
  std::tie(code, what) = refused("fncall");
  CHECK(code == SANDLET_INVALID_ARGUMENT);
  CHECK(what.find("sandlet_call") != std::string::npos);
  std::tie(code, what) = refused("fullvm");
  CHECK(code == SANDLET_UNIMPLEMENTED);
  CHECK(what.find("not built") != std::string::npos);
  h.check_no_leaks();
}

namespace {
// What a create leaves when its process dies after making the sandbox's cgroups but before recording
// them: a "creating" record whose creator is gone (pid 1 with a start time that cannot match).
void leave_crashed_create(Harness& h, const std::string& id) {
  const std::string dir = h.root() + "/sandboxes/" + id;
  fs::create_directories(dir);
  std::string spec = Harness::spec().to_json();
  std::ofstream(dir + "/record.json")
      << R"({"version":1,"id":")" << id << R"(","backend":"container","state":"creating","spec":)" << spec
      << R"(,"created_at":0,"deadline":0,"slot":-1,"uid_base":0,"init_pid":0,"init_start":0,"owner_pid":1,)"
      << R"("owner_start":1,"cgroup_v2":"","cgroup_v1":[],"agent_socket":""})";
  fs::create_directories(cgroup2_parent() + "/" + id);
  if (fs::exists("/sys/fs/cgroup/memory/sandlet")) fs::create_directories("/sys/fs/cgroup/memory/sandlet/" + id);
}
}  // namespace

TEST_CASE("gc cleans a create that crashed after making its cgroups but before recording them", "[gc]") {
  Harness h;
  leave_crashed_create(h, "0123456789ab");
  CHECK(h.rt().gc() == 1);
  CHECK(h.gone("0123456789ab"));
  h.check_no_leaks();
}

TEST_CASE("a one-shot `sandlet run` sweeps what a crashed create left", "[gc][cli]") {
  Harness h;
  leave_crashed_create(h, "0123456789ac");
  int status = -1;
  host_sh(std::string(SANDLET_CLI) + " --root " + h.root() + " run --layer " + SANDLET_TEST_ROOTFS + " -- /bin/true",
          &status);
  CHECK(status == 0);
  CHECK(h.gone("0123456789ac"));
  h.check_no_leaks();
}

TEST_CASE("an owned sandbox created from a short-lived thread outlives that thread", "[lifecycle]") {
  Harness h;
  sandlet::Sandbox sb;
  std::thread([&] { sb = h.rt().create(Harness::spec()); }).join();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  CHECK(run_out(sb, "echo alive") == "alive\n");
  h.check_no_leaks();
}

TEST_CASE("warm pool: sandboxes prepared ahead get the environment asked for", "[lifecycle][warm]") {
  Harness h;
  fs::path a = fs::path(h.root()) / "layer-a", b = fs::path(h.root()) / "layer-b";
  fs::create_directories(a);
  fs::create_directories(b);
  std::ofstream(a / "marker") << "A";
  std::ofstream(b / "marker") << "B";
  // Several of each in turn: the pool is staged for A, then must not hand out A's root to B. (It fills
  // on a thread of its own: each create waits for it, so that the next can be a hit.)
  auto pool = [&](const char* key) {
    const std::string json = h.rt().stats_json();
    const size_t at = json.find(std::string("\"") + key + "\":");
    return at == std::string::npos ? -1ll : std::atoll(json.c_str() + at + std::strlen(key) + 3);
  };
  int creates = 0;
  for (const auto& [layer, want] : std::vector<std::pair<fs::path, std::string>>{{a, "A"}, {b, "B"}, {a, "A"}}) {
    const long long hits_before = pool("hits");
    for (int i = 0; i < 4; ++i) {
      auto sb = h.rt().create(Harness::spec().layer(layer.string()).hostname("h" + std::to_string(i)));
      CHECK(sb.read_file("/marker") == want);
      CHECK(run_out(sb, "hostname") == "h" + std::to_string(i) + "\n");
      if (++creates >= 2) CHECK(wait_until([&] { return pool("ready") >= 1; }, 10));  // (on from the second)
    }
    CHECK(pool("hits") >= hits_before + 2);  // served from the pool, and still the right root
  }
  // Interleaved environments (A, B, A, B, ...): the pool switches to generic sandboxes, each staged with
  // the root filesystem asked for at create.
  const long long hits_before = pool("hits");
  for (int i = 0; i < 8; ++i) {
    const bool use_a = i % 2 == 0;
    auto sb = h.rt().create(Harness::spec().layer((use_a ? a : b).string()));
    CHECK(sb.read_file("/marker") == (use_a ? "A" : "B"));
    CHECK(wait_until([&] { return pool("ready") >= 1; }, 10));  // let the pool refill between creates
  }
  CHECK(pool("hits") >= hits_before + 4);
  h.check_no_leaks();
}

TEST_CASE("warm pool: detached sandboxes served from it survive their creator", "[lifecycle][warm]") {
  Harness h;
  setenv("SANDLET_ROOT", h.root().c_str(), 1);
  int status = 0;
  std::string out = host_sh(std::string(SANDLET_TEST_HELPER) + " create-n " + SANDLET_TEST_ROOTFS + " detached 4", &status);
  REQUIRE(status == 0);
  std::istringstream lines(out);
  std::string id;
  int alive = 0, hits = -1;
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  while (std::getline(lines, id)) {
    if (id.rfind("hits ", 0) == 0) {
      hits = std::stoi(id.substr(5));
      continue;
    }
    auto sb = h.rt().attach(id);
    if (run_out(sb, "echo ok") == "ok\n") ++alive;
    sb.destroy();
  }
  CHECK(alive == 4);
  CHECK(hits >= 2);  // the third and the fourth were served from the pool (the helper waits for it)
  unsetenv("SANDLET_ROOT");
  h.check_no_leaks();
}
