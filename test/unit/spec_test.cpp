// Unit tests for src/spec: parsing, serialisation, field validation, sizes, whole-spec checks.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "spec/spec.hpp"
#include "unit_helpers.hpp"

using namespace sandlet;

using unit::expect_error;

namespace {

bool same(const Spec& a, const Spec& b) {
  return a.backend == b.backend && a.layers == b.layers && a.environment == b.environment && a.env == b.env && a.workdir == b.workdir &&
         a.hostname == b.hostname && a.user == b.user && a.limits.cpus == b.limits.cpus &&
         a.limits.memory == b.limits.memory && a.limits.pids == b.limits.pids &&
         a.limits.disk == b.limits.disk && a.network == b.network && a.labels == b.labels &&
         a.lifetime == b.lifetime && a.max_lifetime_s == b.max_lifetime_s &&
         a.idle_timeout_s == b.idle_timeout_s && a.on_expiry == b.on_expiry && a.keep_s == b.keep_s &&
         a.accept_weaker == b.accept_weaker && a.mounts == b.mounts &&
         a.policy == b.policy;
}

// A temporary directory (removed at scope exit) where the tests make empty files.
struct TempDir : unit::TempDir {
  TempDir() : unit::TempDir("spec") {}
  std::string file(const std::string& name) {
    std::string p = *this / name;
    unit::write_file(p, "");
    return p;
  }
};

Spec full_spec() {
  Spec s;
  s.backend = "microvm";
  s.layers = {"/layers/base", "/layers/python 3.12", "/layers/app,with:odd=chars"};
  s.env = {{"PATH", "/usr/bin:/bin"}, {"LANG", "C.UTF-8"}, {"EMPTY", ""},
           {"WEIRD", "tab\tnewline\n\"quote\" \\ back \x01 ctl"},
           {"UNICODE", "h\xC3\xA9llo \xE2\x9C\x93 \xF0\x9F\x98\x80"}};
  s.workdir = "/home/user/work";
  s.hostname = "box-1.example";
  s.user = "1000:1000";
  s.limits.cpus = 0.01;
  s.limits.memory = (3ull << 30) / 2;
  s.limits.pids = 256;
  s.limits.disk = 1ull << 40;
  s.network = NetworkPolicy{};
  s.labels = {{"task", "t1"}, {"team/owner", "ml.infra"}, {"empty", ""}};
  s.lifetime = Lifetime::kDetached;
  s.max_lifetime_s = 0.1;
  s.idle_timeout_s = 12.25;
  s.on_expiry = OnExpiry::kKeep;
  s.keep_s = 90.5;
  s.mounts = {{"/data/set 1", "/data", true}, {"/home/me/cache", "/root/.cache", false}};
  return s;
}

}  // namespace

TEST_CASE("a full spec round-trips through JSON", "[spec]") {
  const Spec s = full_spec();
  const std::string text = spec_to_json(s);
  const Spec back = parse_spec_json(text);
  CHECK(same(s, back));
  CHECK(spec_to_json(back) == text);
}

TEST_CASE("the default spec round-trips and serialises every field", "[spec]") {
  const Spec s;
  const std::string text = spec_to_json(s);
  for (const char* field : {"\"backend\"", "\"layers\"", "\"env\"", "\"workdir\"", "\"hostname\"", "\"user\"",
                            "\"cpus\"", "\"memory\"", "\"pids\"", "\"disk\"", "\"network\"", "\"labels\"",
                            "\"lifetime\":\"owned\"", "\"max_lifetime_s\":86400", "\"idle_timeout_s\":0", "\"on_expiry\":\"destroy\"", "\"keep_s\":3600",
                            "\"mounts\":[]"}) {
    INFO(field);
    CHECK(text.find(field) != std::string::npos);
  }
  CHECK(text.find("\"disk\":2147483648") != std::string::npos);
  CHECK(same(parse_spec_json(text), s));
}

