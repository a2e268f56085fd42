// The report a one-shot sandbox sends when its command has ended (runtime/run_once.cpp).
#pragma once
#include <string>

#include "runtime/sandbox.hpp"

namespace sandlet {

// Reads the one frame on `fd`: kExit (the outcome), or kError when the command could not be started
// (thrown as that error). End of file first means the sandbox died (killed, or destroyed by runtime close):
// UNAVAILABLE. `id` names the sandbox in messages.
ExecOutcome read_report(int fd, const std::string& id);

}  // namespace sandlet
