// Store layers through the C ABI: a named layer imported from the test rootfs, shared by concurrent
// sandboxes through ONE node-wide EROFS mount, recorded in the sandbox record, unmounted when unused.
#include <condition_variable>
#include <mutex>
#include <vector>

#include "integration/harness.hpp"

namespace {

// Throws sandlet::Error for a C error (frees it).
void c_check(sandlet_error_t* err) {
  if (err != nullptr) throw sandlet::Error::take(err);
}

std::string take_string(char* s) {
  std::string out = s != nullptr ? s : "";
  sandlet_free(s);
  return out;
}

std::string json_string_field(const std::string& json, const std::string& key) {
  std::string k = "\"" + key + "\":\"";
  size_t at = json.find(k);
  if (at == std::string::npos) return "";
  at += k.size();
  return json.substr(at, json.find('"', at) - at);
}

// EROFS mounts whose mount point lies under `dir` (field 5 of mountinfo; the fs type follows " - ").
std::vector<std::string> erofs_mounts_under(const std::string& dir) {
  std::vector<std::string> out;
  std::istringstream in(slurp("/proc/self/mountinfo"));
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream f(line);
    std::string id, parent, dev, root, mount_point;
    f >> id >> parent >> dev >> root >> mount_point;
    size_t sep = line.find(" - ");
    if (sep == std::string::npos || line.compare(sep + 3, 6, "erofs ") != 0) continue;
    if (mount_point.rfind(dir + "/", 0) == 0) out.push_back(mount_point);
  }
  return out;
}

struct SpecHandle {
  sandlet_spec_t* spec = nullptr;
  SpecHandle() { c_check(sandlet_spec_new(&spec)); }
  ~SpecHandle() { sandlet_spec_delete(spec); }
};

}  // namespace

TEST_CASE("a named store layer is mounted once for concurrent sandboxes and released after", "[layers]") {
  Harness h;
  sandlet_runtime_t* rt = h.rt().get();

  sandlet_layer_import_options_t opts = SANDLET_LAYER_IMPORT_OPTIONS_INIT;
  opts.name = "busybox";
  char* result = nullptr;
  c_check(sandlet_layer_import(rt, SANDLET_TEST_ROOTFS, &opts, &result));
  std::string import_json = take_string(result);
  std::string digest = json_string_field(import_json, "digest");
  INFO(import_json);
  REQUIRE(digest.size() == 64);
  CHECK(import_json.find("\"existed\":[false]") != std::string::npos);
  CHECK(erofs_mounts_under(h.root()).empty());  // importing does not mount

  SpecHandle spec;
  c_check(sandlet_spec_add_layer(spec.spec, "busybox"));

  // Four creates in flight at once.
  struct Pending {
    std::mutex m;
    std::condition_variable cv;
    std::vector<sandlet::Sandbox> done;
    std::vector<std::string> errors;
  } pending;
  auto on_created = [](void* user, sandlet_error_t* err, sandlet_sandbox_t* sb) {
    auto* p = static_cast<Pending*>(user);
    std::lock_guard lock(p->m);
    if (err != nullptr) {
      p->errors.push_back(sandlet_error_message(err));
      sandlet_error_delete(err);
    } else {
      p->done.emplace_back(sb);
    }
    p->cv.notify_all();
  };
  for (int i = 0; i < 4; ++i) c_check(sandlet_sandbox_create_async(rt, spec.spec, on_created, &pending));
  std::vector<sandlet::Sandbox> sbs;
  {
    std::unique_lock lock(pending.m);
    REQUIRE(pending.cv.wait_for(lock, std::chrono::seconds(60),
                                [&] { return pending.done.size() + pending.errors.size() == 4; }));
    INFO((pending.errors.empty() ? std::string() : pending.errors[0]));
    REQUIRE(pending.errors.empty());
    sbs = std::move(pending.done);
  }
  REQUIRE(sbs.size() == 4);

  // Exactly one EROFS mount of that layer for all of them.
  auto mounts = erofs_mounts_under(h.root());
  INFO(slurp("/proc/self/mountinfo"));
  REQUIRE(mounts.size() == 1);
  CHECK(mounts[0].find(digest) != std::string::npos);

  // Each sandbox has its own writable view.
  CHECK(run_out(sbs[0], "echo secret > /etc/marker; cat /etc/marker") == "secret\n");
  for (int i = 1; i < 4; ++i) {
    CHECK(run_out(sbs[i], "test -e /etc/marker && echo seen || echo absent") == "absent\n");
    CHECK(run_out(sbs[i], "echo $(( 6 * 7 ))") == "42\n");
  }

  // The record names the layer by digest.
  for (auto& sb : sbs) {
    std::string info = sb.info_json();
    INFO(info);
    size_t layers_at = info.find("\"layers\"");
    REQUIRE(layers_at != std::string::npos);
    CHECK(info.find(digest, layers_at) != std::string::npos);
  }

  // gc with live sandboxes, then without: the named layer stays.
  c_check(sandlet_layer_gc(rt, &result));
  std::string gc_json = take_string(result);
  CHECK(gc_json.find(digest) == std::string::npos);

  std::vector<std::string> ids;
  for (auto& sb : sbs) {
    ids.push_back(sb.id());
    sb.destroy();
  }
  sbs.clear();
  // (The warm pool may keep prepared sandboxes, and with them the layer's mount, until the runtime closes.)
  for (const auto& id : ids) CHECK(wait_until([&] { return h.gone(id); }, 20));
  CHECK(erofs_mounts_under(h.root()).size() <= 1);

  c_check(sandlet_layer_gc(rt, &result));
  gc_json = take_string(result);
  INFO(gc_json);
  CHECK(gc_json.find(digest) == std::string::npos);
  c_check(sandlet_layer_inspect(rt, "busybox", &result));
  CHECK(json_string_field(take_string(result), "digest") == digest);

  // A spec naming a layer the store does not have.
  {
    SpecHandle bad;
    c_check(sandlet_spec_add_layer(bad.spec, "no-such-layer"));
    sandlet_sandbox_t* sb = nullptr;
    sandlet_error_t* err = sandlet_sandbox_create(rt, bad.spec, &sb);
    REQUIRE(err != nullptr);
    CHECK(sb == nullptr);
    CHECK(sandlet_error_code(err) == SANDLET_INVALID_ARGUMENT);
    std::string msg = sandlet_error_message(err);
    sandlet_error_delete(err);
    INFO(msg);
    CHECK(msg.find("layers[0]") != std::string::npos);
    CHECK(msg.find("no-such-layer") != std::string::npos);
  }

  h.check_no_leaks();  // closes the runtime
  CHECK(erofs_mounts_under(h.root()).empty());
}

