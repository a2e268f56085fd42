// Unit tests for the layer store (src/image) on top of the EROFS writer: OCI images, gc and merges, checked
// against the kernel. Needs root; leaves nothing behind.
#include "erofs_test_support.hpp"

using namespace sandlet;
using namespace sandlet::image;
using namespace erofs_test;
namespace json = boost::json;

using unit::expect_error;
using unit::run;
using unit::sh;
using unit::write_file;

namespace {

// An OCI image layout with two gzip layers (the second whiting out parts of the first).
struct OciLayout : unit::OciBlobs {
  std::vector<std::string> layer_hex, diff_hex;
  // `wrong_layer`: -1, or the layer whose manifest digest names a blob file with other content.
  OciLayout(const std::string& root, int wrong_layer) : unit::OciBlobs{root + "/layout"} {
    sys::mkdir_p(dir + "/blobs/sha256", 0755);
    std::string l1 = root + "/l1", l2 = root + "/l2";
    sys::mkdir_p(l1 + "/a/dir", 0755);
    sys::mkdir_p(l1 + "/b", 0755);
    write_file(l1 + "/a/file", "file");
    write_file(l1 + "/a/dir/x", "x");
    write_file(l1 + "/b/old", "old");
    sys::mkdir_p(l2 + "/a", 0755);
    sys::mkdir_p(l2 + "/b", 0755);
    write_file(l2 + "/a/.wh.file", "");
    write_file(l2 + "/b/.wh..wh..opq", "");
    write_file(l2 + "/b/new", "new");
    for (const std::string& l : {l1, l2}) {
      sh("tar --format=pax -C " + l + " -cf " + l + ".tar . && gzip -n -k " + l + ".tar");
      diff_hex.push_back(file_hex(l + ".tar"));
      layer_hex.push_back(add_blob_file(l + ".tar.gz"));
    }
    const char* arch =
#if defined(__aarch64__)
        "arm64";
#else
        "amd64";
#endif
    json::object config{
        {"architecture", arch},
        {"os", "linux"},
        {"config", {{"Env", {"PATH=/bin", "X=1"}}, {"WorkingDir", "/a"}}},
        {"rootfs", {{"type", "layers"}, {"diff_ids", {"sha256:" + diff_hex[0], "sha256:" + diff_hex[1]}}}}};
    std::string config_hex = add_blob(json::serialize(config));
    const std::string gz = "application/vnd.oci.image.layer.v1.tar+gzip";
    json::array layers{descriptor(gz, layer_hex[0]), descriptor(gz, layer_hex[1])};
    if (wrong_layer >= 0) {  // the blob stored under a digest it does not have
      std::string wrong(64, 'e');
      sh("cp " + dir + "/blobs/sha256/" + layer_hex[wrong_layer] + " " + dir + "/blobs/sha256/" + wrong);
      layers[wrong_layer].as_object()["digest"] = "sha256:" + wrong;
    }
    json::object m{{"schemaVersion", 2},
                   {"mediaType", "application/vnd.oci.image.manifest.v1+json"},
                   {"config", descriptor("application/vnd.oci.image.config.v1+json", config_hex)},
                   {"layers", layers}};
    std::string manifest_hex = add_blob(json::serialize(m));
    write_file(dir + "/oci-layout", R"({"imageLayoutVersion":"1.0.0"})");
    write_file(dir + "/index.json",
               json::serialize(json::object{
                   {"schemaVersion", 2},
                   {"manifests", {descriptor("application/vnd.oci.image.manifest.v1+json", manifest_hex)}}}));
  }
};

}  // namespace

