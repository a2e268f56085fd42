// Unit tests for the spec's `mounts` (src/spec/spec_mounts.cpp) and their wire form (proto InitConfig).
#include <catch2/catch.hpp>

#include <cerrno>
#include <functional>
#include <string>

#include "common/error.hpp"
#include "guest/frame_parse.hpp"
#include "proto/init_protocol.hpp"
#include "spec/spec.hpp"
#include "unit_helpers.hpp"

using namespace sandlet;
using unit::expect_error;

namespace {

std::string message_of(const std::function<void()>& fn) { return expect_error(fn).what(); }

Spec with_layer() {
  Spec s;
  s.layers = {SANDLET_TEST_ROOTFS};
  return s;
}

}  // namespace

TEST_CASE("mounts: the object and the short form parse and round-trip", "[spec][mounts]") {
  const Spec s = parse_spec_json(R"({"mounts": [
      {"source": "/srv/data", "target": "/data"},
      {"source": "/srv/out", "target": "/out", "readonly": false},
      "/a:/mnt/a", "/b:/mnt/b:ro", "/c:/mnt/c:rw"]})");
  REQUIRE(s.mounts.size() == 5);
  CHECK(s.mounts[0] == Mount{"/srv/data", "/data", true});
  CHECK(s.mounts[1] == Mount{"/srv/out", "/out", false});
  CHECK(s.mounts[2] == Mount{"/a", "/mnt/a", true});
  CHECK(s.mounts[3] == Mount{"/b", "/mnt/b", true});
  CHECK(s.mounts[4] == Mount{"/c", "/mnt/c", false});
  const std::string text = spec_to_json(s);
  CHECK(text.find(R"({"source":"/srv/out","target":"/out","readonly":false})") != std::string::npos);
  CHECK(parse_spec_json(text).mounts == s.mounts);
}

