// File calls act with the file-system credentials of the sandbox user they are for (guest/files.cpp,
// guest/tree_files.cpp): the kernel then checks each path operation as it would that user's own.
#pragma once
#include <sys/syscall.h>
#include <unistd.h>

#include <string>

#include "guest/status.hpp"
#include "guest/users.hpp"

namespace sandlet::guest {

// While alive, this thread's file-system credentials are `id`'s (nothing to switch for root). The agent is
// single-threaded and the raw system calls change only the calling thread. Leaving restores root with
// no supplementary groups (the agent needs none; every command it spawns sets its own).
class AsUser final {
 public:
  AsUser(const Identity& id, const std::string& path) {
    if (id.uid == 0) return;
    active_ = true;
    if (syscall(SYS_setgroups, id.groups.size(), id.groups.data()) != 0) {
      status_ = errno_statusf(errno, "file access to \"%s\" as uid %u: setgroups", path.c_str(), id.uid);
      return;
    }
    syscall(SYS_setfsgid, id.gid);
    syscall(SYS_setfsuid, id.uid);
    // setfs[ug]id report no error; asking with -1 returns the value in force.
    if (static_cast<uid_t>(syscall(SYS_setfsuid, -1)) != id.uid || static_cast<gid_t>(syscall(SYS_setfsgid, -1)) != id.gid)
      status_ = make_status(SANDLET_INTERNAL, 0, "file access to \"" + path + "\": setfsuid/setfsgid refused");
  }
  ~AsUser() {
    if (!active_) return;
    syscall(SYS_setfsuid, 0);
    syscall(SYS_setfsgid, 0);
    syscall(SYS_setgroups, 0, nullptr);
  }
  AsUser(const AsUser&) = delete;
  AsUser& operator=(const AsUser&) = delete;
  const Status& status() const { return status_; }

 private:
  bool active_ = false;
  Status status_;
};

}  // namespace sandlet::guest
