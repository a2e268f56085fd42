// Unit tests for src/recipe's parser and planner: every instruction of the subset, continuations, comments,
// directives, substitution and ARG scopes, and the refusals, each naming its line.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "recipe/plan.hpp"
#include "recipe/recipe.hpp"
#include "common/error.hpp"

using namespace sandlet;
using namespace sandlet::build;

namespace {

Recipe parse(const std::string& text) { return parse_recipe(text, "Dockerfile"); }

// The message parsing `text` fails with (INVALID_ARGUMENT), or "" if it parses.
std::string refusal(const std::string& text, const Vars& args = {}) {
  try {
    Recipe r = parse(text);
    State base;
    plan_recipe(r, args, base);
  } catch (const Error& e) {
    CHECK(e.code() == Code::kInvalidArgument);
    return e.what();
  }
  return "";
}

Plan plan(const std::string& text, const Vars& args = {}, State base = {}) {
  return plan_recipe(parse(text), args, base);
}

}  // namespace

TEST_CASE("recipe: every instruction of the subset parses", "[build]") {
  Recipe r = parse(
      "# a comment\n"
      "ARG BASE=busybox\n"
      "FROM $BASE\n"
      "RUN echo hi\n"
      "RUN [\"/bin/echo\", \"exec form\"]\n"
      "COPY a.txt /dst/\n"
      "ADD b.txt /dst/b\n"
      "ENV K=V\n"
      "WORKDIR /work\n"
      "USER 1000:1000\n"
      "LABEL task=t1\n"
      "ARG LATE\n"
      "CMD [\"sh\"]\n");
  REQUIRE(r.instructions.size() == 12);
  std::vector<Kind> kinds;
  for (const auto& in : r.instructions) kinds.push_back(in.kind);
  CHECK(kinds == std::vector<Kind>{Kind::kArg, Kind::kFrom, Kind::kRun, Kind::kRun, Kind::kCopy, Kind::kAdd, Kind::kEnv,
                                   Kind::kWorkdir, Kind::kUser, Kind::kLabel, Kind::kArg, Kind::kIgnored});
  CHECK(r.instructions[0].line == 2);
  CHECK(r.instructions[2].line == 4);
  CHECK_FALSE(r.instructions[2].exec_form);
  CHECK(r.instructions[3].exec_form);
  CHECK(r.instructions[3].argv == std::vector<std::string>{"/bin/echo", "exec form"});
  REQUIRE(r.notes.size() == 1);
  CHECK(r.notes[0].find("Dockerfile:13: CMD ignored") == 0);
  CHECK(from_reference(r, {}) == "busybox");
  CHECK(from_reference(r, {{"BASE", "other"}}) == "other");
}

TEST_CASE("recipe: keywords are case-insensitive, continuations join, comments inside are dropped", "[build]") {
  Recipe r = parse(
      "from base\n"
      "run echo one \\\n"
      "  # a comment in the middle\n"
      "\n"
      "  && echo two \\   \n"
      "  && echo three\n"
      "RUN echo last \\");
  REQUIRE(r.instructions.size() == 3);
  CHECK(r.instructions[1].keyword == "RUN");
  CHECK(r.instructions[1].line == 2);
  CHECK(r.instructions[1].rest == "echo one   && echo two   && echo three");
  CHECK(r.instructions[2].line == 7);
  Plan p = plan_recipe(r, {}, {});
  CHECK(p.steps[1].argv == std::vector<std::string>{"/bin/sh", "-c", "echo one   && echo two   && echo three"});
}

TEST_CASE("recipe: parser directives", "[build]") {
  CHECK(refusal("# syntax=docker/dockerfile:1\n# escape=\\\nFROM base\n").empty());
  CHECK(refusal("# escape=`\nFROM base\n") == "Dockerfile:1: parser directive escape=` is not supported (the escape character is \\)");
  // After the first instruction or a plain comment, a directive is an ordinary comment.
  CHECK(refusal("# hello\n# escape=`\nFROM base\n").empty());
}

TEST_CASE("recipe: FROM comes once, first (after ARGs)", "[build]") {
  CHECK(refusal("RUN true\nFROM base\n") == "Dockerfile:1: RUN before FROM (only ARG may come before FROM)");
  CHECK(refusal("FROM a\nFROM b\n") == "Dockerfile:2: a second FROM is not supported (multi-stage builds)");
  CHECK(refusal("FROM a AS build\n") == "Dockerfile:1: FROM ... AS is not supported (multi-stage builds)");
  CHECK(refusal("FROM --platform=linux/arm64 a\n").find("Dockerfile:1: FROM --platform is not supported") == 0);
  CHECK(refusal("FROM scratch\n").find("Dockerfile:1: FROM scratch is not supported") == 0);
  CHECK(refusal("# only a comment\n\nARG X=1\n").find("no FROM instruction") != std::string::npos);
  CHECK(refusal("").find("Dockerfile:1: no FROM instruction") == 0);
  CHECK(refusal("FROM\n") == "Dockerfile:1: FROM needs arguments");
}

