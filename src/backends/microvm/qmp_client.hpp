// One QMP command to a microVM's QEMU (its monitor socket in the sandbox directory): the greeting, the
// capabilities handshake, the command, its answer. QEMU's answers are bounded and checked.
#pragma once
#include <string>

namespace sandlet::microvm {

// Runs `command` (e.g. "stop", "cont"); throws UNAVAILABLE when QEMU does not answer in time, INTERNAL
// with QEMU's error when it refuses.
void qmp_command(const std::string& socket_path, const std::string& command, int timeout_ms);

}  // namespace sandlet::microvm
