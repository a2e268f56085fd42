// `sandlet build`: runs a recipe against a Runtime (docs/BUILD.md). Each RUN, COPY/ADD and WORKDIR step
// runs in a fresh sandbox on the layers so far and is packed with Sandbox::snapshot into a layer of role
// "diff"; ENV, USER, LABEL and ARG only change what later steps and the result get. Steps are cached
// (build_cache.hpp). The result is the final stack of layers plus env/workdir/user, optionally stored as
// an environment. Everything that can be checked without a sandbox (the recipe, the context, FROM, every
// COPY's files) is checked before the first one is made; a failed build leaves no sandbox and no layer it
// made behind.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "recipe/build_options.hpp"
#include "recipe/plan.hpp"

namespace sandlet {
class Runtime;
}

namespace sandlet::build {

struct StepReport {
  size_t line = 0;
  std::string instruction;
  bool cached = false;
  std::string layer;  // the layer it made or reused ("" for steps that make none)
};

struct BuildResult {
  std::string recipe;
  std::vector<std::string> layers;  // digests, lowest first
  std::string environment;          // "NAME@N", or "" without a tag
  State state;                      // env, workdir, user of the result
  std::map<std::string, std::string> labels;
  std::vector<StepReport> steps;
  size_t cached_steps = 0;
  size_t sandboxes = 0;  // sandboxes the build created
  std::vector<std::string> notes;
  std::vector<std::string> unused_build_args;
  std::string to_json() const;
};

// Runs the build on the calling thread (not the runtime's event-loop thread). Throws Error: INVALID_ARGUMENT
// for bad input ("RECIPE:LINE: why"), the step's failure ("step N/M (RECIPE:LINE RUN ...): exit status X"),
// CANCELLED when cancelled.
BuildResult build(Runtime& rt, const BuildOptions& options);

}  // namespace sandlet::build