TEST_CASE("erofs: an OCI image becomes layers and an environment a sandbox runs in", "[erofs][oci]") {
  TempDir t;
  OciLayout layout(t.path, /*wrong_layer=*/-1);
  std::string root = t / "root";
  RuntimeOptions ro;
  ro.warm_pool = 0;
  auto rt = Runtime::open(root, ro);
  struct CloseRt {
    std::shared_ptr<Runtime>& rt;
    ~CloseRt() {
      try {
        rt->close();
        rt->layer_mounts().release_unused(nullptr, [] { return std::set<std::string>{}; });
      } catch (...) {
      }
    }
  } close_rt{rt};

  ImportOptions o;
  o.name = "img";
  ImportResult r = rt->layer_store().import(layout.dir, o);
  REQUIRE(r.layers.size() == 2);
  CHECK(r.environment == "img");
  CHECK(r.layers[1].parent == r.layers[0].digest);
  EnvVersion env = rt->layer_store().env_resolve("img");
  CHECK(env.layers == std::vector<std::string>{r.layers[0].digest, r.layers[1].digest});
  CHECK(env.env == std::map<std::string, std::string>{{"PATH", "/bin"}, {"X", "1"}});
  CHECK(env.workdir == "/a");

  Spec spec;
  spec.environment = "img";
  spec.layers = {SANDLET_TEST_ROOTFS};  // busybox on top, for `ls`
  {
    auto sb = rt->create(spec);
    ExecParams p;
    p.argv = {"/bin/sh", "-c", "ls -A /a; echo --; ls -A /b; echo --; echo X=$X; pwd; cat /b/new"};
    ExecOutcome out = sb->exec(p);
    INFO(out.stderr_data);
    CHECK(out.exit_code == 0);
    CHECK(out.stdout_data == "dir\n--\nnew\n--\nX=1\n/a\nnew");
    CHECK(mounts_under(root + "/layers/mounts") == 2);
    sb->destroy();
  }
  rt->close();
  rt->layer_mounts().release_unused(nullptr, [] { return std::set<std::string>{}; });
  CHECK(mounts_under(root) == 0);
}

TEST_CASE("erofs: an OCI layer that does not match the manifest's digest is refused", "[erofs][oci]") {
  Store s;
  int wrong = GENERATE(0, 1);
  INFO("wrong digest for layer " << wrong);
  OciLayout layout(s.tmp.path, wrong);
  ImportOptions o;
  o.name = "img";
  Error e = expect_error([&] { s.store->import(layout.dir, o); });
  CHECK(e.code() == Code::kDataLoss);
  CHECK_THAT(e.what(), Catch::Contains(std::string(64, 'e')));
  if (wrong == 0) {
    CHECK(s.store->list().empty());
  } else {
    // Layers are committed one by one: the good lower layer may stay (unnamed, gc removes it), never the bad one.
    for (const auto& l : s.store->list()) CHECK(l.source.find("layer 1") == std::string::npos);
    s.store->gc({});
    CHECK(s.store->list().empty());
  }
  CHECK(s.store->env_list().empty());
  CHECK(sys::list_dir(s.tmp / "layers/tmp").empty());
  CHECK(sys::list_dir(s.tmp / "layers/blobs").empty());
}

