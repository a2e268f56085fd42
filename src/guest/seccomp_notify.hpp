// Counted seccomp denials. The sandbox's filter denies with an errno (EPERM; EAFNOSUPPORT for a refused
// socket family, ...); to count and record each denial without changing what the caller sees, the init
// installs it with every SECCOMP_RET_ERRNO result turned into SECCOMP_RET_USER_NOTIF, and a supervisor
// thread of its own answers each notification with the errno the program as compiled gives that call
// (guest/seccomp_eval.hpp) after recording it in the denial log (proto/denial_log.hpp) the host handed it.
// Allowed calls run the same program as before and never reach the thread.
#pragma once
#include <string>

#include "guest/status.hpp"

namespace sandlet::guest {

// Installs `bpf` (as install_seccomp does). With `log_fd` >= 0 (the kInitHasDenialLog file, closed here):
// counted as above; where the kernel gives no listener, installed as it is and the log says so.
Status install_seccomp_counted(std::string& bpf, int log_fd);

}  // namespace sandlet::guest
