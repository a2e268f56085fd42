// The host's side of a container sandbox's seccomp denial log (proto/denial_log.hpp): the file is made in
// the sandbox's directory at create and handed to the init; anyone reads it, also after the sandbox ended
// (until reclaim removes the directory).
#pragma once
#include <boost/json/object.hpp>
#include <cstdint>
#include <string>

#include "sys/fd.hpp"

namespace sandlet::container {

// `<dir>/seccomp-denials`, zero-filled at its fixed size, opened read-write for the init.
sys::UniqueFd make_denial_log(const std::string& dir);

// {"counted": bool, "denied": total, "by_syscall": {name: count}, "records": [{"seq", "syscall", "nr",
// "pid", "time_ns", "errno", "args", and for socket/socketpair "family"}, oldest first, seq > after_seq]}
// ("errno", "args" and "family" are missing from a version 1 log). A missing file (a sandbox made before
// this version, or by a backend without the log) reads as {"counted": false, "denied": 0, ...}.
// Everything in the file is range-checked: the init that wrote it ran inside the sandbox.
boost::json::object read_denial_log(const std::string& dir, uint64_t after_seq = 0);

}  // namespace sandlet::container
