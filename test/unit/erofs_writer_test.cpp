// Unit tests for the EROFS writer (src/image), checked against the kernel (file-backed EROFS mounts),
// fsck.erofs and GNU tar. Needs root. Everything lives in temp dirs removed at the end, and every mount is
// released (also when a check fails half way).
#include "erofs_test_support.hpp"

using namespace sandlet;
using namespace sandlet::image;
using namespace erofs_test;
namespace json = boost::json;

using unit::expect_error;
using unit::run;
using unit::sh;
using unit::write_file;

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
  s.reopen();  // the store object that wrote the files trusts them (LayerStore::verify); another does not

  sys::UniqueFd hold;
  Error e = expect_error([&] { s.mounts->acquire(l.digest, &hold); });
  CHECK(e.code() == Code::kDataLoss);
  CHECK_FALSE(s.mounts->is_mounted(l.digest));
  CHECK(s.erofs_mounts() == 0);
}