TEST_CASE("a layer stays mounted while a sandbox uses it, layer gc unmounts it after", "[layers]") {
  char tmpl[] = "/tmp/sandlet-it-layers-XXXXXX";
  REQUIRE(::mkdtemp(tmpl) != nullptr);
  std::string root = tmpl;
  {
    struct RemoveRoot {
      std::string path;
      ~RemoveRoot() {
        std::error_code ec;
        fs::remove_all(path, ec);
      }
    } remove_root{root};
    sandlet::RuntimeOptions o;
    o.disable_warm_pool = true;
    auto rt = sandlet::Runtime::open(root, o);
    sandlet_layer_import_options_t opts = SANDLET_LAYER_IMPORT_OPTIONS_INIT;
    char* result = nullptr;
    c_check(sandlet_layer_import(rt.get(), SANDLET_TEST_ROOTFS, &opts, &result));
    std::string digest = json_string_field(take_string(result), "digest");
    REQUIRE(digest.size() == 64);
    {
      auto a = rt.create(sandlet::Spec().layer(digest.substr(0, 16)));  // a unique digest prefix
      auto b = rt.create(sandlet::Spec().layer("sha256:" + digest));
      CHECK(erofs_mounts_under(root).size() == 1);
      CHECK(run_out(a, "cat /proc/self/comm") == "cat\n");
      a.destroy();
      CHECK(erofs_mounts_under(root).size() == 1);  // b still uses it
      // A layer in use cannot be removed.
      sandlet_error_t* err = sandlet_layer_remove(rt.get(), digest.c_str());
      CHECK(sandlet_error_code(err) == SANDLET_FAILED_PRECONDITION);
      sandlet_error_delete(err);
      b.destroy();
      // The runtime may keep the layers of the environment created last mounted while it lives; layer gc
      // unmounts whatever no sandbox uses (once b's reclaim, which reads its record, is done).
      CHECK(wait_until(
          [&] {
            sandlet_error_t* gc_err = sandlet_layer_gc(rt.get(), nullptr);
            bool ok = gc_err == nullptr;
            sandlet_error_delete(gc_err);
            return ok && erofs_mounts_under(root).empty();
          },
          20));
      // Unnamed and unused now: gc removed it too.
      sandlet_error_t* gone = sandlet_layer_inspect(rt.get(), digest.c_str(), &result);
      CHECK(sandlet_error_code(gone) == SANDLET_NOT_FOUND);
      sandlet_error_delete(gone);
    }
    rt.close();
    CHECK(erofs_mounts_under(root).empty());
  }
  CHECK(mounts_mentioning(root) == 0);
  CHECK_FALSE(fs::exists(root));
}

TEST_CASE("a layer store on tmpfs: a create from it says why it cannot mount the layer", "[layers]") {
  // /dev/shm is tmpfs, whose files EROFS cannot mount (it asks for a block device instead).
  char tmpl[] = "/dev/shm/sandlet-it-XXXXXX";
  REQUIRE(::mkdtemp(tmpl) != nullptr);
  const std::string root = tmpl;
  {
    sandlet::RuntimeOptions o;
    o.disable_warm_pool = true;
    auto rt = sandlet::Runtime::open(root, o);
    sandlet::LayerImportOptions import;
    import.name = "busybox";
    rt.layer_import(SANDLET_TEST_ROOTFS, import);
    try {
      rt.create(sandlet::Spec().layer("busybox"));
      FAIL("created from a layer store on tmpfs");
    } catch (const sandlet::Error& e) {
      INFO(e.what());
      CHECK(e.code() == SANDLET_UNIMPLEMENTED);
      CHECK(std::string(e.what()).find("tmpfs cannot") != std::string::npos);
    }
    rt.close();
  }
  std::error_code ec;
  fs::remove_all(root, ec);
}
