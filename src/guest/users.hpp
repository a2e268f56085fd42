// User resolution for execs and file ownership: "uid", "uid:gid", "name", "name:group" (group numeric or
// a name), resolved through the sandbox's own /etc/passwd and /etc/group (parsed here: the static agent
// must not depend on NSS modules of whatever image it runs in).
#pragma once
#include <sys/types.h>

#include <string>
#include <string_view>
#include <vector>

#include "guest/status.hpp"

namespace sandlet::guest {

struct Identity {
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;  // for setgroups(): the primary gid plus /etc/group memberships
  std::string name;           // passwd name; empty when the uid has no passwd entry
  std::string home = "/";     // passwd home, "/" when unknown (what Docker does)
};

class UserDb final {
 public:
  // spec "" means root. Unknown names fail with NOT_FOUND; numeric ids need no passwd entry.
  Status resolve(std::string_view spec, Identity* out);

 private:
  struct File {
    std::string path;
    std::string content;
    // Identity of the version parsed last: re-read only when the file changed (cheap stat per exec).
    dev_t dev = 0;
    ino_t ino = 0;
    off_t size = -1;
    long mtime_sec = 0, mtime_nsec = 0;
  };
  bool refresh(File* f);  // returns true when the content changed

  File passwd_{"/etc/passwd", {}, 0, 0, -1, 0, 0};
  File group_{"/etc/group", {}, 0, 0, -1, 0, 0};
  std::string cached_spec_;
  Identity cached_;
  bool cache_valid_ = false;
};

}  // namespace sandlet::guest
