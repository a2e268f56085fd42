// The mechanisms chosen by probing the kernel (see `sandlet doctor`): the report itself, and store layers
// through loop devices where EROFS cannot mount the store's files (an older kernel, or a store on tmpfs
// on any kernel): they work, and no loop device outlives its use, also after the owner was killed.
// test/vm runs this on Debian's 6.1 and 6.12 kernels, where the other paths are taken.
#include <boost/json.hpp>
#include <fstream>
#include <iostream>
#include <set>

#include "integration/harness.hpp"

namespace {

namespace json = boost::json;

// Loop devices bound to files under `dir`.
int loops_under(const std::string& dir) {
  int n = 0;
  std::error_code ec;
  for (auto& e : fs::directory_iterator("/sys/block", ec)) {
    if (e.path().filename().string().rfind("loop", 0) != 0) continue;
    std::string backing = slurp(e.path().string() + "/loop/backing_file");
    if (backing.rfind(dir + "/", 0) == 0) ++n;
  }
  return n;
}

int erofs_mounts_under(const std::string& dir) {
  std::istringstream in(slurp("/proc/self/mountinfo"));
  std::string line;
  int n = 0;
  while (std::getline(in, line))
    if (line.find(" " + dir + "/") != std::string::npos && line.find(" - erofs ") != std::string::npos) ++n;
  return n;
}

json::object report_of(sandlet::Runtime& rt) { return json::parse(rt.features_json()).as_object(); }

const json::object* feature(const json::object& report, const std::string& name) {
  for (const auto& f : report.at("features").as_array())
    if (f.as_object().at("name").as_string() == name) return &f.as_object();
  return nullptr;
}

bool present(const json::object& report, const std::string& name) {
  const json::object* f = feature(report, name);
  return f && f->at("present").as_bool();
}

// A runtime root in `base` (removed at scope exit) with the test rootfs imported as layer "busybox".
struct StoreRoot {
  std::string root;
  explicit StoreRoot(const std::string& base) {
    std::string tmpl = base + "/sandlet-it-kernel-XXXXXX";
    REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
    root = tmpl;
    sandlet::RuntimeOptions o;
    o.disable_warm_pool = true;
    auto rt = sandlet::Runtime::open(root, o);
    sandlet::LayerImportOptions import;
    import.name = "busybox";
    rt.layer_import(SANDLET_TEST_ROOTFS, import);
  }
  ~StoreRoot() {
    try {  // a test that failed half way may have left a layer mounted (and its loop devices bound)
      sandlet::RuntimeOptions o;
      o.disable_warm_pool = true;
      sandlet::Runtime::open(root, o).gc();
    } catch (const sandlet::Error&) {
    }
    std::error_code ec;
    fs::remove_all(root, ec);
  }
};

// A create from the store layer works and reads the layer's bytes; returns how many loop devices the
// runtime used for it meanwhile. Leaves nothing mounted or bound.
int use_store_layer(const std::string& root) {
  int loops = 0;
  {
    sandlet::RuntimeOptions o;
    o.disable_warm_pool = true;
    auto rt = sandlet::Runtime::open(root, o);
    {
      auto sb = rt.create(sandlet::Spec().layer("busybox"));
      CHECK(run_out(sb, "cat /etc/passwd | head -1 | cut -d: -f1") == "root\n");
      CHECK(run_out(sb, "busybox echo ok") == "ok\n");  // a chunked file (the binary), read through the blob
      CHECK(erofs_mounts_under(root) == 1);
      loops = loops_under(root);
      sb.destroy();
    }
    rt.gc();
  }
  CHECK(wait_until([&] { return loops_under(root) == 0; }, 10));
  CHECK(erofs_mounts_under(root) == 0);
  CHECK(mounts_mentioning(root) == 0);
  return loops;
}

}  // namespace

