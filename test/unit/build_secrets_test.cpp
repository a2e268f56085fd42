// Unit tests for build secrets' parsing (src/recipe/secrets.cpp): RUN --mount=type=secret options and their
// refusals, each naming the line and the option; --secret sources, whose errors never show the value.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "recipe/build_cache.hpp"
#include "recipe/plan.hpp"
#include "recipe/recipe.hpp"
#include "recipe/secrets.hpp"
#include "common/error.hpp"
#include "unit_helpers.hpp"

using namespace sandlet;
using namespace sandlet::build;

namespace {

// The INVALID_ARGUMENT message of parsing and planning `run` (one RUN line after FROM), or "" when it parses.
std::string refusal(const std::string& run) {
  try {
    Recipe r = parse_recipe("FROM base\n" + run + "\n", "Dockerfile");
    plan_recipe(r, {}, State{});
  } catch (const Error& e) {
    CHECK(e.code() == Code::kInvalidArgument);
    return e.what();
  }
  return "";
}

Step run_step_of(const std::string& run) {
  Plan p = plan_recipe(parse_recipe("FROM base\n" + run + "\n", "Dockerfile"), {}, State{});
  for (const auto& st : p.steps)
    if (st.kind == Kind::kRun) return st;
  FAIL("no RUN step");
  return {};
}

bool starts(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

}  // namespace

TEST_CASE("secrets: RUN --mount=type=secret parses with Docker's defaults", "[build][secrets]") {
  Step st = run_step_of("RUN --mount=type=secret,id=token cat /run/secrets/token");
  REQUIRE(st.secrets.size() == 1);
  CHECK(st.secrets[0].id == "token");
  CHECK(st.secrets[0].target == "/run/secrets/token");
  CHECK(st.secrets[0].mode == 0400);
  CHECK(st.secrets[0].uid == 0);
  CHECK(st.secrets[0].gid == 0);
  CHECK_FALSE(st.secrets[0].required);
  // The flag is not part of the command.
  CHECK(st.argv == std::vector<std::string>{"/bin/sh", "-c", "cat /run/secrets/token"});

  Step full = run_step_of(
      "RUN --mount=type=secret,id=a,target=/etc/app/key,required=true,mode=0440,uid=1000,gid=100 "
      "--mount=type=secret,dst=/etc/app/other true");
  REQUIRE(full.secrets.size() == 2);
  CHECK(full.secrets[0] == SecretMount{"a", "/etc/app/key", true, 0440, 1000, 100});
  CHECK(full.secrets[1].id == "other");  // from the target's name
  CHECK(full.secrets[1].target == "/etc/app/other");
  CHECK(run_step_of("RUN --mount=type=secret,id=x,required true").secrets[0].required);
  CHECK(secret_dir("/run/secrets/x") == "/run/secrets");
}

TEST_CASE("secrets: bad RUN --mount options are refused naming the line and the option", "[build][secrets]") {
  struct Case {
    const char* run;
    const char* message;
  } cases[] = {
      {"RUN --mount=type=bind,target=/x true", "Dockerfile:2: RUN --mount=type=bind,target=/x: type=bind is not supported ("},
      {"RUN --mount=type=ssh true", "Dockerfile:2: RUN --mount=type=ssh: type=ssh is not supported ("},
      {"RUN --mount=type=tmpfs,target=/x true", "Dockerfile:2: RUN --mount=type=tmpfs,target=/x: type=tmpfs is not supported ("},
      {"RUN --mount=id=a true", "Dockerfile:2: RUN --mount=id=a: needs type=secret"},
      {"RUN --mount=type=secret true", "Dockerfile:2: RUN --mount=type=secret: needs id=NAME"},
      {"RUN --mount=type=secret,id=a/b true", "Dockerfile:2: RUN --mount=type=secret,id=a/b: id=a/b is not a valid secret id"},
      {"RUN --mount=type=secret,id=.. true", "Dockerfile:2: RUN --mount=type=secret,id=..: id=.. is not a valid secret id"},
      {"RUN --mount=type=secret,id=a,target=rel true", "Dockerfile:2: RUN --mount=type=secret,id=a,target=rel: target=rel is not an absolute, normalized path"},
      {"RUN --mount=type=secret,id=a,target=/x/../y true", "Dockerfile:2: RUN --mount=type=secret,id=a,target=/x/../y: target=/x/../y is not an absolute"},
      {"RUN --mount=type=secret,id=a,target=/x/ true", "Dockerfile:2: RUN --mount=type=secret,id=a,target=/x/: target=/x/ is not an absolute"},
      {"RUN --mount=type=secret,id=a,target=/proc/x true", "Dockerfile:2: RUN --mount=type=secret,id=a,target=/proc/x: target=/proc/x is inside /proc"},
      {"RUN --mount=type=secret,id=a,target=/key true", "Dockerfile:2: RUN --mount: a secret's target needs a directory below /"},
      {"RUN --mount=type=secret,id=a,mode=0999 true", "Dockerfile:2: RUN --mount=type=secret,id=a,mode=0999: mode=0999 is not an octal mode"},
      {"RUN --mount=type=secret,id=a,mode=77777 true", "Dockerfile:2: RUN --mount=type=secret,id=a,mode=77777: mode=77777 is out of range"},
      {"RUN --mount=type=secret,id=a,uid=-1 true", "Dockerfile:2: RUN --mount=type=secret,id=a,uid=-1: uid=-1 is not a number"},
      {"RUN --mount=type=secret,id=a,uid=70000 true", "Dockerfile:2: RUN --mount=type=secret,id=a,uid=70000: uid=70000 is out of range"},
      {"RUN --mount=type=secret,id=a,required=maybe true", "Dockerfile:2: RUN --mount=type=secret,id=a,required=maybe: required=maybe is not true or false"},
      {"RUN --mount=type=secret,id=a,src=/etc/passwd true", "Dockerfile:2: RUN --mount=type=secret,id=a,src=/etc/passwd: unknown option 'src'"},
      {"RUN --mount=type=secret,id=a,id=b true", "Dockerfile:2: RUN --mount=type=secret,id=a,id=b: id is given twice"},
      {"RUN --mount=type=secret,id=a,target=/t/x,dst=/t/y true", "Dockerfile:2: RUN --mount=type=secret,id=a,target=/t/x,dst=/t/y: dst is given twice"},
      {"RUN --mount=type=secret,,id=a true", "Dockerfile:2: RUN --mount=type=secret,,id=a: an empty option"},
      {"RUN --mount=type=secret,id=a --mount=type=secret,id=b,target=/run/secrets/a true", "Dockerfile:2: RUN --mount: two secrets mount at /run/secrets/a"},
      {"RUN --mount=type=secret,id=a,target=/s/a --mount=type=secret,id=b,target=/s/d/b true", "Dockerfile:2: RUN --mount: secret targets in /s and /s/d nest"},
  };
  for (const auto& c : cases) {
    std::string why = refusal(c.run);
    INFO(c.run << " -> " << why);
    CHECK(starts(why, c.message));
  }
}

TEST_CASE("secrets: the cache key has a secret's id and placement, never its value", "[build][secrets]") {
  Step st = run_step_of("RUN --mount=type=secret,id=a true");
  Step plain = run_step_of("RUN true");
  Step other = run_step_of("RUN --mount=type=secret,id=b true");
  const std::vector<std::string> layers{"sha256:00"};
  CHECK(cache_key(layers, st, "") != cache_key(layers, plain, ""));
  CHECK(cache_key(layers, st, "") != cache_key(layers, other, ""));
  // Run with and without the optional secret's value: different steps.
  CHECK(cache_key(layers, st, "", {"a"}) != cache_key(layers, st, ""));
  // A step without secrets keeps the key it always had (existing caches stay valid).
  CHECK(cache_key(layers, plain, "") == cache_key(layers, plain, "", {}));
}

TEST_CASE("secrets: --secret sources load from a file or a variable; errors never show the value", "[build][secrets]") {
  unit::TempDir dir;
  const std::string file = dir.path + "/token";
  { std::ofstream(file) << "s3cr3t-file-value"; }
  ::setenv("SANDLET_TEST_SECRET_VAR", "s3cr3t-env-value", 1);
  auto values = load_secrets({"id=f,src=" + file, "id=e,env=SANDLET_TEST_SECRET_VAR", "type=file,id=g,source=" + file});
  CHECK(values.at("f") == "s3cr3t-file-value");
  CHECK(values.at("e") == "s3cr3t-env-value");
  CHECK(values.at("g") == "s3cr3t-file-value");

  auto fails = [](std::vector<std::string> sources) {
    try {
      load_secrets(sources);
    } catch (const Error& e) {
      CHECK(e.code() == Code::kInvalidArgument);
      return std::string(e.what());
    }
    return std::string();
  };
  CHECK(starts(fails({"src=" + file}), "invalid build field 'secrets[0]': needs id=NAME"));
  CHECK(starts(fails({"id=a"}), "invalid build field 'secrets[0]': secret a needs exactly one of src=FILE and env=VAR"));
  CHECK(starts(fails({"id=a,src=" + file + ",env=X"}), "invalid build field 'secrets[0]': secret a needs exactly one"));
  CHECK(starts(fails({"id=a,src=" + file, "id=a,src=" + file}), "invalid build field 'secrets[1]': secret a is given twice"));
  CHECK(starts(fails({"id=a,path=x"}), "invalid build field 'secrets[0]': unknown option 'path'"));
  CHECK(starts(fails({"id=a,env=SANDLET_TEST_NO_SUCH_VAR"}),
               "invalid build field 'secrets[0]': secret a: environment variable SANDLET_TEST_NO_SUCH_VAR is not set"));
  std::string missing = fails({"id=a,src=" + dir.path + "/none"});
  CHECK(starts(missing, "invalid build field 'secrets[0]': secret a: "));
  CHECK(missing.find("/none") != std::string::npos);
  // Too large: refused by size, and the message holds none of the bytes.
  const std::string big = dir.path + "/big";
  { std::ofstream(big) << std::string(kMaxSecretBytes + 1, 'Q'); }
  std::string why = fails({"id=big,src=" + big});
  CHECK(starts(why, "invalid build field 'secrets[0]': secret big: "));
  CHECK(why.find("QQQQ") == std::string::npos);
  ::unsetenv("SANDLET_TEST_SECRET_VAR");
}
