// The CLI's JSON (src/cli/json.cpp over Boost.JSON): what a --spec file says reaches the library exactly.
#include <catch2/catch.hpp>

#include "cli/json.hpp"

namespace json = sandlet::cli::json;

TEST_CASE("cli json: numbers round-trip exactly, in the shortest form", "[cli][json]") {
  // 1530.9403218205155 is one Boost.JSON's own number parser reads one ulp off (…157).
  const std::string text = R"({"a":1530.9403218205155,"b":0.1,"c":-3,"d":18446744073709551615,"e":5E-1})";
  CHECK(json::serialize(json::parse(text)) ==
        R"({"a":1530.9403218205155,"b":0.1,"c":-3,"d":18446744073709551615,"e":0.5})");
  CHECK(json::serialize(json::number_or_string("1530.9403218205155")) == "1530.9403218205155");
  CHECK(json::serialize(json::number_or_string("2")) == "2");
  CHECK(json::serialize(json::number_or_string("1e400")) == "\"1e400\"");  // the library names the field
  CHECK(json::serialize(json::number_or_string("1.5x")) == "\"1.5x\"");
}

TEST_CASE("cli json: errors say where; duplicate keys are errors", "[cli][json]") {
  CHECK_THROWS_WITH(json::parse("{\"a\": [1,\n 2"), Catch::Contains("malformed JSON at offset 12 (line 2, column 3)"));
  CHECK_THROWS_WITH(json::parse("{\"env\": {\"K\": 1, \"K\": 2}}"), "duplicate key 'env.K'");
  CHECK_THROWS_WITH(json::parse("{} x"), Catch::Contains("malformed JSON"));
}

TEST_CASE("cli json: pretty printing keeps member order; lookups are null-safe", "[cli][json]") {
  const auto v = json::parse(R"({"z":1,"a":{"k":"v","n":[]},"l":[true,null]})");
  CHECK(json::serialize_pretty(v) ==
        "{\n  \"z\": 1,\n  \"a\": {\n    \"k\": \"v\",\n    \"n\": []\n  },\n  \"l\": [\n    true,\n    null\n  ]\n}");
  CHECK(json::text(json::find(json::find(v, "a"), "k")) == "v");
  CHECK(json::text(json::find(v, "z")) == "1");
  CHECK(json::find(json::find(v, "missing"), "k") == nullptr);
  CHECK(json::items(json::find(v, "l")).size() == 2);
  CHECK(json::items(json::find(v, "z")).empty());
  boost::json::object o;
  json::object_at(o, "limits")["cpus"] = 1.5;
  json::object_at(o, "limits")["pids"] = 2;
  CHECK(json::serialize(o) == R"({"limits":{"cpus":1.5,"pids":2}})");
}