TEST_CASE("the features report names every kernel feature used, and the paths agree with it", "[kernel]") {
  Harness h;
  const json::object r = report_of(h.rt());
  INFO(json::serialize(r));
  CHECK(r.at("container_backend").as_string() == "");
  for (const char* name : {"clone3", "clone_into_cgroup", "pidfd", "waitid_pidfd", "close_range", "openat2", "mount_api",
                           "mount_setattr", "overlay", "overlay_layer_fds", "seccomp_filter", "namespace_counters",
                           "idmap_tmpfs", "cgroup2", "cgroup_kill", "swap_accounting", "erofs", "erofs_file_backed",
                           "loop_devices", "landlock"}) {
    const json::object* f = feature(r, name);
    INFO(name);
    REQUIRE(f != nullptr);
    CHECK(!f->at("probe").as_string().empty());
    CHECK(!f->at("path").as_string().empty());
  }
  // Everything the backend cannot do without is there (we just created sandboxes on this kernel).
  for (const char* name : {"clone3", "clone_into_cgroup", "pidfd", "waitid_pidfd", "close_range", "openat2", "mount_api",
                           "mount_setattr", "overlay", "seccomp_filter", "namespace_counters", "cgroup2", "erofs"})
    CHECK(present(r, name));
  const json::object& paths = r.at("paths").as_object();
  CHECK(paths.at("overlay").as_string() ==
        (present(r, "overlay_layer_fds") ? "layer descriptors" : "layer paths in a private mount namespace"));
  CHECK(paths.at("store_layers").as_string() ==
        (present(r, "erofs_file_backed") ? "file-backed EROFS" : "EROFS on loop devices"));
  if (!present(r, "overlay_layer_fds")) CHECK(present(r, "private_mount_namespace"));
  // The weaker guarantees listed are the features' doing.
  std::set<std::string> weaker;
  for (const auto& w : r.at("weaker_guarantees").as_array()) weaker.insert(std::string(w.as_object().at("name").as_string()));
  CHECK(weaker.count("exec_kill_descendants") == (present(r, "cgroup_kill") ? 0u : 1u));
  // And a sandbox works on whatever path was taken.
  auto sb = h.rt().create(Harness::spec());
  CHECK(run_out(sb, "echo hi") == "hi\n");
  sb.destroy();
  h.check_no_leaks();
}

TEST_CASE("sandlet doctor prints the report, --json as one object", "[kernel][cli]") {
  Harness h;
  int status = -1;
  std::string text = host_sh(std::string(SANDLET_CLI) + " --root " + h.root() + " doctor", &status);
  INFO(text);
  CHECK(status == 0);
  CHECK(text.find("container backend: can run here") != std::string::npos);
  CHECK(text.find("store layers:") != std::string::npos);
  CHECK(text.find("overlay_layer_fds") != std::string::npos);
  std::string js = host_sh(std::string(SANDLET_CLI) + " --root " + h.root() + " doctor --json", &status);
  CHECK(status == 0);
  json::object r = json::parse(js).as_object();
  CHECK(r.at("features").as_array().size() >= 20);
  CHECK(host_sh(std::string(SANDLET_CLI) + " --root " + h.root() + " doctor --bogus 2>&1", &status).find("bogus") !=
        std::string::npos);
  CHECK(status == 2);
  h.check_no_leaks();
}

TEST_CASE("a root filesystem of 100 directory layers mounts on the overlay path this kernel takes", "[kernel][layers]") {
  // By path, the layer list is one mount option: more than one fsconfig() value can hold (255 bytes).
  Harness h;
  INFO("overlay: " << report_of(h.rt()).at("paths").as_object().at("overlay").as_string());
  sandlet::Spec spec = Harness::spec();
  constexpr int kLayers = 100;
  for (int i = 1; i < kLayers; ++i) {
    const std::string dir = h.root() + "/layer-" + std::to_string(i);
    fs::create_directories(dir + "/many");
    std::ofstream(dir + "/many/" + std::to_string(i)) << i;
    std::ofstream(dir + "/many/top") << i;  // the last layer's wins
    spec.layer(dir);
  }
  auto sb = h.rt().create(spec);
  auto r = sb.exec({"sh", "-c", "cat /many/1 /many/50 /many/99; echo; cat /many/top; echo; ls /many | wc -l"});
  INFO(r.stderr_data);
  CHECK(r.exit_code == 0);
  CHECK(r.stdout_data == "15099\n99\n100\n");
  sb.destroy();
}

TEST_CASE("store layers take the path the report names and leave no loop device", "[kernel][layers]") {
  StoreRoot store("/tmp");
  bool file_backed;
  {
    sandlet::RuntimeOptions o;
    o.disable_warm_pool = true;
    auto rt = sandlet::Runtime::open(store.root, o);
    file_backed = present(report_of(rt), "erofs_file_backed");
  }
  int loops = use_store_layer(store.root);
  INFO("file-backed: " << file_backed);
  if (file_backed) CHECK(loops == 0);
  else CHECK(loops >= 2);  // the metadata image and at least one blob
}

