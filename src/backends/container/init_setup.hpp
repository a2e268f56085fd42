// The host's end of the setup socket (the init's fd 3): what the init answers to each start-up step.
#pragma once
#include <sys/types.h>

#include <string>
#include <string_view>

#include "proto/init_protocol.hpp"

namespace sandlet::container {

// Waits (at most `timeout_ms`) for the init's answer to a start-up `step` and checks it is `want`: a
// kError frame becomes the init's own error; an exit, a timeout or another frame an INTERNAL/DEADLINE one
// that says what the init was doing.
void expect_setup_reply(int setup_fd, int init_pidfd, pid_t init_pid, proto::InitMsg want, const char* step,
                        int timeout_ms);
// The check of one reply (already read): a kError is the init's error; another type than `want` INTERNAL.
void check_setup_reply(proto::InitMsg type, std::string_view payload, proto::InitMsg want, const char* step);
// How the init (not yet reaped) ended, for error messages: "exit status N", "killed by signal N", ...
std::string describe_init_exit(int pidfd);

}  // namespace sandlet::container
