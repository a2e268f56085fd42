// A fanotify group of class pre-content: the kernel holds every read of a marked file's range until the
// group answers (FAN_PRE_ACCESS, Linux 6.14). Debian's headers predate these constants, hence our own.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "sys/fd.hpp"

namespace sandlet::lazy {

constexpr uint64_t kFanPreAccess = 0x00100000;
constexpr unsigned kFanClassPreContent = 0x08;
constexpr uint8_t kFanInfoRange = 6;
constexpr uint32_t kFanAllow = 0x01;
constexpr uint32_t kFanDeny = 0x02;
inline constexpr uint32_t fan_deny_errno(int e) { return kFanDeny | ((static_cast<uint32_t>(e) & 0xff) << 24); }

struct AccessEvent {
  int fd = -1;          // the event's descriptor (ours to close once answered)
  int pid = 0;
  uint64_t offset = 0;  // the range the reader wants
  uint64_t count = 0;
};

// Opens a new group (non-blocking, close-on-exec, unlimited queue). Throws kUnimplemented naming the feature
// when the kernel has no pre-content events.
sys::UniqueFd open_pre_content_group();
// Marks (or unmarks) one file: every read of it becomes an event until unmarked.
void mark_file(int group, int file_fd, bool add);
// Reads what is queued (EAGAIN: nothing). Malformed records are skipped (and their descriptor closed).
std::vector<AccessEvent> read_events(int group);
// Answers one event; the descriptor is not closed here.
bool respond(int group, int event_fd, uint32_t response);
// Why this kernel cannot do pre-content events ("" = it can): probed once with a throw-away group.
const std::string& pre_content_unavailable();

}  // namespace sandlet::lazy
