// Unit tests for the spec's `policy` file rules and `toolkit` (src/spec/spec_policy.cpp, spec.cpp) and their
// wire form (proto InitConfig).
#include <catch2/catch.hpp>

#include <functional>
#include <string>

#include "common/error.hpp"
#include "proto/init_protocol.hpp"
#include "spec/spec.hpp"
#include "unit_helpers.hpp"

using namespace sandlet;
using unit::expect_error;

namespace {

std::string message_of(const std::function<void()>& fn) { return expect_error(fn).what(); }

}  // namespace

TEST_CASE("policy: file rules and the kernel-file masks parse and round-trip", "[spec][policy]") {
  const Spec s = parse_spec_json(R"({"policy": {"files": [
      {"path": "/usr", "access": "read-only"},
      {"path": "/usr/local", "access": "writable"},
      {"access": "hidden", "path": "/root/answers"}], "mask_kernel_files": false},
      "toolkit": "/opt/tk"})");
  REQUIRE(s.policy.files.size() == 3);
  CHECK(s.policy.files[0] == FileRule{"/usr", FileAccess::kReadOnly});
  CHECK(s.policy.files[1] == FileRule{"/usr/local", FileAccess::kWritable});
  CHECK(s.policy.files[2] == FileRule{"/root/answers", FileAccess::kHidden});
  CHECK_FALSE(s.policy.mask_kernel_files);
  CHECK(s.toolkit == "/opt/tk");
  const Spec back = parse_spec_json(spec_to_json(s));
  CHECK(back.policy.files == s.policy.files);
  CHECK(back.policy.mask_kernel_files == false);
  CHECK(back.toolkit == "/opt/tk");
  CHECK(spec_to_json(back) == spec_to_json(s));
}

TEST_CASE("policy: defaults mask kernel files, no rules, no toolkit", "[spec][policy]") {
  const Spec s = parse_spec_json("{}");
  CHECK(s.policy.mask_kernel_files);
  CHECK(s.policy.files.empty());
  CHECK(s.toolkit.empty());
  CHECK(parse_spec_json(spec_to_json(s)).policy.mask_kernel_files);
  // A store layer as the toolkit.
  CHECK(parse_spec_json(R"({"toolkit": "my-tools"})").toolkit == "my-tools");
}

TEST_CASE("policy: bad rules name the field", "[spec][policy]") {
  auto msg = [](const std::string& json) { return message_of([&] { parse_spec_json(json); }); };
  const std::string ok = R"({"path": "/a", "access": "read-only"}, {"path": "/b", "access": "hidden"}, )";
  CHECK_THAT(msg(R"({"policy": {"files": [)" + ok + R"({"path": "/c", "access": "rw"}]}})"),
             Catch::Contains("policy.files[2].access") && Catch::Contains("\"read-only\", \"hidden\" or \"writable\""));
  CHECK_THAT(msg(R"({"policy": {"files": [)" + ok + R"({"path": "c", "access": "hidden"}]}})"),
             Catch::Contains("policy.files[2].path"));
  CHECK_THAT(msg(R"({"policy": {"files": [{"path": "/a/../b", "access": "hidden"}]}})"),
             Catch::Contains("policy.files[0].path") && Catch::Contains("normalized"));
  CHECK_THAT(msg(R"({"policy": {"files": [{"path": "/a/", "access": "hidden"}]}})"), Catch::Contains("ends in '/'"));
  CHECK_THAT(msg(R"({"policy": {"files": [{"path": "/", "access": "hidden"}]}})"),
             Catch::Contains("policy.files[0].access") && Catch::Contains("cannot be hidden"));
  CHECK_THAT(msg(R"({"policy": {"files": [{"path": "/proc/kcore", "access": "writable"}]}})"),
             Catch::Contains("policy.files[0].path") && Catch::Contains("/proc"));
  CHECK_THAT(msg(R"({"policy": {"files": [{"path": "/.sandlet/toolkit", "access": "writable"}]}})"),
             Catch::Contains("/.sandlet"));
  CHECK_THAT(msg(R"({"policy": {"files": [)" + ok + R"({"path": "/a", "access": "writable"}]}})"),
             Catch::Contains("policy.files[2].path") && Catch::Contains("policy.files[0]"));
  CHECK_THAT(msg(R"({"policy": {"files": [{"path": "/a"}]}})"), Catch::Contains("policy.files[0].access") &&
                                                                  Catch::Contains("required"));
  CHECK_THAT(msg(R"({"policy": {"files": [{"access": "hidden"}]}})"), Catch::Contains("policy.files[0].path"));
  CHECK_THAT(msg(R"({"policy": {"files": [{"path": "/a", "access": "hidden", "x": 1}]}})"),
             Catch::Contains("policy.files[0].x") && Catch::Contains("unknown field"));
  CHECK_THAT(msg(R"({"policy": {"files": ["/a"]}})"), Catch::Contains("policy.files[0]"));
  CHECK_THAT(msg(R"({"policy": {"files": {}}})"), Catch::Contains("policy.files"));
  CHECK_THAT(msg(R"({"policy": {"mask_kernel_files": 1}})"), Catch::Contains("policy.mask_kernel_files"));
  CHECK_THAT(msg(R"({"policy": {"nope": 1}})"), Catch::Contains("policy.nope") && Catch::Contains("unknown field"));
  CHECK_THAT(msg(R"({"policy": []})"), Catch::Contains("policy"));
  CHECK_THAT(msg(R"({"toolkit": "not a ref!"})"), Catch::Contains("toolkit"));
  CHECK_THAT(msg(R"({"toolkit": 3})"), Catch::Contains("toolkit"));
}