TEST_CASE("awkward doubles round-trip exactly", "[spec]") {
  for (double cpus : {0.0, 0.01, 0.1, 1.0 / 3.0, 1.5, 2.0, 1023.999999999, 1024.0}) {
    for (double lifetime : {1e-9, 0.3, 3600.0, 86400.5, 2592000.0}) {
      Spec s;
      spec_set_cpus(s, cpus);
      spec_set_max_lifetime(s, lifetime);
      spec_set_idle_timeout(s, lifetime);
      const Spec back = parse_spec_json(spec_to_json(s));
      INFO(spec_to_json(s));
      CHECK(back.limits.cpus == cpus);
      CHECK(back.max_lifetime_s == lifetime);
      CHECK(back.idle_timeout_s == lifetime);
    }
  }
}

TEST_CASE("random doubles round-trip exactly and numbers read naturally", "[spec]") {
  // Boost 1.81's own double parsing is off by an ulp for about 1 in 8 of these.
  std::mt19937_64 rng(42);
  std::uniform_real_distribution<double> cpus(0.01, 1024), seconds(1e-6, 2592000);
  for (int i = 0; i < 20000; ++i) {
    Spec s;
    spec_set_cpus(s, cpus(rng));
    spec_set_max_lifetime(s, seconds(rng));
    spec_set_idle_timeout(s, seconds(rng));
    const std::string text = spec_to_json(s);
    const Spec back = parse_spec_json(text);
    if (!same(back, s)) FAIL("does not round-trip: " << text);
  }
  Spec s;
  spec_set_cpus(s, 0.5);
  spec_set_max_lifetime(s, 3600);
  spec_set_idle_timeout(s, 1e-9);
  const std::string text = spec_to_json(s);
  CHECK_THAT(text, Catch::Contains("\"cpus\":0.5,"));
  CHECK_THAT(text, Catch::Contains("\"max_lifetime_s\":3600,"));
  CHECK_THAT(text, Catch::Contains("\"idle_timeout_s\":1e-09,"));
}

TEST_CASE("parsing a valid spec", "[spec]") {
  const Spec s = parse_spec_json(R"({
    "backend": "container",
    "layers": ["/a", "/b"],
    "env": {"K": "V", "EMPTY": ""},
    "workdir": "/w", "hostname": "h", "user": "nobody",
    "limits": {"cpus": 1, "memory": "512M", "pids": 256.0, "disk": 1048576},
    "network": "none",
    "labels": {"task": "t1"},
    "lifetime": "detached", "max_lifetime_s": 3600, "idle_timeout_s": 0.5 })");
  CHECK(s.backend == "container");
  CHECK(s.layers == std::vector<std::string>{"/a", "/b"});
  CHECK(s.env.at("K") == "V");
  CHECK(s.env.at("EMPTY").empty());
  CHECK(s.workdir == "/w");
  CHECK(s.hostname == "h");
  CHECK(s.user == "nobody");
  CHECK(s.limits.cpus == 1.0);
  CHECK(s.limits.memory == 512ull << 20);
  CHECK(s.limits.pids == 256);
  CHECK(s.limits.disk == 1048576);
  CHECK(s.labels.at("task") == "t1");
  CHECK(s.lifetime == Lifetime::kDetached);
  CHECK(s.max_lifetime_s == 3600);
  CHECK(s.idle_timeout_s == 0.5);

  const Spec empty = parse_spec_json("{}");
  CHECK(same(empty, Spec{}));
  const Spec partial_limits = parse_spec_json(R"({"limits": {"memory": 0}})");
  CHECK(partial_limits.limits.memory == 0);
  CHECK(partial_limits.limits.pids == Limits{}.pids);
  CHECK(parse_spec_json(R"({"limits": {"memory": "4MiB"}})").limits.memory == 4ull << 20);
  CHECK(parse_spec_json(R"({"limits": {"memory": 4194304.0}})").limits.memory == 4ull << 20);
  CHECK(parse_spec_json(R"({"limits": {"memory": "0"}})").limits.memory == 0);
  CHECK(parse_spec_json(R"({"limits": {"disk": "1T"}})").limits.disk == 1ull << 40);
  CHECK(parse_spec_json(R"({"limits": {"pids": 4194304}})").limits.pids == 4194304);
  CHECK(parse_spec_json(R"({"user": "65535:0"})").user == "65535:0");
  CHECK(parse_spec_json(R"({"user": "_svc-1"})").user == "_svc-1");
  CHECK(parse_spec_json(R"({"hostname": "a.b-c.d1"})").hostname == "a.b-c.d1");
  CHECK(parse_spec_json(R"({"labels": {"a.b/c_d-E9": "x"}})").labels.size() == 1);
  CHECK(parse_spec_json(R"({"idle_timeout_s": 2592000})").idle_timeout_s == 2592000);
  CHECK(parse_spec_json(R"({"idle_timeout_s": 1e-400})").idle_timeout_s > 0);  // not "none"
}

