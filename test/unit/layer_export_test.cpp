// Layer export/import (src/image/layer_export.cpp, layer_import_exported.cpp): a layer written to one file
// and imported into a second store gives the same digest, manifest fields and tree; a damaged or altered
// file never enters the store. Needs root (layers are mounted to be read); leaves nothing behind.
#include "erofs_test_support.hpp"
#include "image/export_header.hpp"

using namespace sandlet;
using namespace sandlet::image;
using namespace erofs_test;

using unit::expect_error;
using unit::run;
using unit::sh;
using unit::write_file;

namespace {

// The awkward tree plus what a tar needs pax records for: long and odd names, deep paths, big ids.
void make_export_tree(const std::string& d) {
  make_awkward_tree(d, /*with_socket=*/true);
  write_file(d + "/with space", "space");
  write_file(d + "/new\nline", "newline");
  write_file(d + "/" + std::string(200, 'w'), "two hundred");
  std::string deep = d + "/deep";
  for (int i = 0; i < 8; ++i) deep += "/level-" + std::to_string(i) + "-abcdefghijklmnopq";
  sys::mkdir_p(deep, 0755);
  write_file(deep + "/" + std::string(200, 'z'), random_bytes(70000, 11));  // path > 400 bytes, 2 chunks
  REQUIRE(::link((deep + "/" + std::string(200, 'z')).c_str(), (d + "/link_to_deep").c_str()) == 0);
  write_file(d + "/zeros", std::string(3 * 65536 + 100, '\0'));  // written zeros: holes once imported
  write_file(d + "/chunks3", random_bytes(3 * 65536 + 1, 12));
  write_file(d + "/bigids", "ids");
  REQUIRE(::lchown((d + "/bigids").c_str(), 3000000, 4000000) == 0);  // beyond ustar's 7 octal digits
  set_xattr(d + "/bigids", "user.with=equals", "eq");
  set_xattr(d + "/bigids", "trusted.overlay.origin", std::string("\0\xfb\x21", 3));
  set_mtime(d + "/bigids", 1700000000, 1);
  set_mtime(d + "/deep", 1650000000, 5);
  set_mtime(d, 1660000000, 123);
}

// A layer made in store `a` from `dir`, as a snapshot: a parent, and a stack of one layer.
struct Snapshot {
  LayerInfo base, layer;
};

Snapshot import_snapshot(Store& a, const std::string& tmp, const std::string& dir) {
  std::string base_dir = tmp + "/base";
  sys::mkdir_p(base_dir, 0755);
  write_file(base_dir + "/base-file", "base");
  Snapshot s;
  s.base = a.import(base_dir);
  ImportOptions o;
  o.role = "toolkit";
  o.name = "snap";
  o.parent = s.base.digest;
  o.stack = {s.base.digest};
  s.layer = a.import(dir, nullptr, o);
  return s;
}

std::string export_to(Store& s, const std::string& ref, const std::string& path, ExportResult* out = nullptr) {
  ExportResult r = s.store->export_layer(ref, path, {}, [&](const std::string& d) { return s.mount(d); });
  if (out) *out = r;
  return r.digest;
}

void expect_store_empty(Store& s) {
  CHECK(s.store->list().empty());
  CHECK(sys::list_dir(s.tmp / "layers/tmp").empty());
  CHECK(sys::list_dir(s.tmp / "layers/meta").empty());
  CHECK(sys::list_dir(s.tmp / "layers/blobs").empty());
  CHECK(sys::list_dir(s.tmp / "layers/names").empty());
}

std::vector<std::string> tmp_files_in(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& f : sys::list_dir(dir))
    if (f.find(".tmp-") != std::string::npos) out.push_back(f);
  return out;
}

}  // namespace