TEST_CASE("policy: at most 64 rules", "[spec][policy]") {
  std::string rules;
  for (int i = 0; i < 65; ++i) rules += std::string(i ? "," : "") + R"({"path": "/r)" + std::to_string(i) + R"(", "access": "hidden"})";
  CHECK_THAT(message_of([&] { parse_spec_json(R"({"policy": {"files": [)" + rules + "]}}"); }),
             Catch::Contains("policy.files") && Catch::Contains("at most 64"));
  Policy p;
  for (int i = 0; i < 64; ++i) policy_add_file_rule(p, "/r" + std::to_string(i), FileAccess::kReadOnly);
  CHECK(p.files.size() == 64);
}

TEST_CASE("policy: validate_spec checks a directly filled policy and toolkit", "[spec][policy]") {
  Spec s;
  s.layers = {SANDLET_TEST_ROOTFS};
  s.policy.files = {{"/a", FileAccess::kReadOnly}, {"/a", FileAccess::kHidden}};
  CHECK_THAT(message_of([&] { validate_spec(s); }), Catch::Contains("policy.files[1].path"));
  s.policy.files = {{"/a", FileAccess::kReadOnly}};
  s.toolkit = "/nonexistent/toolkit/dir";
  CHECK_THAT(message_of([&] { validate_spec(s); }), Catch::Contains("'toolkit'"));
  s.toolkit = SANDLET_TEST_ROOTFS;
  validate_spec(s);
}

TEST_CASE("policy: file rules cross the init protocol", "[spec][policy][proto]") {
  proto::InitConfig c;
  c.flags = proto::kInitHasFileRules | proto::kInitMaskKernelFiles | proto::kInitHasToolkit;
  c.file_rules = {{"/usr", proto::FileRuleAccess::kReadOnly}, {"/secret", proto::FileRuleAccess::kHidden}};
  proto::InitConfig d;
  REQUIRE(proto::InitConfig::decode(c.encode(), &d));
  REQUIRE(d.file_rules.size() == 2);
  CHECK(d.file_rules[1].path == "/secret");
  CHECK(d.file_rules[1].access == proto::FileRuleAccess::kHidden);
  // A bad access value or a relative path is refused.
  c.file_rules[0].access = static_cast<proto::FileRuleAccess>(7);
  CHECK_FALSE(proto::InitConfig::decode(c.encode(), &d));
  c.file_rules[0] = {"usr", proto::FileRuleAccess::kReadOnly};
  CHECK_FALSE(proto::InitConfig::decode(c.encode(), &d));
}
