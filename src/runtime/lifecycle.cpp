#include "runtime/lifecycle.hpp"

#include "common/error.hpp"

namespace sandlet {

const char* state_name(SandboxState s) {
  switch (s) {
    case SandboxState::kCreating: return "creating";
    case SandboxState::kPooled: return "pooled";
    case SandboxState::kRunning: return "running";
    case SandboxState::kPaused: return "paused";
    case SandboxState::kEnding: return "ending";
    case SandboxState::kReclaimed: return "reclaimed";
  }
  return "unknown";
}

std::optional<SandboxState> state_from_name(std::string_view name) {
  for (auto s : {SandboxState::kCreating, SandboxState::kPooled, SandboxState::kRunning, SandboxState::kPaused,
                 SandboxState::kEnding, SandboxState::kReclaimed})
    if (name == state_name(s)) return s;
  return std::nullopt;
}

bool transition_allowed(SandboxState from, SandboxState to) {
  using S = SandboxState;
  switch (from) {
    case S::kCreating: return to == S::kRunning || to == S::kEnding;
    case S::kPooled: return to == S::kRunning || to == S::kEnding;
    case S::kRunning: return to == S::kPaused || to == S::kEnding;
    case S::kPaused: return to == S::kRunning || to == S::kEnding;
    case S::kEnding: return to == S::kReclaimed;
    case S::kReclaimed: return false;
  }
  return false;
}

void check_transition(const std::string& id, SandboxState from, SandboxState to) {
  if (!transition_allowed(from, to))
    throw Error(Code::kFailedPrecondition,
                "sandbox " + id + " is " + state_name(from) + ": it cannot become " + state_name(to));
}

GcVerdict gc_verdict(const GcFacts& f) {
  using S = SandboxState;
  if (f.retired || f.state == S::kEnding) return GcVerdict::kFinish;
  switch (f.state) {
    case S::kCreating:
    case S::kPooled:
      // Half made: its creator finishes or abandons it, unless the creator is gone.
      return f.owner_alive ? GcVerdict::kKeep : GcVerdict::kEnd;
    case S::kRunning:
    case S::kPaused:
      if (!f.sandbox_alive) return GcVerdict::kEnd;                 // died (crash, lifetime)
      if (!f.detached && !f.owner_alive) return GcVerdict::kEnd;    // owned, owner gone
      if (f.deadline > 0 && f.now > f.deadline) return GcVerdict::kEnd;
      return GcVerdict::kKeep;
    default:
      return GcVerdict::kFinish;
  }
}

}  // namespace sandlet
