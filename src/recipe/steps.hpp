// The parts of a build step that run inside its sandbox: a RUN's command with its output streamed to the
// progress callback on the building thread, a COPY's files written through the agent, WORKDIR's mkdir.
#pragma once
#include <functional>
#include <string>

#include "recipe/build_options.hpp"
#include "recipe/plan.hpp"
#include "recipe/context.hpp"
#include "runtime/sandbox.hpp"

namespace sandlet::build {

struct StepRun {
  const BuildOptions& options;
  const std::string& recipe;
  size_t index = 0, count = 0;  // 1-based step number, of `count`
  std::function<bool()> cancelled;
  std::string network;  // a failed RUN's note on the network it had (network_note)
  // "step N/M (RECIPE:LINE INSTRUCTION)": how errors name the step.
  std::string where(const Step& st) const;
};

void run_step(Sandbox& sb, const Step& st, const StepRun& run);
void copy_step(Sandbox& sb, const Step& st, const CopyInputs& in, const StepRun& run);
void workdir_step(Sandbox& sb, const Step& st, const StepRun& run);

}  // namespace sandlet::build
