// PID 1 of a microVM guest: boots (guest_boot.hpp), starts the agent in a child process, and then carries
// the channel's streams between the virtio-serial port and the agent (stream_mux.hpp): every stream the
// host opens becomes one end of a socketpair, the other end handed to the agent over a private socket no
// process of the sandbox can reach. The VM powers off when the agent ends.
#pragma once

namespace sandlet::guest::vm {

[[noreturn]] void run_pid1();

// The agent's process (vm_server.cpp): `ctl` is its end of the private socket. Reads the configuration
// from the first stream (the boot port), sets the sandbox up, answers ready there, then serves.
[[noreturn]] void run_server(int ctl);

// The name of the port the host's multiplexer talks on.
constexpr const char* kPortName = "sandlet.0";

}  // namespace sandlet::guest::vm