TEST_CASE("layer export: import on a second store gives the same digest, manifest and tree", "[erofs][export]") {
  const std::string suffix = GENERATE(std::string(".tar"), std::string(".tar.zst"));
  INFO("export file *" << suffix);
  Store a, b;
  std::string src = a.tmp / "src";
  make_export_tree(src);
  Snapshot snap = import_snapshot(a, a.tmp.path, src);
  const std::string file = a.tmp / ("snap" + suffix);

  ExportResult ex;
  CHECK(export_to(a, "snap", file, &ex) == snap.layer.digest);
  CHECK(ex.compressed == (suffix == ".tar.zst"));
  struct stat st;
  REQUIRE(::stat(file.c_str(), &st) == 0);
  CHECK(ex.bytes == static_cast<uint64_t>(st.st_size));
  CHECK(ex.files > 2000);
  CHECK(tmp_files_in(a.tmp.path).empty());
  // An ordinary tar: GNU tar lists it (and the zstd one through zstd).
  std::string list = a.tmp / "list";
  sh(std::string("tar ") + (ex.compressed ? "--zstd " : "") + "-tvf " + file + " > " + list + " 2>/dev/null");
  std::string listed = slurp_file(list);
  CHECK(listed.find("deep/level-0-abcdefghijklmnopq/level-1") != std::string::npos);
  CHECK(listed.find(std::string(200, 'w')) != std::string::npos);

  ImportResult r = b.store->import(file, {});
  REQUIRE(r.layers.size() == 1);
  const LayerInfo& got = r.layers[0];
  CHECK(got.digest == snap.layer.digest);
  CHECK_FALSE(r.existed[0]);
  CHECK(got.role == "toolkit");
  CHECK(got.name == "snap");
  CHECK(got.parent == snap.layer.parent);
  CHECK(got.stack == snap.layer.stack);
  CHECK(got.size == snap.layer.size);
  CHECK(got.inodes == snap.layer.inodes);
  CHECK(b.store->find(got.digest)->stack == snap.layer.stack);
  // Neither the parent nor the stack's layer is here.
  CHECK(r.missing == std::vector<std::string>{snap.base.digest});

  // The kernel's view of the imported layer is the source tree, entry by entry.
  std::string mnt = b.mount(got.digest);
  CHECK(compare_trees(src, mnt) > 2000);
  CHECK(::system((fsck_cmd(b, *b.store->find(got.digest)) + " >/dev/null 2>&1").c_str()) == 0);

  // Once the base is imported too, nothing is missing; importing again finds the layer.
  std::string base_file = a.tmp / "base.tar";
  export_to(a, snap.base.digest, base_file);
  CHECK(b.store->import(base_file, {}).missing.empty());
  ImportResult again = b.store->import(file, {});
  CHECK(again.existed[0]);
  CHECK(again.missing.empty());
  CHECK(again.layers[0].digest == got.digest);
  a.release();
  b.release();
  CHECK(a.erofs_mounts() + b.erofs_mounts() == 0);
}

TEST_CASE("layer export: a caller's role wins, a different parent is refused, a taken name stays", "[erofs][export]") {
  Store a, b;
  std::string src = a.tmp / "src";
  sys::mkdir_p(src, 0755);
  write_file(src + "/f", random_bytes(5000, 1));
  Snapshot snap = import_snapshot(a, a.tmp.path, src);
  const std::string file = a.tmp / "snap.tar";
  export_to(a, snap.layer.digest, file);

  std::string other = b.tmp / "other";
  sys::mkdir_p(other, 0755);
  write_file(other + "/o", "o");
  ImportOptions named;
  named.name = "snap";
  LayerInfo taken = b.import(other, nullptr, named);  // "snap" names another layer here

  ImportOptions wrong_parent;
  wrong_parent.parent = taken.digest;
  Error e = expect_error([&] { b.store->import(file, wrong_parent); });
  CHECK(e.code() == Code::kInvalidArgument);
  CHECK_THAT(e.what(), Catch::Contains("parent"));

  ImportOptions role;
  role.role = "workspace";
  ImportResult r = b.store->import(file, role);
  CHECK(r.layers[0].digest == snap.layer.digest);
  CHECK(r.layers[0].role == "workspace");
  CHECK(r.layers[0].name.empty());
  CHECK(b.store->resolve("snap") == taken.digest);
}

TEST_CASE("layer export: an altered or damaged file is refused and adds nothing", "[erofs][export]") {
  Store a;
  std::string src = a.tmp / "src";
  sys::mkdir_p(src + "/dir", 0755);
  const std::string marker = "MARKER-of-the-data-0123456789";
  write_file(src + "/dir/data", marker + random_bytes(100000, 2));
  write_file(src + "/small", "small");
  LayerInfo layer = a.import(src);
  const std::string file = a.tmp / "layer.tar", zst = a.tmp / "layer.tar.zst";
  export_to(a, layer.digest, file);
  export_to(a, layer.digest, zst);
  const std::string bytes = slurp_file(file), zbytes = slurp_file(zst);

  struct Case {
    std::string name, content, message;
  };
  std::vector<Case> cases;
  {
    std::string flipped = bytes;
    size_t at = flipped.find(marker);
    REQUIRE(at != std::string::npos);
    flipped[at + 3] ^= 0x20;
    cases.push_back({"a data byte flipped", flipped, "sha256:" + layer.digest});
  }
  {
    std::string edited = bytes;
    size_t at = edited.find(layer.digest);
    REQUIRE(at != std::string::npos);
    edited[at] = edited[at] == '0' ? '1' : '0';
    cases.push_back({"the header's digest edited", edited, "sha256:" + layer.digest});
  }
  cases.push_back({"cut at the end-of-archive marker", bytes.substr(0, bytes.size() - 1024), "truncated"});
  cases.push_back({"cut in the middle of the data", bytes.substr(0, bytes.size() / 2), "truncated"});
  cases.push_back({"cut inside the header", bytes.substr(0, 300), "truncated"});
  cases.push_back({"zstd stream cut", zbytes.substr(0, zbytes.size() - 20), ""});

  for (const auto& c : cases) {
    INFO(c.name);
    Store b;
    const std::string bad = b.tmp / "bad.tar";
    write_file(bad, c.content);
    Error e = expect_error([&] { b.store->import(bad, {}); });
    CHECK(e.code() == Code::kDataLoss);
    CHECK_THAT(e.what(), Catch::Contains(c.message));
    if (c.name.find("digest") != std::string::npos || c.name.find("flipped") != std::string::npos) {
      // Both digests are named: what the content has and what the header says.
      std::string what = e.what();
      size_t first = what.find("sha256:"), second = what.find("sha256:", first + 1);
      CHECK(second != std::string::npos);
    }
    expect_store_empty(b);
  }
}

