#include "lazy/fanotify_group.hpp"

#include <fcntl.h>
#include <sys/fanotify.h>
#include <unistd.h>

#include <cstring>
#include <mutex>

#include "common/error.hpp"

namespace sandlet::lazy {
namespace {

struct RangeInfo {
  fanotify_event_info_header hdr;
  uint32_t pad;
  uint64_t offset;
  uint64_t count;
};

}  // namespace

sys::UniqueFd open_pre_content_group() {
  int fd = ::fanotify_init(kFanClassPreContent | FAN_CLOEXEC | FAN_NONBLOCK | FAN_UNLIMITED_QUEUE,
                           O_RDWR | O_LARGEFILE | O_CLOEXEC);
  if (fd < 0) {
    int e = errno;
    throw Error(e == EINVAL ? Code::kUnimplemented : code_from_errno(e),
                std::string("fanotify_init(pre-content): ") + std::strerror(e) +
                    (e == EINVAL ? " (the kernel has no fanotify pre-content events, Linux 6.14)" : ""),
                e);
  }
  return sys::UniqueFd(fd);
}

void mark_file(int group, int file_fd, bool add) {
  if (::fanotify_mark(group, add ? FAN_MARK_ADD : FAN_MARK_REMOVE, kFanPreAccess, file_fd, nullptr) != 0) {
    int e = errno;
    if (!add && e == ENOENT) return;  // never marked, or already gone
    throw Error(e == EINVAL ? Code::kUnimplemented : code_from_errno(e),
                std::string("fanotify_mark(FAN_PRE_ACCESS): ") + std::strerror(e) +
                    (e == EINVAL ? " (the kernel has no fanotify pre-content events, Linux 6.14)" : ""),
                e);
  }
}

std::vector<AccessEvent> read_events(int group) {
  std::vector<AccessEvent> out;
  alignas(fanotify_event_metadata) char buf[64 * 1024];
  ssize_t n = ::read(group, buf, sizeof buf);
  if (n <= 0) return out;
  size_t pos = 0;
  while (pos + sizeof(fanotify_event_metadata) <= static_cast<size_t>(n)) {
    fanotify_event_metadata m;
    std::memcpy(&m, buf + pos, sizeof m);
    if (m.event_len < sizeof m || pos + m.event_len > static_cast<size_t>(n)) break;
    AccessEvent ev;
    ev.fd = m.fd;
    ev.pid = m.pid;
    bool have_range = false;
    for (size_t info = pos + m.metadata_len; info + sizeof(fanotify_event_info_header) <= pos + m.event_len;) {
      fanotify_event_info_header h;
      std::memcpy(&h, buf + info, sizeof h);
      if (h.len < sizeof h || info + h.len > pos + m.event_len) break;
      if (h.info_type == kFanInfoRange && h.len >= sizeof(RangeInfo)) {
        RangeInfo r;
        std::memcpy(&r, buf + info, sizeof r);
        ev.offset = r.offset;
        ev.count = r.count;
        have_range = true;
      }
      info += h.len;
    }
    if ((m.mask & kFanPreAccess) && m.fd >= 0) {
      // No range record: the whole file (the kernel sends none for some accesses, e.g. an open for write).
      if (!have_range) {
        ev.offset = 0;
        ev.count = UINT64_MAX;
      }
      out.push_back(ev);
    } else if (m.fd >= 0) {
      // Not ours to judge (an overflow or another event type): let it through and drop the descriptor.
      respond(group, m.fd, kFanAllow);
      ::close(m.fd);
    }
    pos += m.event_len;
  }
  return out;
}

bool respond(int group, int event_fd, uint32_t response) {
  fanotify_response r{event_fd, response};
  return ::write(group, &r, sizeof r) == static_cast<ssize_t>(sizeof r);
}

const std::string& pre_content_unavailable() {
  static std::once_flag once;
  static std::string why;
  std::call_once(once, [] {
    try {
      sys::UniqueFd g = open_pre_content_group();
      // The group alone is not enough: a kernel without the event refuses the mark.
      char path[] = "/tmp/.sandlet-precontent-XXXXXX";
      int f = ::mkstemp(path);
      if (f < 0) {
        why = "cannot make a probe file in /tmp";
        return;
      }
      ::unlink(path);
      try {
        mark_file(g.get(), f, true);
      } catch (const Error& e) {
        why = e.what();
      }
      ::close(f);
    } catch (const Error& e) {
      why = e.what();
    }
  });
  return why;
}

}  // namespace sandlet::lazy
