// Unit tests for src/image/oci (OCI image layouts and docker save directories) and tar_extract.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "image/oci.hpp"
#include "image/sha256.hpp"
#include "image/tar_extract.hpp"
#include "sys/fs_util.hpp"
#include "oci_blobs.hpp"
#include "unit_helpers.hpp"

using namespace sandlet;
using namespace sandlet::image;
namespace json = boost::json;

using unit::expect_error;
using unit::sh;
using unit::write_file;

namespace {

// A temp dir named after these tests.
struct TempDir : unit::TempDir {
  TempDir() : unit::TempDir("oci") {}
};

std::string file_hex(const std::string& path) { return to_hex(sha256_file(path)); }

#if defined(__aarch64__)
const char* kArch = "arm64";
const char* kOtherArch = "amd64";
#else
const char* kArch = "amd64";
const char* kOtherArch = "arm64";
#endif

constexpr const char* kGzipLayer = "application/vnd.oci.image.layer.v1.tar+gzip";

// Writes an OCI layout by hand: two gzip layers made with GNU tar, config, manifest, index.
struct Layout : unit::OciBlobs {
  std::vector<std::string> layer_hex, diff_hex;
  std::string config_hex, manifest_hex;
  int64_t manifest_size = 0;

  explicit Layout(const std::string& root) : unit::OciBlobs{root + "/layout"} {
    sys::mkdir_p(dir + "/blobs/sha256");
    for (int i = 0; i < 2; ++i) {
      std::string src = root + "/layer" + std::to_string(i);
      sys::mkdir_p(src + "/etc");
      write_file(src + "/etc/file" + std::to_string(i), "layer " + std::to_string(i));
      std::string tar = root + "/layer" + std::to_string(i) + ".tar";
      sh("cd " + src + " && tar --format=pax -cf " + tar + " . && gzip -n -k " + tar);
      diff_hex.push_back(file_hex(tar));
      layer_hex.push_back(add_blob_file(tar + ".gz"));
    }
    json::object config{
        {"architecture", kArch},
        {"os", "linux"},
        {"config", {{"Env", {"PATH=/usr/bin:/bin", "LANG=C.UTF-8"}}, {"WorkingDir", "/srv"}, {"User", "1000:1000"},
                    {"Cmd", {"-c", "echo hi"}}, {"Entrypoint", {"/bin/sh"}}}},
        {"rootfs", {{"type", "layers"}, {"diff_ids", {"sha256:" + diff_hex[0], "sha256:" + diff_hex[1]}}}}};
    config_hex = add_blob(json::serialize(config));
    write_manifest(kGzipLayer);
    write_file(dir + "/oci-layout", R"({"imageLayoutVersion":"1.0.0"})");
    write_index(json::array{index_entry("application/vnd.oci.image.manifest.v1+json", manifest_hex)});
  }

  void write_manifest(const std::string& layer_media_type, const std::string& annotation = "0") {
    json::object m{{"schemaVersion", 2},
                   {"mediaType", "application/vnd.oci.image.manifest.v1+json"},
                   {"config", descriptor("application/vnd.oci.image.config.v1+json", config_hex)},
                   {"layers", {descriptor(layer_media_type, layer_hex[0]), descriptor(layer_media_type, layer_hex[1])}},
                   {"annotations", {{"test", annotation}}}};
    manifest_hex = add_blob(json::serialize(m));
  }
  json::object index_entry(const std::string& media_type, const std::string& hex, const char* arch = nullptr) const {
    json::object d = descriptor(media_type, hex);
    if (arch) d["platform"] = {{"os", "linux"}, {"architecture", arch}};
    return d;
  }
  void write_index(json::array manifests) const {
    write_file(dir + "/index.json", json::serialize(json::object{{"schemaVersion", 2}, {"manifests", manifests}}));
  }
};

void check_image(const OciImage& img, const Layout& l) {
  REQUIRE(img.layers.size() == 2);
  for (size_t i = 0; i < 2; ++i) {
    CHECK(img.layers[i].blob_path == l.dir + "/blobs/sha256/" + l.layer_hex[i]);
    CHECK(img.layers[i].digest == "sha256:" + l.layer_hex[i]);
    CHECK(img.layers[i].diff_id == "sha256:" + l.diff_hex[i]);
    CHECK(img.layers[i].media_type == kGzipLayer);
    CHECK(img.layers[i].compression == Compression::kGzip);
  }
  CHECK(img.env == std::vector<std::string>{"PATH=/usr/bin:/bin", "LANG=C.UTF-8"});
  CHECK(img.workdir == "/srv");
  CHECK(img.user == "1000:1000");
  CHECK(img.cmd == std::vector<std::string>{"-c", "echo hi"});
  CHECK(img.entrypoint == std::vector<std::string>{"/bin/sh"});
}

}  // namespace