TEST_CASE("invalid fields are rejected with INVALID_ARGUMENT naming the field", "[spec]") {
  const std::string huge_value(128 * 1024 + 1, 'x');
  const std::string long_key(4097, 'K');
  std::string many_labels = R"({"labels":{)";
  for (int i = 0; i < 65; ++i) many_labels += (i ? "," : "") + std::string("\"k") + std::to_string(i) + "\":\"v\"";
  many_labels += "}}";

  struct Case {
    std::string json;
    std::string field;
  };
  const std::vector<Case> cases = {
      // unknown fields
      {R"({"lables": {}})", "lables"},
      {R"({"limits": {"gpu": 1}})", "limits.gpu"},
      {R"({"limits": []})", "limits"},
      // duplicates
      {R"({"network": "host", "network": "none"})", "network"},
      {R"({"env": {"A": "1", "A": "2"}})", "env.A"},
      // backend
      {R"({"backend": "Docker!"})", "backend"},
      // on expiry
      {R"({"on_expiry": "archive"})", "on_expiry"},
      {R"({"on_expiry": 1})", "on_expiry"},
      {R"({"keep_s": 0})", "keep_s"},
      {R"({"keep_s": 2592001})", "keep_s"},
      {R"({"backend": ""})", "backend"},
      {R"({"backend": 1})", "backend"},
      // layers
      {R"({"layers": "/a"})", "layers"},
      {R"({"layers": ["/a", "/b", "../relative"]})", "layers[2]"},
      {R"({"layers": ["/a", ""]})", "layers[1]"},
      {R"({"layers": [1]})", "layers[0]"},
      {R"({"layers": ["/a\u0000b"]})", "layers[0]"},
      // env
      {R"({"env": []})", "env"},
      {R"({"env": {"": "v"}})", "env"},
      {R"({"env": {"A=B": "v"}})", "env"},
      {R"({"env": {"A\u0000": "v"}})", "env"},
      {R"({"env": {")" + long_key + R"(": "v"}})", "env"},
      {R"({"env": {"A": 1}})", "env.A"},
      {R"({"env": {"A": "x\u0000y"}})", "env.A"},
      {R"({"env": {"A": ")" + huge_value + R"("}})", "env.A"},
      // workdir
      {R"({"workdir": "relative/dir"})", "workdir"},
      {R"({"workdir": ""})", "workdir"},
      {R"({"workdir": null})", "workdir"},
      // hostname
      {R"({"hostname": ""})", "hostname"},
      {R"({"hostname": "-bad"})", "hostname"},
      {R"({"hostname": "bad-"})", "hostname"},
      {R"({"hostname": "a..b"})", "hostname"},
      {R"({"hostname": ".a"})", "hostname"},
      {R"({"hostname": "under_score"})", "hostname"},
      {R"({"hostname": "sp ace"})", "hostname"},
      {R"({"hostname": ")" + std::string(65, 'a') + R"("})", "hostname"},
      {R"({"hostname": ")" + std::string(64, 'a') + R"("})", "hostname"},  // one label > 63
      // user
      {R"({"user": "70000"})", "user"},
      {R"({"user": "0:65536"})", "user"},
      {R"({"user": "99999999999999999999999"})", "user"},
      {R"({"user": "1000:"})", "user"},
      {R"({"user": ":1000"})", "user"},
      {R"({"user": "Root"})", "user"},
      {R"({"user": "root:root"})", "user"},
      {R"({"user": "1abc"})", "user"},
      {R"({"user": ")" + std::string(33, 'a') + R"("})", "user"},
      {R"({"user": 0})", "user"},
      // cpus
      {R"({"limits": {"cpus": -1}})", "limits.cpus"},
      {R"({"limits": {"cpus": 0.001}})", "limits.cpus"},
      {R"({"limits": {"cpus": 1025}})", "limits.cpus"},
      {R"({"limits": {"cpus": 1e400}})", "limits.cpus"},
      {R"({"limits": {"cpus": "2"}})", "limits.cpus"},
      {R"({"limits": {"cpus": 1e-400}})", "limits.cpus"},  // underflows, but is not 0 (unlimited)
      // memory
      {R"({"limits": {"memory": "12Q"}})", "limits.memory"},
      {R"({"limits": {"memory": "-1"}})", "limits.memory"},
      {R"({"limits": {"memory": -1}})", "limits.memory"},
      {R"({"limits": {"memory": "1e400"}})", "limits.memory"},
      {R"({"limits": {"memory": 1e400}})", "limits.memory"},
      {R"({"limits": {"memory": 1e30}})", "limits.memory"},
      {R"({"limits": {"memory": "99999999999999999999999"}})", "limits.memory"},
      {R"({"limits": {"memory": "16777216T"}})", "limits.memory"},
      {R"({"limits": {"memory": "2048T"}})", "limits.memory"},  // fits 64 bits, above the 1 PiB cap
      {R"({"limits": {"memory": "1M"}})", "limits.memory"},
      {R"({"limits": {"memory": 1}})", "limits.memory"},
      {R"({"limits": {"memory": 4194304.5}})", "limits.memory"},
      {R"({"limits": {"memory": "4.5"}})", "limits.memory"},
      {R"({"limits": {"memory": true}})", "limits.memory"},
      {R"({"limits": {"memory": ""}})", "limits.memory"},
      // pids
      {R"({"limits": {"pids": 1.5}})", "limits.pids"},
      {R"({"limits": {"pids": 1}})", "limits.pids"},
      {R"({"limits": {"pids": 0}})", "limits.pids"},
      {R"({"limits": {"pids": -5}})", "limits.pids"},
      {R"({"limits": {"pids": 4194305}})", "limits.pids"},
      {R"({"limits": {"pids": "256"}})", "limits.pids"},
      // disk
      {R"({"limits": {"disk": 0}})", "limits.disk"},
      {R"({"limits": {"disk": "512K"}})", "limits.disk"},
      {R"({"limits": {"disk": "2T"}})", "limits.disk"},
      {R"({"limits": {"disk": "1GG"}})", "limits.disk"},
      // network
      {R"({"network": "host"})", "network"},
      {R"({"network": ""})", "network"},
      // labels
      {R"({"labels": {"a b": "v"}})", "labels"},
      {R"({"labels": {"": "v"}})", "labels"},
      {R"({"labels": {")" + std::string(64, 'k') + R"(": "v"}})", "labels"},
      {R"({"labels": {"k": ")" + std::string(257, 'v') + R"("}})", "labels.k"},
      {R"({"labels": {"k": 1}})", "labels.k"},
      {R"({"labels": []})", "labels"},
      {many_labels, "labels"},
      // lifetime and timeouts
      {R"({"lifetime": "forever"})", "lifetime"},
      {R"({"lifetime": 1})", "lifetime"},
      {R"({"max_lifetime_s": 0})", "max_lifetime_s"},
      {R"({"max_lifetime_s": -1})", "max_lifetime_s"},
      {R"({"max_lifetime_s": 2592001})", "max_lifetime_s"},
      {R"({"max_lifetime_s": "1h"})", "max_lifetime_s"},
      {R"({"idle_timeout_s": -0.5})", "idle_timeout_s"},
      {R"({"idle_timeout_s": 1e400})", "idle_timeout_s"},
  };
  for (const auto& c : cases) {
    INFO("json: " << c.json.substr(0, 200));
    const Error e = expect_error([&] { parse_spec_json(c.json); });
    INFO("message: " << e.what());
    CHECK(e.code() == Code::kInvalidArgument);
    CHECK_THAT(e.what(), Catch::StartsWith("invalid spec field '" + c.field + "': "));
  }
}

