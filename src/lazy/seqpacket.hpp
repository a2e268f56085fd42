// Unix SOCK_SEQPACKET sockets: one message per send, boundaries kept (the loader's control socket and the
// pair between its processes).
#pragma once
#include <string>
#include <vector>

#include "sys/fd.hpp"

namespace sandlet::lazy {

sys::UniqueFd seqpacket_listen(const std::string& path);  // replaces a stale socket file; mode 0600
sys::UniqueFd seqpacket_connect(const std::string& path);  // throws kUnavailable when nobody listens
void seqpacket_pair(sys::UniqueFd& a, sys::UniqueFd& b);
// One request and its reply, with a timeout (kDeadlineExceeded).
std::string seqpacket_call(int fd, const std::string& request, size_t max_reply, int timeout_ms);
// Receives one message and the descriptors sent with it (at most `max_fds`, the rest closed).
std::string seqpacket_recv(int fd, size_t max, std::vector<sys::UniqueFd>* fds, bool* eof);

}  // namespace sandlet::lazy
