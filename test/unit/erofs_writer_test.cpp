// Unit tests for src/image: the EROFS writer and the layer store, checked against the kernel (file-backed
// EROFS mounts), fsck.erofs and GNU tar. Needs root. Everything lives in temp dirs removed at the end, and
// every mount is released (also when a check fails half way).
#include <catch2/catch.hpp>

#include <dirent.h>
#include <fcntl.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "image/layer_mounts.hpp"
#include "image/layer_store.hpp"
#include "image/sha256.hpp"
#include "runtime/runtime.hpp"
#include "runtime/sandbox.hpp"
#include "sys/fd.hpp"
#include "sys/fs_util.hpp"
#include "oci_blobs.hpp"
#include "unit_helpers.hpp"

using namespace sandlet;
using namespace sandlet::image;
namespace json = boost::json;

using unit::expect_error;
using unit::run;
using unit::sh;
using unit::write_file;

namespace {

struct TempDir : unit::TempDir {
  TempDir() : unit::TempDir("erofs") {}
};

std::string slurp_file(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return "";
  std::string out;
  char buf[65536];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
  std::fclose(f);
  return out;
}

// Mounts whose mount point (field 5 of mountinfo) lies under `dir`.
size_t mounts_under(const std::string& dir) {
  std::string m = slurp_file("/proc/self/mountinfo");
  size_t count = 0;
  for (size_t at = 0; at < m.size();) {
    size_t eol = m.find('\n', at);
    if (eol == std::string::npos) eol = m.size();
    std::string line = m.substr(at, eol - at);
    at = eol + 1;
    size_t f = 0;
    for (int i = 0; i < 4 && f != std::string::npos; ++i) f = line.find(' ', f + (i ? 1 : 0));
    if (f == std::string::npos) continue;
    std::string mp = line.substr(f + 1, line.find(' ', f + 1) - f - 1);
    if (mp.rfind(dir + "/", 0) == 0) ++count;
  }
  return count;
}

std::string random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string s(n, '\0');
  for (auto& c : s) c = static_cast<char>(rng());
  return s;
}

std::string file_hex(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return "missing";
  return to_hex(sha256_file(path));
}

// A layer store in a temp dir with its mounts; the destructor unmounts everything it mounted.
struct Store {
  TempDir tmp;
  std::unique_ptr<LayerStore> store;
  std::unique_ptr<LayerMounts> mounts;
  std::vector<sys::UniqueFd> holds;
  Store() {
    store = std::make_unique<LayerStore>(tmp / "layers");
    mounts = std::make_unique<LayerMounts>(*store, tmp / "layers/mounts");
  }
  ~Store() { release(); }
  void release() {
    holds.clear();
    try {
      mounts->release_unused(nullptr, [] { return std::set<std::string>{}; });
    } catch (...) {
    }
  }
  std::string mount(const std::string& digest) {
    holds.emplace_back();
    return mounts->acquire(digest, &holds.back());
  }
  LayerInfo import(const std::string& path, bool* existed = nullptr, ImportOptions o = {}) {
    ImportResult r = store->import(path, o);
    REQUIRE(r.layers.size() == 1);
    if (existed) *existed = r.existed[0];
    return r.layers[0];
  }
  size_t erofs_mounts() const { return mounts_under(tmp.path); }
};

void set_mtime(const std::string& path, int64_t sec, long nsec) {
  struct timespec ts[2] = {{sec, nsec}, {sec, nsec}};
  REQUIRE(::utimensat(AT_FDCWD, path.c_str(), ts, AT_SYMLINK_NOFOLLOW) == 0);
}

void set_xattr(const std::string& path, const std::string& name, const std::string& value) {
  INFO(path << " " << name);
  REQUIRE(::lsetxattr(path.c_str(), name.c_str(), value.data(), value.size(), 0) == 0);
}

