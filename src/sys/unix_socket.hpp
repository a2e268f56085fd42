// Unix-domain socket helpers. Paths longer than sun_path are reached through /proc/self/fd/N of their
// directory, so deep runtime roots work.
#pragma once
#include <string>
#include <vector>

#include "sys/fd.hpp"

namespace sandlet::sys {

// A listening SOCK_STREAM socket bound at `path` (mode 0600 via the directory; the file is replaced).
UniqueFd listen_unix(const std::string& path, int backlog = 4096);
// A connected, non-blocking SOCK_STREAM socket. Throws UNAVAILABLE when nobody listens.
UniqueFd connect_unix(const std::string& path);
// Sends bytes with file descriptors attached (SCM_RIGHTS). Blocking.
void send_with_fds(int sock, const std::string& bytes, const std::vector<int>& fds);
// Blocking socketpair, both ends CLOEXEC.
void socket_pair(UniqueFd& a, UniqueFd& b);

}  // namespace sandlet::sys