TEST_CASE("a layer store on tmpfs mounts its layers through loop devices, freed with their mount",
          "[kernel][layers][needs-loop-devices]") {
  if (!fs::exists("/dev/loop-control")) {
    std::cout << "SANDLET-SKIP: no /dev/loop-control (the loop module is not loaded)" << std::endl;
    return;
  }
  // /dev/shm is tmpfs: EROFS cannot read its files directly on any kernel (it asks for a block device).
  StoreRoot store("/dev/shm");
  {
    sandlet::RuntimeOptions o;
    o.disable_warm_pool = true;
    auto rt = sandlet::Runtime::open(store.root, o);
    const json::object r = report_of(rt);
    CHECK_FALSE(present(r, "erofs_file_backed"));
    CHECK(r.at("paths").as_object().at("store_layers").as_string() == "EROFS on loop devices");
  }
  CHECK(use_store_layer(store.root) >= 2);
}

TEST_CASE("loop devices of a crashed owner's layers are freed by gc",
          "[kernel][layers][needs-loop-devices]") {
  if (!fs::exists("/dev/loop-control")) {
    std::cout << "SANDLET-SKIP: no /dev/loop-control (the loop module is not loaded)" << std::endl;
    return;
  }
  StoreRoot store("/dev/shm");
  // The helper creates an owned sandbox from the loop-backed layer and hangs; kill -9 is its crash.
  std::string out_file = store.root + "/helper.out";
  std::string cmd = "SANDLET_ROOT=" + store.root + " " + SANDLET_TEST_HELPER + " create busybox owned hang > " +
                    out_file + " 2>&1 & echo $!";
  int pid = std::atoi(host_sh(cmd).c_str());
  REQUIRE(pid > 0);
  struct KillHelper {  // also when a check below fails: never leave it (and its sandbox) running
    int pid;
    ~KillHelper() { ::kill(pid, SIGKILL); }
  } kill_helper{pid};
  REQUIRE(wait_until([&] { return slurp(out_file).find('\n') != std::string::npos; }, 30));
  INFO(slurp(out_file));
  CHECK(loops_under(store.root) >= 2);
  CHECK(erofs_mounts_under(store.root) == 1);
  ::kill(pid, SIGKILL);
  {
    sandlet::RuntimeOptions o;
    o.disable_warm_pool = true;
    auto rt = sandlet::Runtime::open(store.root, o);  // (its open sweeps too)
    CHECK(wait_until(
        [&] {
          rt.gc();
          return loops_under(store.root) == 0 && erofs_mounts_under(store.root) == 0;
        },
        20));
    CHECK(rt.list().empty());
  }
  CHECK(mounts_mentioning(store.root) == 0);
}

TEST_CASE("a crash while a layer's loop devices are bound leaves none bound",
          "[kernel][layers][needs-loop-devices]") {
  if (!fs::exists("/dev/loop-control")) {
    std::cout << "SANDLET-SKIP: no /dev/loop-control (the loop module is not loaded)" << std::endl;
    return;
  }
  // Killed (-9) with the devices bound but not mounted yet, then with the layer mounted but not attached:
  // the kernel frees them when the process's descriptors close, before any gc runs.
  for (const char* point : {"layers.loop_bound", "layers.mounted"}) {
    INFO("fault point " << point);
    StoreRoot store("/dev/shm");
    int status = -1;
    host_sh(std::string(SANDLET_CRASH_HELPER) + " " + store.root + " busybox " + point + " 2>&1", &status);
    CHECK((status == 137 || status == -1));  // SIGKILL: 128+9 from the shell, or a signal if it exec()ed
    CHECK(wait_until([&] { return loops_under(store.root) == 0; }, 10));
    CHECK(erofs_mounts_under(store.root) == 0);
    {
      sandlet::RuntimeOptions o;
      o.disable_warm_pool = true;
      auto rt = sandlet::Runtime::open(store.root, o);
      rt.gc();
      CHECK(rt.list().empty());
    }
    CHECK(mounts_mentioning(store.root) == 0);
  }
}
