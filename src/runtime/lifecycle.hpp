// The one lifecycle every sandbox goes through, whatever its backend:
//
//   creating ──> running <──> paused          (pooled: prepared ahead in a warm pool, no spec yet)
//      │  pooled ─┘ │            │
//      └────────────┴─> ending <─┘ ──> reclaimed
//
// Each state is persisted where a crash can find it: creating/pooled/running/paused in the record,
// ending by the sandbox directory's rename to .reclaim-<id> (atomic; the record inside says what to
// reclaim), reclaimed by the directory being gone. A crash can interrupt any state; gc_verdict says what
// the next runtime or `sandlet gc` does about each.
#pragma once
#include <optional>
#include <string>
#include <string_view>

namespace sandlet {

enum class SandboxState { kCreating, kPooled, kRunning, kPaused, kEnding, kReclaimed };

const char* state_name(SandboxState s);
std::optional<SandboxState> state_from_name(std::string_view name);
bool transition_allowed(SandboxState from, SandboxState to);
// Throws FAILED_PRECONDITION naming the sandbox and both states when the transition is not allowed.
void check_transition(const std::string& id, SandboxState from, SandboxState to);

// What gc does about one sandbox it finds.
enum class GcVerdict {
  kKeep,    // a live owner's, or a live detached sandbox within its lifetime
  kEnd,     // kill (if anything runs) and reclaim
  kFinish,  // ending already (a reclaim a crash interrupted): reclaim
};
struct GcFacts {
  SandboxState state;
  bool retired;        // found as .reclaim-<id>
  bool detached;       // spec.lifetime == detached
  bool owner_alive;    // the creating process still runs
  bool sandbox_alive;  // its backend says its top process runs
  double deadline;     // max lifetime, unix seconds (0 = none)
  double now;
};
GcVerdict gc_verdict(const GcFacts& facts);

}  // namespace sandlet
