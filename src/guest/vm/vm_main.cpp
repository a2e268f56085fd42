// sandlet-vm-init: one static binary with two roles. As PID 1 (the microVM's /init in its initramfs) it
// boots the guest and serves the agent (guest_pid1.hpp); run on the host as `host-mux` it is the VM's
// channel multiplexer and QEMU's parent (host_mux.cpp). One binary, so both ends of the channel are
// always the same build.
#include <unistd.h>

#include <cstring>

#include "guest/status.hpp"
#include "guest/vm/guest_pid1.hpp"

namespace sandlet::guest::vm {
int host_mux_main(int argc, char** argv, char** envp);
}

int main(int argc, char** argv, char** envp) {
  if (getpid() == 1) sandlet::guest::vm::run_pid1();
  if (argc >= 2 && std::strcmp(argv[1], "host-mux") == 0) return sandlet::guest::vm::host_mux_main(argc, argv, envp);
  sandlet::guest::log_line("sandlet-vm-init: runs as a microVM's PID 1, or as `host-mux` on the host");
  return 2;
}