TEST_CASE("error messages say what is wrong", "[spec]") {
  CHECK(std::string(expect_error([] { parse_spec_json(R"({"lables": {}})"); }).what()) ==
        "invalid spec field 'lables': unknown field");
  CHECK_THAT(expect_error([] { parse_spec_json(R"({"limits": {"pids": 1.5}})"); }).what(),
             Catch::StartsWith("invalid spec field 'limits.pids': expected a positive integer"));
  CHECK(std::string(expect_error([] { parse_spec_json(R"({"network": "host"})"); }).what()) ==
        "invalid spec field 'network': expected \"none\" or a policy object, got \"host\"");
  CHECK_THAT(expect_error([] { parse_spec_json(R"({"limits": {"memory": "12Q"}})"); }).what(),
             Catch::Contains("\"12Q\""));
  // User text in messages is escaped and cut short.
  const std::string msg =
      expect_error([] { parse_spec_json(R"({"backend": "\u0001)" + std::string(500, 'x') + "\"}"); }).what();
  CHECK_THAT(msg, Catch::Contains("\\x01"));
  CHECK(msg.size() < 200);
}

TEST_CASE("malformed JSON and non-objects are rejected with the position", "[spec]") {
  struct Case {
    std::string json;
    std::string expect;
  };
  const std::vector<Case> cases = {
      {"", "offset 0"},
      {R"({"backend":)", "offset 11"},
      {"{\n  \"backend\": tru }", "line 2"},
      {R"({"a": 1} trailing)", "extra data"},
      {R"({"a": 1,})", "offset"},
      {"{\"a\": \"\xff\"}", "offset"},  // invalid UTF-8
      {"[]", "expected a JSON object, got an array"},
      {"\"str\"", "expected a JSON object"},
      {"null", "expected a JSON object, got null"},
      {"42", "expected a JSON object, got 42"},
  };
  for (const auto& c : cases) {
    INFO("json: " << c.json);
    const Error e = expect_error([&] { parse_spec_json(c.json); });
    INFO("message: " << e.what());
    CHECK(e.code() == Code::kInvalidArgument);
    CHECK_THAT(e.what(), Catch::StartsWith("invalid spec: "));
    CHECK_THAT(e.what(), Catch::Contains(c.expect));
  }
}