TEST_CASE("oci: an OCI image layout is read back", "[oci]") {
  TempDir t;
  Layout l(t.path);

  SECTION("index.json -> manifest") {
    check_image(read_oci_layout(l.dir), l);
    check_image(read_image_dir(l.dir), l);
  }
  SECTION("a nested image index: the entry for this architecture") {
    json::object nested{{"schemaVersion", 2},
                        {"mediaType", "application/vnd.oci.image.index.v1+json"},
                        {"manifests",
                         {l.index_entry("application/vnd.oci.image.manifest.v1+json", l.config_hex, kOtherArch),
                          l.index_entry("application/vnd.oci.image.manifest.v1+json", l.manifest_hex, kArch)}}};
    std::string nested_hex = l.add_blob(json::serialize(nested));
    l.write_index(json::array{l.index_entry("application/vnd.oci.image.index.v1+json", nested_hex)});
    check_image(read_oci_layout(l.dir), l);
  }
  SECTION("several entries in index.json: the one for this architecture") {
    l.write_index(json::array{l.index_entry("application/vnd.oci.image.manifest.v1+json", l.config_hex, kOtherArch),
                              l.index_entry("application/vnd.oci.image.manifest.v1+json", l.manifest_hex, kArch)});
    check_image(read_oci_layout(l.dir), l);
    l.write_index(json::array{l.index_entry("application/vnd.oci.image.manifest.v1+json", l.config_hex, kOtherArch),
                              l.index_entry("application/vnd.oci.image.manifest.v1+json", l.config_hex, kOtherArch)});
    Error e = expect_error([&] { read_oci_layout(l.dir); });
    CHECK(e.code() == Code::kNotFound);
    CHECK_THAT(e.what(), Catch::Contains("index.json: field 'manifests'"));
  }
}

TEST_CASE("oci: bad layouts are refused naming the file and the field", "[oci]") {
  TempDir t;
  Layout l(t.path);
  const std::string manifest_type = "application/vnd.oci.image.manifest.v1+json";

  SECTION("a manifest blob that does not match its digest") {
    std::string path = l.dir + "/blobs/sha256/" + l.manifest_hex;
    std::string m = sys::read_file(path);
    auto pos = m.find("\"test\":\"0\"");
    REQUIRE(pos != std::string::npos);
    m[pos + 8] = '1';  // same size, other content
    write_file(path, m);
    Error e = expect_error([&] { read_oci_layout(l.dir); });
    CHECK(e.code() == Code::kDataLoss);
    CHECK_THAT(e.what(), Catch::Contains(path) && Catch::Contains("sha256 mismatch") &&
                             Catch::Contains("manifests[0].digest"));
  }
  SECTION("a size that does not match the descriptor") {
    std::string path = l.dir + "/blobs/sha256/" + l.config_hex;
    write_file(path, sys::read_file(path) + " ");
    CHECK(expect_error([&] { read_oci_layout(l.dir); }).code() == Code::kDataLoss);
  }
  SECTION("digest syntax and algorithms") {
    std::string upper = l.manifest_hex;
    for (auto& c : upper) c = static_cast<char>(std::toupper(c));
    json::object d = l.index_entry(manifest_type, l.manifest_hex);
    d["digest"] = "sha256:" + upper;
    l.write_index(json::array{d});
    Error e = expect_error([&] { read_oci_layout(l.dir); });
    CHECK(e.code() == Code::kInvalidArgument);
    CHECK_THAT(e.what(), Catch::Contains(l.dir + "/index.json: field 'manifests[0].digest'"));
    d["digest"] = "sha512:" + std::string(128, 'a');
    l.write_index(json::array{d});
    CHECK(expect_error([&] { read_oci_layout(l.dir); }).code() == Code::kUnimplemented);
  }
  SECTION("an unknown layer media type") {
    l.write_manifest("application/vnd.example.layer");
    l.write_index(json::array{l.index_entry(manifest_type, l.manifest_hex)});
    Error e = expect_error([&] { read_oci_layout(l.dir); });
    CHECK(e.code() == Code::kUnimplemented);
    CHECK_THAT(e.what(), Catch::Contains("field 'layers[0].mediaType'"));
  }
  SECTION("a missing layer blob") {
    REQUIRE(::unlink((l.dir + "/blobs/sha256/" + l.layer_hex[1]).c_str()) == 0);
    Error e = expect_error([&] { read_oci_layout(l.dir); });
    CHECK(e.code() == Code::kNotFound);
    CHECK_THAT(e.what(), Catch::Contains(l.layer_hex[1]) && Catch::Contains("layers[1]"));
  }
  SECTION("layout version, JSON syntax, missing fields") {
    write_file(l.dir + "/oci-layout", R"({"imageLayoutVersion":"2.0.0"})");
    Error e = expect_error([&] { read_oci_layout(l.dir); });
    CHECK(e.code() == Code::kUnimplemented);
    CHECK_THAT(e.what(), Catch::Contains("oci-layout: field 'imageLayoutVersion'"));
    write_file(l.dir + "/oci-layout", R"({"imageLayoutVersion":"1.0.0"})");
    write_file(l.dir + "/index.json", "{\"schemaVersion\": 2, ");
    e = expect_error([&] { read_oci_layout(l.dir); });
    CHECK(e.code() == Code::kInvalidArgument);
    CHECK_THAT(e.what(), Catch::Contains("index.json: not valid JSON"));
    write_file(l.dir + "/index.json", R"({"schemaVersion": 2, "manifests": [{"digest": "sha256:00"}]})");
    e = expect_error([&] { read_oci_layout(l.dir); });
    CHECK_THAT(e.what(), Catch::Contains("index.json: field 'manifests[0].mediaType': missing"));
  }
  SECTION("neither format") {
    sys::mkdir_p(t / "empty");
    Error e = expect_error([&] { read_image_dir(t / "empty"); });
    CHECK(e.code() == Code::kInvalidArgument);
    CHECK_THAT(e.what(), Catch::Contains(t / "empty"));
  }
}

