// The build recipe: the Dockerfile subset `sandlet build` reads (docs/BUILD.md). Pure: text in, instructions
// out; nothing here touches the host. Every error is Error(kInvalidArgument) "RECIPE:LINE: why".
#pragma once
#include <cstddef>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "recipe/secrets.hpp"

namespace sandlet::build {

enum class Kind { kArg, kFrom, kRun, kCopy, kAdd, kEnv, kWorkdir, kUser, kLabel, kIgnored };

// One instruction as written: continuation lines joined, comments dropped. Values are not substituted yet
// (that needs the build's state: plan.hpp).
struct Instruction {
  Kind kind = Kind::kIgnored;
  size_t line = 0;       // the line it starts on (1-based)
  std::string keyword;   // upper case: "RUN"
  std::string rest;      // what follows the keyword and its flags, continuations joined
  std::string text;      // keyword + flags + rest, for progress and messages
  // RUN: exec form (a JSON array) or shell form (rest is the command for /bin/sh -c).
  bool exec_form = false;
  std::vector<std::string> argv;  // exec form only
  std::vector<SecretMount> secrets;  // RUN --mount=type=secret,...
  std::string network;  // RUN --network: "" (not given), "default" (the build's policy) or "none"
  // COPY/ADD: the words (sources..., dest) unsubstituted; --chown / --chmod values.
  std::vector<std::string> words;
  bool json_form = false;  // COPY/ADD given as a JSON array
  std::string chown, chmod;
};

struct Recipe {
  std::string name;  // what messages call it (the path given)
  std::vector<Instruction> instructions;
  std::vector<std::string> notes;  // instructions accepted and ignored ("Dockerfile:9: CMD ignored: ...")
};

// Parses a whole recipe. Refuses, naming the line: instructions outside the subset, a missing FROM or a
// second one, anything but ARG before FROM, multi-stage forms, ADD of URLs and archives, unknown flags.
Recipe parse_recipe(std::string_view text, const std::string& name);

// "RECIPE:LINE: why" as an INVALID_ARGUMENT error.
[[noreturn]] void refuse(const std::string& recipe, size_t line, const std::string& why);

// Variables visible to substitution: unset names expand to "".
using Vars = std::map<std::string, std::string>;

// The shell-like word rules of the instructions that substitute (FROM, COPY, ADD, ENV, LABEL, ARG, USER,
// WORKDIR): quotes are removed ('...' literal, "..." with $ and \ processed), a backslash escapes the next
// character, $NAME / ${NAME} / ${NAME:-word} / ${NAME:+word} expand from `vars` (not when `vars` is null).
// Words split on unquoted blanks; an expansion is never split. Throws "RECIPE:LINE: ..." on bad syntax.
std::vector<std::string> lex_words(std::string_view s, const Vars* vars, const std::string& recipe, size_t line);
// The same over the whole text as one word (blanks kept): the legacy `ENV KEY value with spaces` form.
std::string expand_text(std::string_view s, const Vars& vars, const std::string& recipe, size_t line);

// KEY=VALUE pairs of ENV, LABEL and ARG, values expanded from `vars` (ARG: a bare NAME has no value).
// Legacy `ENV KEY VALUE` (no '=' in the first word) is accepted for ENV and LABEL.
struct Pair {
  std::string key, value;
  bool has_value = true;
};
std::vector<Pair> parse_pairs(const Instruction& in, const Vars& vars, const std::string& recipe);

}  // namespace sandlet::build