TEST_CASE("setters validate like the parser, with the same messages", "[spec]") {
  struct Case {
    std::string json;
    std::function<void(Spec&)> set;
  };
  const std::vector<Case> cases = {
      {R"({"backend": "Docker!"})", [](Spec& s) { spec_set_backend(s, "Docker!"); }},
      {R"({"layers": ["rel/dir"]})", [](Spec& s) { spec_add_layer(s, "rel/dir"); }},
      {R"({"environment": "env@0"})", [](Spec& s) { spec_set_environment(s, "env@0"); }},
      {R"({"env": {"A=B": "v"}})", [](Spec& s) { spec_set_env(s, "A=B", "v"); }},
      {R"({"env": {"": "v"}})", [](Spec& s) { spec_set_env(s, "", "v"); }},
      {R"({"workdir": "x"})", [](Spec& s) { spec_set_workdir(s, "x"); }},
      {R"({"hostname": "-x"})", [](Spec& s) { spec_set_hostname(s, "-x"); }},
      {R"({"user": "70000"})", [](Spec& s) { spec_set_user(s, "70000"); }},
      {R"({"limits": {"cpus": 2000}})", [](Spec& s) { spec_set_cpus(s, 2000); }},
      {R"({"limits": {"memory": 1048576}})", [](Spec& s) { spec_set_memory(s, 1048576); }},
      {R"({"limits": {"pids": 1}})", [](Spec& s) { spec_set_pids(s, 1); }},
      {R"({"limits": {"disk": 0}})", [](Spec& s) { spec_set_disk(s, 0); }},
      {R"({"network": "host"})", [](Spec& s) { spec_set_network(s, "host"); }},
      {R"({"labels": {"a b": "v"}})", [](Spec& s) { spec_set_label(s, "a b", "v"); }},
      {R"({"lifetime": "forever"})", [](Spec& s) { spec_set_lifetime(s, "forever"); }},
      {R"({"max_lifetime_s": 0})", [](Spec& s) { spec_set_max_lifetime(s, 0); }},
      {R"({"idle_timeout_s": -1})", [](Spec& s) { spec_set_idle_timeout(s, -1); }},
  };
  for (const auto& c : cases) {
    INFO("json: " << c.json);
    const Error from_json = expect_error([&] { parse_spec_json(c.json); });
    Spec s;
    const Spec before = s;
    const Error from_setter = expect_error([&] { c.set(s); });
    CHECK(from_setter.code() == Code::kInvalidArgument);
    CHECK(std::string(from_setter.what()) == from_json.what());
    CHECK(same(s, before));  // a failed setter changes nothing
  }
}

