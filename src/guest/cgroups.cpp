#include "guest/cgroups.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

namespace sandlet::guest {
namespace {

void slot_name(uint32_t id, char (&name)[16]) { snprintf(name, sizeof name, "x%u", id); }

}  // namespace

Status ExecCgroups::acquire(CgroupSlot* out) {
  if (!doomed_.empty()) retry_removals();
  if (!idle_.empty()) {
    *out = idle_.back();
    idle_.pop_back();
    return Status::Ok();
  }
  char name[16];
  for (int attempt = 0;; ++attempt) {
    uint32_t id = next_id_++;
    slot_name(id, name);
    if (mkdirat(root_, name, 0755) == 0) {
      out->id = id;
      break;
    }
    // A sandbox root that mounted cgroup2 itself may have taken the name: try the next one.
    if (errno != EEXIST || attempt > 64) return errno_statusf(errno, "create exec cgroup %s", name);
  }
  out->killed = false;
  out->dirfd = openat(root_, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  out->eventsfd = out->dirfd < 0 ? -1 : openat(out->dirfd, "cgroup.events", O_RDONLY | O_CLOEXEC);
  if (out->eventsfd < 0) {
    Status s = errno_statusf(errno, "open exec cgroup %s", name);
    close_slot(out);
    unlinkat(root_, name, AT_REMOVEDIR);
    return s;
  }
  return Status::Ok();
}

void ExecCgroups::close_slot(CgroupSlot* slot) {
  if (slot->dirfd >= 0) close(slot->dirfd);
  if (slot->eventsfd >= 0) close(slot->eventsfd);
  *slot = CgroupSlot{};
}

void ExecCgroups::release(CgroupSlot* slot) {
  if (!slot->valid()) return;
  if (!slot->killed && idle_.size() < kMaxIdle) {
    idle_.push_back(*slot);
    *slot = CgroupSlot{};
    return;
  }
  char name[16];
  slot_name(slot->id, name);
  if (unlinkat(root_, name, AT_REMOVEDIR) != 0 && errno == EBUSY) doomed_.push_back(slot->id);
  close_slot(slot);
}

void ExecCgroups::retry_removals() {
  char name[16];
  size_t keep = 0;
  for (uint32_t id : doomed_) {
    slot_name(id, name);
    if (unlinkat(root_, name, AT_REMOVEDIR) != 0 && errno == EBUSY) doomed_[keep++] = id;
  }
  doomed_.resize(keep);
}

bool ExecCgroups::populated(const CgroupSlot& slot) {
  char buf[128];
  ssize_t n = pread(slot.eventsfd, buf, sizeof buf - 1, 0);
  if (n <= 0) return true;  // unknown: assume something may still run
  buf[n] = 0;
  const char* p = strstr(buf, "populated ");
  return !p || p[10] != '0';
}

bool ExecCgroups::kill_all(CgroupSlot* slot) {
  slot->killed = true;
  int fd = openat(slot->dirfd, "cgroup.kill", O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  bool ok = write(fd, "1", 1) == 1;
  close(fd);
  return ok;
}

Status ExecCgroups::signal_all(const CgroupSlot& slot, int sig) {
  int fd = openat(slot.dirfd, "cgroup.procs", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno_status(errno, "open cgroup.procs");
  char buf[8192];
  pid_t pid = 0;
  bool in_number = false;
  for (;;) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n <= 0) break;
    for (ssize_t i = 0; i < n; ++i) {
      char c = buf[i];
      if (c >= '0' && c <= '9') {
        pid = pid * 10 + (c - '0');
        in_number = true;
      } else if (in_number) {
        kill(pid, sig);
        pid = 0;
        in_number = false;
      }
    }
  }
  if (in_number) kill(pid, sig);
  close(fd);
  return Status::Ok();
}

}  // namespace sandlet::guest