// The awkward tree of the round-trip test. `with_socket`: tar cannot archive sockets.
void make_awkward_tree(const std::string& d, bool with_socket) {
  sys::mkdir_p(d, 0755);
  write_file(d + "/empty", "");
  write_file(d + "/one", "x");
  write_file(d + "/f2048", random_bytes(2048, 1));
  write_file(d + "/f2049", random_bytes(2049, 2));
  write_file(d + "/f4096", random_bytes(4096, 3));
  write_file(d + "/f65536", random_bytes(65536, 4));
  write_file(d + "/f65537", random_bytes(65537, 5));
  write_file(d + "/random300k", random_bytes(300 * 1024, 6));
  {
    sys::UniqueFd fd(::open((d + "/sparse").c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    REQUIRE(fd);
    std::string mid = random_bytes(100000, 7), tail = random_bytes(5000, 8);
    REQUIRE(::pwrite(fd.get(), mid.data(), mid.size(), 5 << 20) == static_cast<ssize_t>(mid.size()));
    REQUIRE(::pwrite(fd.get(), tail.data(), tail.size(), (10 << 20) - 5000) == static_cast<ssize_t>(tail.size()));
  }
  write_file(d + "/linked", random_bytes(70000, 9));
  REQUIRE(::link((d + "/linked").c_str(), (d + "/link2").c_str()) == 0);
  sys::mkdir_p(d + "/sub", 0750);
  REQUIRE(::link((d + "/linked").c_str(), (d + "/sub/link3").c_str()) == 0);
  write_file(d + "/small_linked", "tiny");
  REQUIRE(::link((d + "/small_linked").c_str(), (d + "/sub/small_link2").c_str()) == 0);
  REQUIRE(::symlink("one", (d + "/short_link").c_str()) == 0);
  std::string long_target;
  while (long_target.size() < 3000) long_target += "abcdefghi/";
  long_target.resize(3000);
  REQUIRE(::symlink(long_target.c_str(), (d + "/long_link").c_str()) == 0);
  REQUIRE(::mknod((d + "/chardev").c_str(), S_IFCHR | 0620, makedev(1, 3)) == 0);
  REQUIRE(::mknod((d + "/blockdev").c_str(), S_IFBLK | 0640, makedev(259, 70000)) == 0);
  REQUIRE(::mkfifo((d + "/fifo").c_str(), 0600) == 0);
  if (with_socket) {
    int s = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    REQUIRE(s >= 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::string p = d + "/sock";
    REQUIRE(p.size() < sizeof addr.sun_path);
    std::memcpy(addr.sun_path, p.c_str(), p.size() + 1);
    int rc = ::bind(s, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    ::close(s);
    REQUIRE(rc == 0);
  }
  write_file(d + "/setuid", "#!/bin/sh\n", 0755);
  REQUIRE(::chmod((d + "/setuid").c_str(), 04755) == 0);
  write_file(d + "/sticky_sgid", "x", 0644);
  REQUIRE(::chmod((d + "/sticky_sgid").c_str(), 03711) == 0);
  write_file(d + "/owned", random_bytes(5000, 10), 0640);
  REQUIRE(::lchown((d + "/owned").c_str(), 1234, 5678) == 0);
  REQUIRE(::lchown((d + "/short_link").c_str(), 1234, 5678) == 0);
  REQUIRE(::lchown((d + "/sub").c_str(), 1234, 5678) == 0);
  write_file(d + "/xattrs", "data with xattrs");
  set_xattr(d + "/xattrs", "user.small", "v");
  set_xattr(d + "/xattrs", "user.binary", std::string("\0\1\2\xff", 4));
  set_xattr(d + "/xattrs", "user.big", std::string(1500, 'q'));
  set_xattr(d + "/xattrs", "trusted.thing", "t");
  set_xattr(d + "/sub", "user.on_dir", "dir");
  set_xattr(d + "/sub", "user.empty", "");
  REQUIRE(::mknod((d + "/whiteout").c_str(), S_IFCHR | 0000, makedev(0, 0)) == 0);
  sys::mkdir_p(d + "/opaque", 0755);
  write_file(d + "/opaque/inside", "inside");
  set_xattr(d + "/opaque", "trusted.overlay.opaque", "y");
  write_file(d + "/" + std::string(255, 'n'), "long name");
  write_file(d + "/bad\xff\xfename", "not utf-8");
  sys::mkdir_p(d + "/many", 0755);
  for (int i = 0; i < 2000; ++i) {
    char name[64];
    std::snprintf(name, sizeof name, "/many/entry-with-a-longish-name-%05d", i);
    if (i % 100 == 0) {
      write_file(d + name, std::to_string(i));
    } else {
      write_file(d + name, "");
    }
  }
  // Explicit timestamps with nanoseconds (directories last: adding entries moves their mtime).
  set_mtime(d + "/one", 1234567890, 123456789);
  set_mtime(d + "/short_link", 1500000000, 999999999);
  set_mtime(d + "/long_link", -1, 5);
  set_mtime(d + "/sparse", 4102444800, 1);  // 2100: beyond 32 bits
  set_mtime(d + "/linked", 1600000000, 500000000);
  set_mtime(d + "/chardev", 1700000000, 42);
  for (const char* dir : {"/sub", "/opaque", "/many"}) set_mtime(d + dir, 1650000000, 777777777);
  set_mtime(d, 1660000000, 123);
  REQUIRE(::chmod(d.c_str(), 0711) == 0);
}

std::map<std::string, std::string> xattrs_of(const std::string& path) {
  std::map<std::string, std::string> out;
  ssize_t n = ::llistxattr(path.c_str(), nullptr, 0);
  if (n <= 0) return out;
  std::string names(static_cast<size_t>(n), '\0');
  n = ::llistxattr(path.c_str(), names.data(), names.size());
  REQUIRE(n >= 0);
  names.resize(static_cast<size_t>(n));
  for (size_t at = 0; at < names.size();) {
    std::string name = names.c_str() + at;
    at += name.size() + 1;
    ssize_t vn = ::lgetxattr(path.c_str(), name.c_str(), nullptr, 0);
    REQUIRE(vn >= 0);
    std::string value(static_cast<size_t>(vn), '\0');
    vn = ::lgetxattr(path.c_str(), name.c_str(), value.data(), value.size());
    REQUIRE(vn >= 0);
    value.resize(static_cast<size_t>(vn));
    out[name] = value;
  }
  return out;
}

std::vector<std::string> list_names(const std::string& dir) {
  std::vector<std::string> out;
  DIR* d = ::opendir(dir.c_str());
  REQUIRE(d != nullptr);
  while (dirent* e = ::readdir(d)) {
    std::string n = e->d_name;
    if (n != "." && n != "..") out.push_back(n);
  }
  ::closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

// Compares every entry under `src` and `mnt` (both walked), returns the number of entries compared.
size_t compare_trees(const std::string& src, const std::string& mnt) {
  size_t compared = 0;
  std::map<ino_t, std::vector<std::string>> links;  // source inode -> relative paths
  std::function<void(const std::string&)> walk = [&](const std::string& rel) {
    std::string a = src + rel, b = mnt + rel;
    INFO("entry '" << (rel.empty() ? "/" : rel) << "'");
    struct stat sa, sb;
    REQUIRE(::lstat(a.c_str(), &sa) == 0);
    REQUIRE(::lstat(b.c_str(), &sb) == 0);
    ++compared;
    CHECK((sa.st_mode & S_IFMT) == (sb.st_mode & S_IFMT));
    CHECK((sa.st_mode & 07777) == (sb.st_mode & 07777));
    CHECK(sa.st_uid == sb.st_uid);
    CHECK(sa.st_gid == sb.st_gid);
    CHECK(sa.st_mtim.tv_sec == sb.st_mtim.tv_sec);
    CHECK(sa.st_mtim.tv_nsec == sb.st_mtim.tv_nsec);
    CHECK(xattrs_of(a) == xattrs_of(b));
    if (!S_ISDIR(sa.st_mode)) {
      CHECK(sa.st_nlink == sb.st_nlink);
      CHECK(sa.st_size == sb.st_size);
      links[sa.st_ino].push_back(rel);
    }
    if (S_ISCHR(sa.st_mode) || S_ISBLK(sa.st_mode)) CHECK(sa.st_rdev == sb.st_rdev);
    if (S_ISLNK(sa.st_mode)) {
      char ta[8192], tb[8192];
      ssize_t na = ::readlink(a.c_str(), ta, sizeof ta), nb = ::readlink(b.c_str(), tb, sizeof tb);
      REQUIRE(na > 0);
      CHECK(std::string(ta, static_cast<size_t>(na)) == std::string(tb, nb > 0 ? static_cast<size_t>(nb) : 0));
    }
    if (S_ISREG(sa.st_mode)) {
      std::string da = slurp_file(a), db = slurp_file(b);
      CHECK(da.size() == static_cast<size_t>(sa.st_size));
      size_t diff = 0;
      while (diff < da.size() && diff < db.size() && da[diff] == db[diff]) ++diff;
      INFO("mounted size " << db.size() << ", first difference at byte " << diff);
      CHECK((da == db));
    }
    if (S_ISDIR(sa.st_mode)) {
      auto na = list_names(a), nb = list_names(b);
      CHECK(na == nb);
      for (const auto& n : na) walk(rel + "/" + n);
    }
  };
  walk("");
  // Hard links: the same inode in the mount too, and only for the same source inode.
  std::map<ino_t, ino_t> mounted_of;
  for (const auto& [ino, paths] : links) {
    struct stat first;
    REQUIRE(::lstat((mnt + paths[0]).c_str(), &first) == 0);
    for (const auto& p : paths) {
      struct stat st;
      REQUIRE(::lstat((mnt + p).c_str(), &st) == 0);
      INFO("hard link " << p << " of " << paths[0]);
      CHECK(st.st_ino == first.st_ino);
    }
    INFO("inode of " << paths[0] << " shared with another source inode");
    CHECK(mounted_of.emplace(first.st_ino, ino).second);
  }
  return compared;
}

std::string fsck_cmd(const Store& s, const LayerInfo& l) {
  std::string cmd = "fsck.erofs";
  for (const auto& b : l.blobs) cmd += " --device=" + s.store->blob_path(b);
  return cmd + " " + s.store->meta_path(l.digest);
}

}  // namespace

TEST_CASE("erofs: an awkward tree round-trips through import, fsck.erofs and a kernel mount", "[erofs]") {
  Store s;
  std::string src = s.tmp / "src";
  make_awkward_tree(src, /*with_socket=*/true);
  LayerInfo l = s.import(src);
  CHECK(l.digest.size() == 64);
  CHECK(!l.blobs.empty());
  CHECK(l.inodes > 2000);

  // fsck.erofs: structure, then every byte of data (extracting reads it all).
  INFO(fsck_cmd(s, l));
  CHECK(run(fsck_cmd(s, l) + " >/dev/null 2>" + s.tmp / "fsck.err") == 0);
  INFO(slurp_file(s.tmp / "fsck.err"));
  CHECK(run(fsck_cmd(s, l) + " --extract=" + s.tmp / "extract" + " >/dev/null 2>" + s.tmp / "fsck.err") == 0);
  // (Not "sparse": fsck.erofs before 1.8 extracts holes of chunk-based files wrongly, it skips them without
  // seeking; the kernel mount below reads it right.)
  for (const char* f : {"random300k", "f65537", "f65536", "linked", "f2049", "owned"}) {
    INFO("extracted " << f);
    CHECK(file_hex(s.tmp / "extract/" + f) == file_hex(src + "/" + f));
  }

  std::string mnt = s.mount(l.digest);
  CHECK(s.erofs_mounts() == 1);
  CHECK(s.mounts->is_mounted(l.digest));
  size_t compared = compare_trees(src, mnt);
  CHECK(compared > 2020);

  s.release();
  CHECK(s.erofs_mounts() == 0);
  CHECK(s.mounts->mounted().empty());
}

TEST_CASE("erofs: importing the same data again dedupes layers and chunks", "[erofs]") {
  Store s;
  std::string a = s.tmp / "a", b = s.tmp / "b";
  sys::mkdir_p(a, 0755);
  std::string big = random_bytes(4 << 20, 42);
  write_file(a + "/big", big);
  write_file(a + "/small", random_bytes(10000, 43));
  set_mtime(a + "/big", 1600000000, 1);

  bool existed = true;
  LayerInfo l1 = s.import(a, &existed);
  CHECK_FALSE(existed);
  REQUIRE(l1.blobs.size() == 1);
  CHECK(l1.size == (4u << 20) + 10000);

  auto blobs_before = sys::list_dir(s.tmp / "layers/blobs");
  LayerInfo again = s.import(a, &existed);
  CHECK(existed);
  CHECK(again.digest == l1.digest);
  CHECK(sys::list_dir(s.tmp / "layers/blobs") == blobs_before);
  CHECK(s.store->list().size() == 1);

  // A second tree sharing the big file (other path, other metadata) reuses its chunks.
  sys::mkdir_p(b + "/deeper", 0755);
  write_file(b + "/deeper/big-copy", big);
  write_file(b + "/other", random_bytes(20000, 44));
  LayerInfo l2 = s.import(b, &existed);
  CHECK_FALSE(existed);
  CHECK(l2.digest != l1.digest);
  CHECK(std::find(l2.blobs.begin(), l2.blobs.end(), l1.blobs[0]) != l2.blobs.end());
  CHECK(l2.size == (4u << 20) + 20000);
  CHECK(l2.stored_bytes < l2.size / 10);

  std::string mnt = s.mount(l2.digest);
  CHECK(file_hex(mnt + "/deeper/big-copy") == file_hex(a + "/big"));
  CHECK(run(fsck_cmd(s, l2) + " --extract=" + s.tmp / "x" + " >/dev/null 2>&1") == 0);
  s.release();
  CHECK(s.erofs_mounts() == 0);
}

TEST_CASE("erofs: a tar (plain, gzip, zstd) imports to the same layer as its directory", "[erofs]") {
  Store s;
  std::string src = s.tmp / "src";
  make_awkward_tree(src, /*with_socket=*/false);
  LayerInfo dir_layer = s.import(src);

  std::string tar = s.tmp / "tree.tar";
  sh("tar --xattrs --xattrs-include='*' --format=pax --numeric-owner -C " + src + " -cf " + tar + " .");
  sh("gzip -k -n " + tar + " && zstd -q -k " + tar);
  for (const std::string& f : {tar, tar + ".gz", tar + ".zst"}) {
    INFO(f);
    bool existed = false;
    LayerInfo t = s.import(f, &existed);
    CHECK(t.digest == dir_layer.digest);
    CHECK(existed);
  }
  CHECK(s.store->list().size() == 1);

  // GNU sparse members (tar --sparse) are refused cleanly: nothing committed, no tmp dir left.
  std::string sparse_tar = s.tmp / "sparse.tar";
  sh("tar --xattrs --xattrs-include='*' --format=pax --sparse --numeric-owner -C " + src + " -cf " + sparse_tar + " .");
  Error e = expect_error([&] { s.import(sparse_tar); });
  CHECK(e.code() == Code::kUnimplemented);
  CHECK(s.store->list().size() == 1);
  CHECK(sys::list_dir(s.tmp / "layers/tmp").empty());
}

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

TEST_CASE("erofs: a corrupted blob or metadata image is never mounted", "[erofs]") {
  Store s;
  std::string src = s.tmp / "src";
  sys::mkdir_p(src, 0755);
  write_file(src + "/data", random_bytes(200000, 77));
  LayerInfo l = s.import(src);
  REQUIRE(l.blobs.size() == 1);

  auto flip = [](const std::string& path, off_t at) {
    REQUIRE(::chmod(path.c_str(), 0644) == 0);
    sys::UniqueFd fd(::open(path.c_str(), O_RDWR | O_CLOEXEC));
    REQUIRE(fd);
    char c;
    REQUIRE(::pread(fd.get(), &c, 1, at) == 1);
    c ^= 0x01;
    REQUIRE(::pwrite(fd.get(), &c, 1, at) == 1);
  };
  SECTION("blob") { flip(s.store->blob_path(l.blobs[0]), 100000); }
  SECTION("metadata image") { flip(s.store->meta_path(l.digest), 1024 + 8); }

  sys::UniqueFd hold;
  Error e = expect_error([&] { s.mounts->acquire(l.digest, &hold); });
  CHECK(e.code() == Code::kDataLoss);
  CHECK_FALSE(s.mounts->is_mounted(l.digest));
  CHECK(s.erofs_mounts() == 0);
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