TEST_CASE("oci: docker save archives, extracted and read", "[oci]") {
  TempDir t;
  // A docker < 25 save: <config hex>.json, <layer id>/layer.tar, manifest.json.
  const std::string save = t / "save";
  std::vector<std::string> diff;
  for (int i = 0; i < 2; ++i) {
    std::string src = t / ("l" + std::to_string(i));
    sys::mkdir_p(src + "/bin");
    write_file(src + "/bin/tool" + std::to_string(i), "#!/bin/sh\n");
    std::string id = std::string(63, 'a') + std::to_string(i);
    sys::mkdir_p(save + "/" + id);
    sh("cd " + src + " && tar --format=pax -cf " + save + "/" + id + "/layer.tar .");
    diff.push_back(file_hex(save + "/" + id + "/layer.tar"));
  }
  json::object config{{"config", {{"Env", {"A=1"}}, {"Cmd", nullptr}, {"WorkingDir", ""}}},
                      {"rootfs", {{"type", "layers"}, {"diff_ids", {"sha256:" + diff[0], "sha256:" + diff[1]}}}}};
  write_file(save + "/config.tmp", json::serialize(config));
  const std::string config_hex = file_hex(save + "/config.tmp");
  REQUIRE(::rename((save + "/config.tmp").c_str(), (save + "/" + config_hex + ".json").c_str()) == 0);
  json::array manifest{{{"Config", config_hex + ".json"},
                        {"RepoTags", {"example:latest"}},
                        {"Layers", {std::string(63, 'a') + "0/layer.tar", std::string(63, 'a') + "1/layer.tar"}}}};
  write_file(save + "/manifest.json", json::serialize(manifest));
  sh("cd " + save + " && tar -cf ../save.tar .");

  const std::string out = t / "out";
  extract_tar_to_dir(t / "save.tar", out);
  struct stat st;
  REQUIRE(::stat((out + "/" + config_hex + ".json").c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0644);
  REQUIRE(::stat((out + "/" + std::string(63, 'a') + "0").c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0755);

  OciImage img = read_image_dir(out);
  REQUIRE(img.layers.size() == 2);
  for (size_t i = 0; i < 2; ++i) {
    CHECK(img.layers[i].blob_path == out + "/" + std::string(63, 'a') + std::to_string(i) + "/layer.tar");
    CHECK(img.layers[i].digest.empty());
    CHECK(img.layers[i].diff_id == "sha256:" + diff[i]);
    CHECK(img.layers[i].compression == Compression::kAuto);
    CHECK(img.layers[i].media_type.empty());
    CHECK(file_hex(img.layers[i].blob_path) == diff[i]);
  }
  CHECK(img.env == std::vector<std::string>{"A=1"});
  CHECK(img.cmd.empty());
  CHECK(img.entrypoint.empty());
  CHECK(img.workdir.empty());

  SECTION("docker >= 25 layout: layers under blobs/sha256 get their digest") {
    sys::mkdir_p(out + "/blobs/sha256");
    json::array layers;
    for (int i = 0; i < 2; ++i) {
      std::string rel = "blobs/sha256/" + diff[i];
      REQUIRE(::rename((out + "/" + std::string(63, 'a') + std::to_string(i) + "/layer.tar").c_str(),
                       (out + "/" + rel).c_str()) == 0);
      layers.push_back(json::value(rel));
    }
    REQUIRE(::rename((out + "/" + config_hex + ".json").c_str(), (out + "/blobs/sha256/" + config_hex).c_str()) == 0);
    json::array m{{{"Config", "blobs/sha256/" + config_hex}, {"Layers", layers}}};
    write_file(out + "/manifest.json", json::serialize(m));
    OciImage img2 = read_docker_save(out);
    REQUIRE(img2.layers.size() == 2);
    CHECK(img2.layers[1].digest == "sha256:" + diff[1]);
    CHECK(img2.layers[1].blob_path == out + "/blobs/sha256/" + diff[1]);
  }
  SECTION("a config that does not match its name") {
    write_file(out + "/" + config_hex + ".json", json::serialize(config) + " ");
    Error e = expect_error([&] { read_docker_save(out); });
    CHECK(e.code() == Code::kDataLoss);
    CHECK_THAT(e.what(), Catch::Contains("manifest.json field '[0].Config'"));
  }
  SECTION("paths leaving the directory, several images") {
    json::array m{{{"Config", "../x.json"}, {"Layers", json::array{}}}};
    write_file(out + "/manifest.json", json::serialize(m));
    Error e = expect_error([&] { read_docker_save(out); });
    CHECK(e.code() == Code::kInvalidArgument);
    CHECK_THAT(e.what(), Catch::Contains("field '[0].Config'"));
    m.push_back(m[0]);
    write_file(out + "/manifest.json", json::serialize(m));
    CHECK_THAT(expect_error([&] { read_docker_save(out); }).what(), Catch::Contains("holds 2 images"));
  }
  SECTION("diff_ids must match the layers") {
    json::array m{{{"Config", config_hex + ".json"}, {"Layers", {std::string(63, 'a') + "0/layer.tar"}}}};
    write_file(out + "/manifest.json", json::serialize(m));
    Error e = expect_error([&] { read_docker_save(out); });
    CHECK(e.code() == Code::kInvalidArgument);
    CHECK_THAT(e.what(), Catch::Contains("field 'rootfs.diff_ids'"));
  }
}

TEST_CASE("tar_extract: links, devices and escapes are refused", "[oci]") {
  TempDir t;
  sys::mkdir_p(t / "src/d");
  write_file(t / "src/d/f", "x");
  REQUIRE(::symlink("f", (t / "src/d/s").c_str()) == 0);
  sh("cd " + t.path + "/src && tar -cf ../links.tar d && tar -cf ../plain.tar d/f");

  Error e = expect_error([&] { extract_tar_to_dir(t / "links.tar", t / "out1"); });
  CHECK(e.code() == Code::kInvalidArgument);
  CHECK_THAT(e.what(), Catch::Contains("links.tar: tar member 'd/s'"));

  // A symlink already in the destination is never followed.
  sys::mkdir_p(t / "out2");
  sys::mkdir_p(t / "outside");
  REQUIRE(::symlink((t / "outside").c_str(), (t / "out2/d").c_str()) == 0);
  e = expect_error([&] { extract_tar_to_dir(t / "plain.tar", t / "out2"); });
  CHECK(e.code() == Code::kInvalidArgument);
  CHECK_THAT(e.what(), Catch::Contains(t / "out2/d") && Catch::Contains("symlinks are not followed"));
  CHECK(::access((t / "outside/f").c_str(), F_OK) != 0);
}