TEST_CASE("setters reject what only C++ callers can pass", "[spec]") {
  Spec s;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  CHECK_THAT(expect_error([&] { spec_set_cpus(s, nan); }).what(), Catch::Contains("'limits.cpus'"));
  CHECK_THAT(expect_error([&] { spec_set_max_lifetime(s, inf); }).what(), Catch::Contains("'max_lifetime_s'"));
  CHECK_THAT(expect_error([&] { spec_set_idle_timeout(s, nan); }).what(), Catch::Contains("'idle_timeout_s'"));
  CHECK_THAT(expect_error([&] { spec_set_env(s, "K", std::string_view("a\0b", 3)); }).what(),
             Catch::Contains("'env.K'"));
  CHECK_THAT(expect_error([&] { spec_set_env(s, "K", "\xC3\x28"); }).what(), Catch::Contains("not valid UTF-8"));
  CHECK_THAT(expect_error([&] { spec_set_label(s, "k", "\xED\xA0\x80"); }).what(),  // a UTF-16 surrogate
             Catch::Contains("'labels.k'"));
  CHECK_THAT(expect_error([&] { spec_set_workdir(s, "/a\xFF"); }).what(), Catch::Contains("'workdir'"));
  CHECK_THAT(expect_error([&] { spec_set_memory(s, std::numeric_limits<uint64_t>::max()); }).what(),
             Catch::Contains("'limits.memory'"));
}

TEST_CASE("setters accept valid values", "[spec]") {
  Spec s;
  spec_set_backend(s, "fncall");
  spec_add_layer(s, "/a");
  spec_add_layer(s, "/b");
  spec_set_env(s, "K", "V");
  spec_set_env(s, "K", "W");
  spec_set_workdir(s, "/tmp");
  spec_set_hostname(s, "x");
  spec_set_user(s, "0");
  spec_set_cpus(s, -0.0);
  spec_set_memory(s, 0);
  spec_set_memory(s, 4ull << 20);
  spec_set_pids(s, 2);
  spec_set_disk(s, 1ull << 20);
  spec_set_network(s, "none");
  spec_set_lifetime(s, "detached");
  spec_set_max_lifetime(s, 2592000);
  spec_set_idle_timeout(s, 0);
  for (int i = 0; i < 64; ++i) spec_set_label(s, "k" + std::to_string(i), "v");
  spec_set_label(s, "k0", "replaced");  // replacing does not count against the 64-label cap
  CHECK_THROWS_AS(spec_set_label(s, "k64", "v"), Error);
  CHECK(s.backend == "fncall");
  CHECK(s.layers == std::vector<std::string>{"/a", "/b"});
  CHECK(s.env.at("K") == "W");
  CHECK(!std::signbit(s.limits.cpus));
  CHECK(s.limits.memory == 4ull << 20);
  CHECK(s.labels.at("k0") == "replaced");
  CHECK(s.lifetime == Lifetime::kDetached);
  CHECK(same(parse_spec_json(spec_to_json(s)), s));
}

