// A parsed recipe turned into the steps a build runs: variables substituted, ARG scopes applied, the
// environment, working directory and user each step runs with worked out, every value validated as the
// sandbox spec would. Pure, like the parser: the builder resolves FROM, then asks for the plan.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "recipe/recipe.hpp"

namespace sandlet::build {

// What a step runs with: the environment's defaults after the instructions so far.
struct State {
  std::map<std::string, std::string> env;
  std::string workdir = "/";
  std::string user;  // "" = root
};

struct Step {
  Kind kind = Kind::kIgnored;
  size_t line = 0;
  std::string text;      // the instruction as written (continuations joined): what progress shows
  // RUN: the command and the ARG values it sees ("K=V", those ENV does not set).
  std::vector<std::string> argv;
  std::vector<std::string> arg_env;
  std::vector<SecretMount> secrets;  // RUN --mount=type=secret: ids and where they appear, never values
  bool no_network = false;           // RUN --network=none: no network even when the build has a policy
  // COPY / ADD: context paths (patterns) and the destination, absolute (a trailing '/' kept).
  std::vector<std::string> sources;
  std::string dest;
  std::string chown, chmod;
  // RUN, COPY, ADD, WORKDIR: the state the step runs in; ENV, USER, LABEL...: the state after it.
  State state;
};

struct Plan {
  std::string from;  // FROM's reference, substituted
  size_t from_line = 0;
  std::vector<Step> steps;  // one per instruction, in order (ARGs before FROM and FROM included)
  std::map<std::string, std::string> labels;
  std::vector<std::string> unused_build_args;  // given with --build-arg but declared by no ARG
};

// FROM's reference, substituted with the ARGs declared before it (build args override their defaults).
std::string from_reference(const Recipe& recipe, const Vars& build_args);
// `base`: the env/workdir/user FROM gives (workdir "" = "/").
Plan plan_recipe(const Recipe& recipe, const Vars& build_args, const State& base);

}  // namespace sandlet::build
