// What the cold-start scenario (issue 17) runs around sandlet: a static file server (Debian's nginx) over a
// temp directory on loopback, the throttling proxy in front of it (bench/throttle_proxy.py), a plain HTTP
// GET, page-cache dropping of given files, and disk-write counters.
#pragma once

#include <sys/types.h>

#include <boost/json.hpp>

#include <cstdint>
#include <filesystem>
#include <string>

namespace bench {

// A port on 127.0.0.1 that was free a moment ago (bound to port 0, then closed).
int free_loopback_port();
// True once a TCP connect to 127.0.0.1:port succeeds (polls up to timeout_ms).
bool wait_port(int port, int timeout_ms);

// nginx serving `www` (read-only GETs with ranges; PUT/MKCOL/DELETE for WebDAV pushes) on 127.0.0.1,
// master and one worker, no access log; config, pid, logs and temp files under `prefix`. Killed with its
// workers on destruction.
class Nginx final {
 public:
  Nginx(const std::filesystem::path &prefix, const std::filesystem::path &www);
  ~Nginx();
  Nginx(const Nginx &) = delete;
  Nginx &operator=(const Nginx &) = delete;
  int port() const { return port_; }
  std::string version() const;

 private:
  pid_t pid_ = -1;
  int port_ = 0;
};

// bench/throttle_proxy.py in front of 127.0.0.1:upstream_port: `rate_mbps` MB/s (1e6 bytes) shared by all
// connections, upstream to client. Its stdin is a pipe we hold (it exits when we do) and it has a maximum
// lifetime of its own. Killed on destruction.
class ThrottleProxy final {
 public:
  ThrottleProxy(const std::filesystem::path &script, int upstream_port, double rate_mbps, double max_lifetime_s);
  ~ThrottleProxy();
  ThrottleProxy(const ThrottleProxy &) = delete;
  ThrottleProxy &operator=(const ThrottleProxy &) = delete;
  int port() const { return port_; }
  // The proxy's counters ({"down_bytes", "up_bytes", "connections", ...}), read over its control port.
  boost::json::object stats() const;
  std::uint64_t down_bytes() const;

 private:
  pid_t pid_ = -1;
  int stdin_fd_ = -1;
  int port_ = 0, control_port_ = 0;
};

// GET http://127.0.0.1:port<path> (HTTP/1.0), the body written to `out_fd`. Returns the body's bytes;
// throws on a connection error, a status other than 200, or a short body.
std::uint64_t http_get_to_fd(int port, const std::string &path, int out_fd);

// posix_fadvise(POSIX_FADV_DONTNEED) on every regular file at or under `p` (symlinks followed at the top
// only): their clean pages leave the page cache, so the next read comes from the disk. Returns the bytes of
// the files advised.
std::uint64_t drop_page_cache(const std::filesystem::path &p);

// Bytes allocated on disk (st_blocks * 512) by the files under `p`, not crossing into other mounts, each
// inode counted once.
std::uint64_t allocated_bytes(const std::filesystem::path &p);
// Bytes of file content (st_size of regular files and symlinks) under `p`, as `du -sb` counts them.
std::uint64_t apparent_bytes(const std::filesystem::path &p);

// The block device a path lives on: its sectors-written counter (/sys/dev/block/M:m/stat, field 7).
class BlockDevice final {
 public:
  explicit BlockDevice(const std::filesystem::path &on);
  bool ok() const { return !stat_.empty(); }
  const std::string &name() const { return name_; }
  // syncfs of the filesystem first, so what was written so far has reached the device; then the counter.
  std::uint64_t written_bytes() const;

 private:
  std::filesystem::path on_, stat_;
  std::string name_;
};

// SIGTERM to a process that is not our child (a daemon the library started), SIGKILL after `grace_ms`;
// true when it is gone.
bool stop_foreign_process(pid_t pid, int grace_ms);

}  // namespace bench