TEST_CASE("recipe: instructions outside the subset are refused naming the line", "[build]") {
  for (const char* kw : {"EXPOSE 80", "VOLUME /data", "HEALTHCHECK CMD true", "ONBUILD RUN x", "STOPSIGNAL 9",
                         "SHELL [\"bash\", \"-c\"]", "MAINTAINER me"}) {
    std::string why = refusal(std::string("FROM base\nRUN true\n") + kw + "\n");
    std::string word = std::string(kw).substr(0, std::string(kw).find(' '));
    INFO(why);
    CHECK(why.find("Dockerfile:3: " + word + " is not supported (") == 0);
  }
  CHECK(refusal("FROM base\nFROBNICATE x\n") == "Dockerfile:2: unknown instruction 'FROBNICATE'");
  CHECK(refusal("FROM base\nRUN --mount=type=cache,target=/x true\n").find("Dockerfile:2: RUN --mount=type=cache,target=/x: type=cache is not supported (") == 0);
  CHECK(refusal("FROM base\nCOPY --mount=type=secret,id=a x /y\n").find("Dockerfile:2: COPY --mount is not supported (only RUN") == 0);
  CHECK(refusal("FROM base\nCOPY --network=none a /b\n") == "Dockerfile:2: COPY --network is not supported (only RUN takes --network)");
  CHECK(refusal("FROM base\nCOPY --from=build /a /b\n").find("Dockerfile:2: COPY --from is not supported (multi-stage") == 0);
  CHECK(refusal("FROM base\nCOPY --link a /b\n").find("Dockerfile:2: COPY --link is not supported") == 0);
  CHECK(refusal("FROM base\nCOPY --chmod=u+x a /b\n") == "Dockerfile:2: COPY --chmod=u+x: only an octal mode is supported");
  CHECK(refusal("FROM base\nRUN <<EOF\necho\nEOF\n").find("Dockerfile:2: RUN with a here-document") == 0);
  CHECK(refusal("FROM base\nRUN echo $((1<<2))\n").empty());
  CHECK(refusal("FROM base\nRUN []\n") == "Dockerfile:2: RUN [] has no command");
}

TEST_CASE("recipe: ADD takes local files only", "[build]") {
  CHECK(refusal("FROM base\nADD https://example.invalid/x.txt /x\n").find("Dockerfile:2: ADD of a URL is not supported") == 0);
  CHECK(refusal("FROM base\nADD git@host:repo.git /src\n").find("Dockerfile:2: ADD of a URL is not supported") == 0);
  CHECK(refusal("FROM base\nADD src.tar.gz /src/\n").find("Dockerfile:2: ADD would unpack the archive src.tar.gz") == 0);
  CHECK(refusal("FROM base\nADD notes.txt /src/\n").empty());
}

TEST_CASE("recipe: COPY forms and flags", "[build]") {
  Plan p = plan(
      "FROM base\n"
      "WORKDIR /app\n"
      "COPY --chown=1000:1000 --chmod=0755 a b ./\n"
      "COPY [\"with space.txt\", \"/opt/dir with space/\"]\n"
      "COPY 'quoted name' rel/target\n");
  const Step& c = p.steps[2];
  CHECK(c.sources == std::vector<std::string>{"a", "b"});
  CHECK(c.dest == "/app/");
  CHECK(c.chown == "1000:1000");
  CHECK(c.chmod == "0755");
  CHECK(p.steps[3].sources == std::vector<std::string>{"with space.txt"});
  CHECK(p.steps[3].dest == "/opt/dir with space/");
  CHECK(p.steps[4].sources == std::vector<std::string>{"quoted name"});
  CHECK(p.steps[4].dest == "/app/rel/target");
  CHECK(refusal("FROM base\nCOPY onlyone\n") == "Dockerfile:2: COPY needs at least one source and a destination");
  CHECK(refusal("FROM base\nCOPY a b /dest\n") == "Dockerfile:2: COPY with several sources needs a destination ending in '/'");
}

TEST_CASE("recipe: ENV, WORKDIR, USER, LABEL build up the state", "[build]") {
  State base;
  base.env = {{"PATH", "/bin"}};
  Plan p = plan(
      "FROM base\n"
      "ENV A=1 B=\"two words\" C='$A'\n"
      "ENV PATH=/opt/bin:$PATH D=$A\n"
      "ENV LEGACY value with  spaces\n"
      "WORKDIR /srv\n"
      "WORKDIR sub/../app\n"
      "USER app\n"
      "LABEL task=t1 \"version\"=\"1 2\"\n"
      "RUN env\n",
      {}, base);
  const State& s = p.steps.back().state;
  CHECK(s.env.at("A") == "1");
  CHECK(s.env.at("B") == "two words");
  CHECK(s.env.at("C") == "$A");  // single quotes: no substitution
  CHECK(s.env.at("PATH") == "/opt/bin:/bin");
  CHECK(s.env.at("D") == "1");
  CHECK(s.env.at("LEGACY") == "value with  spaces");
  CHECK(s.workdir == "/srv/app");
  CHECK(s.user == "app");
  CHECK(p.labels == std::map<std::string, std::string>{{"task", "t1"}, {"version", "1 2"}});
  // Each step carries the state it runs in.
  CHECK(p.steps[1].state.env.count("A") == 1);
  CHECK(p.steps[1].state.env.count("LEGACY") == 0);
}

