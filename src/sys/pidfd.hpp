// Process descriptors: a pidfd names one process for good (a reused pid is never signalled through it).
#pragma once
#include <sys/types.h>

#include <cstdint>

#include "sys/fd.hpp"

namespace sandlet::sys {

// A pidfd of `pid` if it is still the process that started at `start` (process_start_time), else empty.
UniqueFd open_pidfd_checked(pid_t pid, uint64_t start) noexcept;
// Sends `signo` through the pidfd; false (errno set) when it failed, e.g. ESRCH once it has exited.
bool pidfd_signal(int pidfd, int signo) noexcept;
// Waits until the process has exited or `timeout_ms` passed (-1: no limit). True when it has exited.
bool pidfd_wait_exit(int pidfd, int timeout_ms) noexcept;
// For a child of ours: reaps it if it has exited. True when it had (now or before), false while it runs.
bool pidfd_reap_if_exited(int pidfd) noexcept;

}  // namespace sandlet::sys