TEST_CASE("parse_size", "[spec]") {
  const std::vector<std::pair<std::string, uint64_t>> good = {
      {"0", 0},
      {"100", 100},
      {"100B", 100},
      {"1k", 1024},
      {"1K", 1024},
      {"1Ki", 1024},
      {"1KiB", 1024},
      {"1KB", 1024},
      {"64KiB", 64 * 1024},
      {"512M", 512ull << 20},
      {"512m", 512ull << 20},
      {"1G", 1ull << 30},
      {"1.5G", 1610612736},
      {"0.5K", 512},
      {"1.3K", 1331},  // rounded down to whole bytes
      {"2T", 2ull << 40},
      {"0.0G", 0},
      {"007M", 7ull << 20},
      {"18446744073709551615", std::numeric_limits<uint64_t>::max()},
      {"16777215T", 16777215ull << 40},
      {"1.999999999999999999G", (2ull << 30) - 1},
  };
  for (const auto& [text, bytes] : good) {
    INFO(text);
    CHECK(parse_size(text, "limits.memory") == bytes);
  }

  const std::vector<std::string> bad = {
      "",      "12Q",   "-1",   "+1",    "1e400", " 1",   "1 ",   "1.",    ".5",       "1..5G", "1.5",
      "100.0", "1KiBB", "1ib",  "1b",    "1kb",   "1iB",  "1i",   "0x10",  "1P",       "K",     "1,5G",
      "18446744073709551616", "16777216T", "99999999999999999999999", "1.0000000000000000001G",
      "0.0000000001K",  // rounds to 0 bytes, which would mean "unlimited"
      std::string("1\0G", 3),
  };
  for (const auto& text : bad) {
    INFO(text);
    const Error e = expect_error([&] { parse_size(text, "limits.disk"); });
    CHECK(e.code() == Code::kInvalidArgument);
    CHECK_THAT(e.what(), Catch::StartsWith("invalid spec field 'limits.disk': "));
  }
}

TEST_CASE("validate_spec checks layers on the host", "[spec]") {
  TempDir dir;
  Spec s;
  SECTION("no layers") {
    const Error e = expect_error([&] { validate_spec(s); });
    CHECK(e.code() == Code::kInvalidArgument);
    CHECK(std::string(e.what()) == "invalid spec field 'layers': at least one layer (or an environment) is required");
  }
  SECTION("a directory is fine") {
    s.layers = {dir.path};
    validate_spec(s);
    s.layers.push_back("/");
    validate_spec(s);
  }
  SECTION("a missing layer") {
    s.layers = {dir.path, dir.path + "/missing"};
    const Error e = expect_error([&] { validate_spec(s); });
    CHECK(e.code() == Code::kInvalidArgument);
    CHECK(e.err_no() == ENOENT);
    CHECK(std::string(e.what()) ==
          "invalid spec field 'layers[1]': " + dir.path + "/missing: No such file or directory");
  }
  SECTION("a regular file") {
    s.layers = {dir.file("plain")};
    const Error e = expect_error([&] { validate_spec(s); });
    CHECK(e.code() == Code::kInvalidArgument);
    CHECK(e.err_no() == ENOTDIR);
    CHECK(std::string(e.what()) == "invalid spec field 'layers[0]': " + dir.path + "/plain: Not a directory");
  }
  SECTION("fields filled in directly are checked too") {
    s.layers = {dir.path};
    s.backend = "no such";
    CHECK_THAT(expect_error([&] { validate_spec(s); }).what(), Catch::Contains("'backend'"));
    s.backend = "container";
    s.hostname = "";
    CHECK_THAT(expect_error([&] { validate_spec(s); }).what(), Catch::Contains("'hostname'"));
    s.hostname = "ok";
    s.layers = {"no/such ref"};
    CHECK_THAT(expect_error([&] { validate_spec(s); }).what(), Catch::Contains("'layers[0]'"));
    s.layers = {dir.path};
    s.limits.pids = 0;
    CHECK_THAT(expect_error([&] { validate_spec(s); }).what(), Catch::Contains("'limits.pids'"));
    s.limits.pids = 10;
    s.env["A=B"] = "x";
    CHECK_THAT(expect_error([&] { validate_spec(s); }).what(), Catch::Contains("'env'"));
  }
}