TEST_CASE("mounts: bad entries are refused naming the field", "[spec][mounts]") {
  struct Case {
    const char* json;
    const char* field;
    const char* why;
  };
  const Case cases[] = {
      {R"({"mounts": {"source": "/a"}})", "'mounts'", "expected an array"},
      {R"({"mounts": [7]})", "'mounts[0]'", "expected \"SOURCE:TARGET[:ro|rw]\""},
      {R"({"mounts": [{"target": "/x"}]})", "'mounts[0].source'", "required"},
      {R"({"mounts": [{"source": "/x"}]})", "'mounts[0].target'", "required"},
      {R"({"mounts": [{"source": "/x", "target": "/y", "mode": "ro"}]})", "'mounts[0].mode'", "unknown field"},
      {R"({"mounts": [{"source": "/x", "target": "/y", "readonly": 1}]})", "'mounts[0].readonly'", "true or false"},
      {R"({"mounts": [{"source": "x", "target": "/y"}]})", "'mounts[0].source'", "absolute"},
      {R"({"mounts": [{"source": "", "target": "/y"}]})", "'mounts[0].source'", "empty"},
      {R"({"mounts": ["/x:/y", {"source": "/a/../b", "target": "/z"}]})", "'mounts[1].source'", "normalized"},
      {R"({"mounts": [{"source": "/a//b", "target": "/z"}]})", "'mounts[0].source'", "normalized"},
      {R"({"mounts": [{"source": "/a/", "target": "/z"}]})", "'mounts[0].source'", "ends in '/'"},
      {R"({"mounts": [{"source": "/a", "target": "/z/."}]})", "'mounts[0].target'", "normalized"},
      {R"({"mounts": [{"source": "/a", "target": "/"}]})", "'mounts[0].target'", "root filesystem"},
      {R"({"mounts": [{"source": "/a", "target": "/proc"}]})", "'mounts[0].target'", "in /proc"},
      {R"({"mounts": [{"source": "/a", "target": "/proc/sys/x"}]})", "'mounts[0].target'", "in /proc"},
      {R"({"mounts": [{"source": "/a", "target": "/dev/shm"}]})", "'mounts[0].target'", "in /dev"},
      {R"({"mounts": [{"source": "/a", "target": "/sys"}]})", "'mounts[0].target'", "in /sys"},
      {R"({"mounts": ["/a:/data", "/b:/data"]})", "'mounts[1].target'", "already the target of mounts[0]"},
      {R"({"mounts": ["/a:/data", "/b:/data/sub"]})", "'mounts[1].target'", "nest"},
      {R"({"mounts": ["/a:/data/sub", "/b:/data"]})", "'mounts[1].target'", "nest"},
      {R"({"mounts": ["/a"]})", "'mounts[0]'", "expected \"SOURCE:TARGET\""},
      {R"({"mounts": ["/a:/b:/c"]})", "'mounts[0]'", "object form"},
      {R"({"mounts": ["/a:/b:xx"]})", "'mounts[0]'", "object form"},
      {R"({"mounts": [":/b"]})", "'mounts[0].source'", "empty"},
  };
  for (const Case& c : cases) {
    INFO(c.json);
    const Error e = expect_error([&] { parse_spec_json(c.json); });
    CHECK(e.code() == Code::kInvalidArgument);
    CHECK_THAT(e.what(), Catch::Contains(c.field) && Catch::Contains(c.why));
  }
  // Prefix without a '/' boundary is not nesting.
  CHECK(parse_spec_json(R"({"mounts": ["/a:/data", "/b:/database"]})").mounts.size() == 2);
}

TEST_CASE("mounts: at most 64", "[spec][mounts]") {
  Spec s;
  for (int i = 0; i < 64; ++i) spec_add_mount(s, "/src", "/m" + std::to_string(i), i % 2 == 0);
  CHECK_THAT(message_of([&] { spec_add_mount(s, "/src", "/m64", true); }), Catch::Contains("at most 64"));
}

TEST_CASE("mounts: validate_spec checks each source on the host, with the errno", "[spec][mounts]") {
  unit::TempDir dir("spec-mounts");
  Spec s = with_layer();
  spec_add_mount(s, dir.path, "/data", true);
  validate_spec(s);

  spec_add_mount(s, dir.path + "/missing", "/data2", false);
  Error e = expect_error([&] { validate_spec(s); });
  CHECK(e.code() == Code::kInvalidArgument);
  CHECK(e.err_no() == ENOENT);
  CHECK_THAT(e.what(), Catch::Contains("'mounts[1].source'") && Catch::Contains("/missing") &&
                           Catch::Contains("No such file or directory") && Catch::Contains("errno 2"));

  Spec f = with_layer();
  unit::write_file(dir / "file", "");
  spec_add_mount(f, dir / "file", "/f", true);
  e = expect_error([&] { validate_spec(f); });
  CHECK(e.err_no() == ENOTDIR);
  CHECK_THAT(e.what(), Catch::Contains("'mounts[0].source'"));

  // A Spec filled in directly goes through the same checks.
  Spec direct = with_layer();
  direct.mounts = {{dir.path, "/a", true}, {dir.path, "/a/b", true}};
  CHECK_THAT(message_of([&] { validate_spec(direct); }), Catch::Contains("'mounts[1].target'"));
}

TEST_CASE("InitConfig carries mount targets and refuses bad ones", "[proto][mounts]") {
  proto::InitConfig cfg;
  cfg.flags = proto::kInitHasMounts;
  cfg.mounts = {{"/data", proto::kMountReadOnly}, {"/out", 0}};
  proto::InitConfig back;
  REQUIRE(proto::InitConfig::decode(cfg.encode(), &back));
  REQUIRE(back.mounts.size() == 2);
  CHECK(back.mounts[0].target == "/data");
  CHECK(back.mounts[0].flags == proto::kMountReadOnly);
  CHECK(back.mounts[1].target == "/out");

  auto refused = [](std::vector<proto::InitMount> mounts) {
    proto::InitConfig c;
    c.flags = proto::kInitHasMounts;
    c.mounts = std::move(mounts);
    proto::InitConfig out;
    return !proto::InitConfig::decode(c.encode(), &out);
  };
  CHECK(refused({}));                                         // the flag with no mount
  CHECK(refused({{"relative", 0}}));
  CHECK(refused({{"", 0}}));
  CHECK(refused({{std::string("/a\0b", 4), 0}}));             // a NUL would cut the path short
  CHECK(refused({{"/a", 2}}));                                // unknown flag
  CHECK(refused({{"/" + std::string(proto::kMaxMountTarget, 'a'), 0}}));
  CHECK(refused(std::vector<proto::InitMount>(proto::kMaxMounts + 1, {"/a", 0})));
  CHECK_FALSE(refused(std::vector<proto::InitMount>(proto::kMaxMounts, {"/a", 0})));
  // Mounts come with the configuration only, never with the stage.
  uint32_t flags = 0;
  CHECK_FALSE(sandlet::guest::decode_stage(proto::encode_u32(proto::kInitHasMounts), &flags));
  // The largest configuration still fits the frame table's cap.
  CHECK(proto::kMaxInitConfig > (16u << 20) + proto::kMaxMounts * proto::kMaxMountTarget);
}