TEST_CASE("recipe: values one ENV sets are not seen by the same ENV", "[build]") {
  Plan p = plan("FROM base\nENV A=old\nENV A=new B=$A\n");
  CHECK(p.steps.back().state.env.at("B") == "old");
}

TEST_CASE("recipe: substitution forms", "[build]") {
  Vars v = {{"SET", "x"}, {"EMPTY", ""}};
  auto w = [&](const std::string& s) { return lex_words(s, &v, "R", 1); };
  CHECK(w("$SET ${SET} a${SET}b") == std::vector<std::string>{"x", "x", "axb"});
  CHECK(w("${UNSET:-dflt} ${EMPTY:-dflt} ${SET:-dflt}") == std::vector<std::string>{"dflt", "dflt", "x"});
  CHECK(w("${SET:+alt} ${UNSET:+alt}z") == std::vector<std::string>{"alt", "z"});
  CHECK(w("\\$SET '$SET' \"$SET\" \"\\$SET\"") == std::vector<std::string>{"$SET", "$SET", "x", "$SET"});
  CHECK(w("$ a$") == std::vector<std::string>{"$", "a$"});
  CHECK(lex_words("$SET", nullptr, "R", 1) == std::vector<std::string>{"$SET"});
  CHECK_THROWS_WITH(w("${SET"), "R:1: unterminated ${...} in '${SET'");
  CHECK_THROWS_WITH(w("${SET/a/b}"), Catch::StartsWith("R:1: unsupported substitution '${SET/a/b}'"));
  CHECK_THROWS_WITH(w("'open"), "R:1: unterminated single quote");
  CHECK_THROWS_WITH(w("\"open"), "R:1: unterminated double quote");
  CHECK_THROWS_WITH(w("${1x}"), "R:1: bad substitution '${1x}'");
}

TEST_CASE("recipe: RUN is not substituted by the build; ARGs reach it as environment", "[build]") {
  Plan p = plan("ARG V=1\nFROM base\nARG V\nARG W=two\nENV W=env\nRUN echo $V $W\n", {{"V", "cli"}});
  const Step& run = p.steps.back();
  CHECK(run.argv == std::vector<std::string>{"/bin/sh", "-c", "echo $V $W"});
  CHECK(run.arg_env == std::vector<std::string>{"V=cli"});  // W: ENV wins over ARG
}

TEST_CASE("recipe: ARG scopes and build args", "[build]") {
  // An ARG before FROM is visible to FROM only, unless declared again after it.
  Plan p = plan("ARG TAG=1\nFROM img\nENV A=$TAG\nARG TAG\nENV B=$TAG\n");
  CHECK(p.steps.back().state.env.at("A") == "");
  CHECK(p.steps.back().state.env.at("B") == "1");
  // Build args override defaults; those no ARG declares are reported.
  Plan q = plan("FROM img\nARG X=dflt\nENV X=$X\n", {{"X", "given"}, {"Y", "unused"}});
  CHECK(q.steps.back().state.env.at("X") == "given");
  CHECK(q.unused_build_args == std::vector<std::string>{"Y"});
  // An ARG default is substituted.
  Plan r = plan("FROM img\nENV BASE=/opt\nARG DIR=$BASE/x\nWORKDIR $DIR\n");
  CHECK(r.steps.back().state.workdir == "/opt/x");
  CHECK(from_reference(parse("ARG N=layer\nARG REF=${N}-1\nFROM $REF\n"), {}) == "layer-1");
  CHECK(refusal("ARG E\nFROM $E\n").find("Dockerfile:2: FROM $E expands to no reference") == 0);
}

TEST_CASE("recipe: values are checked as the sandbox spec checks them, at their line", "[build]") {
  CHECK(refusal("FROM b\nUSER not:valid:user\n").find("Dockerfile:2: USER not:valid:user: invalid spec field 'user'") == 0);
  CHECK(refusal("FROM b\nUSER a b\n") == "Dockerfile:2: USER takes exactly one value");
  CHECK(refusal("FROM b\nENV novalue\n").find("Dockerfile:2: ENV novalue: expected KEY=VALUE or KEY VALUE") == 0);
  CHECK(refusal("FROM b\nENV A=1 junk\n") == "Dockerfile:2: ENV: expected KEY=VALUE, got 'junk'");
  CHECK(refusal("FROM b\nENV =x\n") == "Dockerfile:2: ENV: empty name in '=x'");
  CHECK(refusal("FROM b\nLABEL\n") == "Dockerfile:2: LABEL needs arguments");
  CHECK(refusal("FROM b\nWORKDIR $UNSET\n").find("Dockerfile:2: WORKDIR $UNSET expands to no path") == 0);
}

TEST_CASE("recipe: a NUL byte is refused", "[build]") {
  CHECK(refusal(std::string("FROM b\n\0", 8)) == "Dockerfile:1: the recipe is not text (it holds a NUL byte)");
}