TEST_CASE("layer export: the header is checked as untrusted input", "[erofs][export]") {
  Store b;
  auto write_tar = [&](const std::string& path, const std::string& format, const std::string& layer_json) {
    // A tar with a global header, made by Python's tarfile (another writer than ours).
    write_file(b.tmp / "make.py",
               "import io, sys, tarfile\n"
               "fmt, js = open(sys.argv[2]).read().split('\\n', 1)\n"
               "t = tarfile.open(sys.argv[1], 'w', format=tarfile.PAX_FORMAT,\n"
               "                 pax_headers={'SANDLET.format': fmt, 'SANDLET.layer': js})\n"
               "i = tarfile.TarInfo('f'); i.size = 1; t.addfile(i, io.BytesIO(b'x')); t.close()\n");
    write_file(b.tmp / "args", format + "\n" + layer_json);
    sh("python3 " + (b.tmp / "make.py") + " " + path + " " + (b.tmp / "args"));
  };
  const std::string file = b.tmp / "x.tar";
  const std::string digest(64, 'a');
  auto layer_json = [&](const std::string& extra) {
    return "{\"digest\":\"" + digest + "\",\"role\":\"base\",\"name\":\"\",\"parent\":\"\",\"source\":\"s\"" + extra + "}";
  };

  write_tar(file, "2", layer_json(""));
  CHECK(expect_error([&] { b.store->import(file, {}); }).code() == Code::kUnimplemented);
  write_tar(file, "1", layer_json(",\"stack\":[\"../relative\"]"));
  CHECK(expect_error([&] { b.store->import(file, {}); }).code() == Code::kInvalidArgument);
  // A host directory in an imported stack would be stacked into sandboxes restored from it: refused.
  write_tar(file, "1", layer_json(",\"stack\":[\"/root\"]"));
  Error host = expect_error([&] { b.store->import(file, {}); });
  CHECK(host.code() == Code::kInvalidArgument);
  CHECK(std::string(host.what()).find("host directory") != std::string::npos);
  write_tar(file, "1", layer_json(",\"pad\":\"" + std::string(300 << 10, 'p') + "\""));
  Error big = expect_error([&] { b.store->import(file, {}); });
  CHECK(big.code() == Code::kInvalidArgument);
  CHECK_THAT(big.what(), Catch::Contains("256 KiB"));
  write_tar(file, "1", "{\"digest\":\"nothex\"}");
  CHECK(expect_error([&] { b.store->import(file, {}); }).code() == Code::kInvalidArgument);
  // Well-formed, but the content is not what the digest says.
  write_tar(file, "1", layer_json(""));
  Error e = expect_error([&] { b.store->import(file, {}); });
  CHECK(e.code() == Code::kDataLoss);
  CHECK_THAT(e.what(), Catch::Contains("sha256:" + digest));
  expect_store_empty(b);
}

TEST_CASE("layer export: a failed export leaves no file", "[erofs][export]") {
  Store a;
  std::string src = a.tmp / "src";
  sys::mkdir_p(src, 0755);
  write_file(src + "/f", "f");
  LayerInfo layer = a.import(src);
  const std::string out = a.tmp / "out";
  sys::mkdir_p(out, 0755);
  CHECK(expect_error([&] { export_to(a, "no-such-layer", out + "/x.tar"); }).code() == Code::kNotFound);
  // The mount goes away under the export: an error, and neither the file nor its temporary.
  Error e = expect_error([&] {
    a.store->export_layer(layer.digest, out + "/x.tar", {}, [&](const std::string&) { return a.tmp / "gone"; });
  });
  CHECK_THAT(e.what(), Catch::Contains(layer.digest));
  ExportOptions bad_level;
  bad_level.zstd_level = 99;
  CHECK(expect_error([&] {
          a.store->export_layer(layer.digest, out + "/x.tar.zst", bad_level, [&](const std::string& d) { return a.mount(d); });
        }).code() == Code::kInvalidArgument);
  CHECK(sys::list_dir(out).empty());
}