TEST_CASE("erofs: gc keeps layers environments use and removes the rest with their blobs", "[erofs]") {
  Store s;
  std::string a = s.tmp / "a", b = s.tmp / "b";
  sys::mkdir_p(a, 0755);
  sys::mkdir_p(b, 0755);
  write_file(a + "/data", random_bytes(100000, 1));
  write_file(b + "/data", random_bytes(100000, 2));
  LayerInfo la = s.import(a), lb = s.import(b);
  REQUIRE(la.blobs.size() == 1);
  REQUIRE(lb.blobs.size() == 1);
  REQUIRE(la.blobs[0] != lb.blobs[0]);
  s.store->env_create("env", {la.digest}, {{"K", "V"}}, "/", "");

  Error e = expect_error([&] { s.store->remove(la.digest, {}); });
  CHECK(e.code() == Code::kFailedPrecondition);

  // A live sandbox's layer is kept too.
  GcReport kept = s.store->gc({lb.digest});
  CHECK(kept.removed_layers.empty());

  GcReport rep = s.store->gc({});
  CHECK(rep.removed_layers == std::vector<std::string>{lb.digest});
  CHECK(rep.removed_blobs == std::vector<std::string>{lb.blobs[0]});
  CHECK(rep.bytes_freed >= 100000);
  CHECK_FALSE(s.store->find(lb.digest));
  CHECK(s.store->find(la.digest));
  struct stat st;
  CHECK(::stat(s.store->blob_path(la.blobs[0]).c_str(), &st) == 0);
  CHECK(::stat(s.store->blob_path(lb.blobs[0]).c_str(), &st) != 0);
  CHECK(::stat((s.store->blob_path(lb.blobs[0]) + ".chunks").c_str(), &st) != 0);
  CHECK(::stat(s.store->meta_path(lb.digest).c_str(), &st) != 0);

  // Once the environment is gone, remove works.
  s.store->env_remove("env");
  s.store->remove(la.digest, {});
  CHECK(s.store->list().empty());
  CHECK(sys::list_dir(s.tmp / "layers/blobs").empty());
}

TEST_CASE("erofs: merging layers keeps the overlay view and the whiteouts", "[erofs]") {
  Store s;
  std::string d1 = s.tmp / "l1", d2 = s.tmp / "l2";
  sys::mkdir_p(d1 + "/dir", 0755);
  write_file(d1 + "/a", "a");
  write_file(d1 + "/b", random_bytes(10000, 3));
  write_file(d1 + "/dir/x", "x");
  sys::mkdir_p(d2 + "/dir", 0755);
  REQUIRE(::mknod((d2 + "/a").c_str(), S_IFCHR, makedev(0, 0)) == 0);
  write_file(d2 + "/c", "c");
  write_file(d2 + "/dir/y", "y");
  set_xattr(d2 + "/dir", "trusted.overlay.opaque", "y");
  LayerInfo l1 = s.import(d1), l2 = s.import(d2);

  ImportOptions o;
  o.name = "merged";
  LayerInfo m = s.store->merge({l1.digest, l2.digest}, o, [&](const std::string& d) { return s.mount(d); });
  CHECK(m.name == "merged");
  CHECK(s.store->resolve("merged") == m.digest);
  std::string mnt = s.mount(m.digest);
  auto names = list_names(mnt);
  CHECK(names == std::vector<std::string>{"a", "b", "c", "dir"});
  struct stat st;
  REQUIRE(::lstat((mnt + "/a").c_str(), &st) == 0);
  CHECK(S_ISCHR(st.st_mode));
  CHECK(st.st_rdev == makedev(0, 0));
  CHECK(list_names(mnt + "/dir") == std::vector<std::string>{"y"});
  CHECK(xattrs_of(mnt + "/dir")["trusted.overlay.opaque"] == "y");
  CHECK(file_hex(mnt + "/b") == file_hex(d1 + "/b"));
  CHECK(slurp_file(mnt + "/c") == "c");

  // Stacked on L1 in an overlay, the merged layer shows b, c, dir/y only (its whiteouts hide L1's a, dir/x).
  std::string ovl = s.tmp / "ovl";
  sys::mkdir_p(ovl, 0755);
  std::string l1_mnt = s.mount(l1.digest);
  sh("mount -t overlay overlay -o ro,lowerdir=" + mnt + ":" + l1_mnt + " " + ovl);
  struct Unmount {
    std::string path;
    ~Unmount() { ::umount2(path.c_str(), MNT_DETACH); }
  } unmount{ovl};
  CHECK(list_names(ovl) == std::vector<std::string>{"b", "c", "dir"});
  CHECK(list_names(ovl + "/dir") == std::vector<std::string>{"y"});
  CHECK(file_hex(ovl + "/b") == file_hex(d1 + "/b"));
  REQUIRE(::umount2(ovl.c_str(), 0) == 0);

  s.release();
  CHECK(s.erofs_mounts() == 0);
}
