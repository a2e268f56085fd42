// Small filesystem and /proc helpers with errno-carrying errors.
#pragma once
#include <sys/stat.h>
#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sys/fd.hpp"

namespace sandlet::sys {

// Reads a whole (small) file; throws on error. `max` caps what is read back from disk.
std::string read_file(const std::string& path, size_t max = 16u << 20);
// Returns nullopt when the file does not exist; throws on other errors.
std::optional<std::string> read_file_if_exists(const std::string& path, size_t max = 16u << 20);
// The number a small file (a cgroup or /proc counter) starts with; nullopt when absent or not a number.
std::optional<uint64_t> read_u64_file(const std::string& path);
// Writes via a temp file + rename, so readers never see a partial file.
// `written`, when given, gets the new file's stat as it was once in place (the caller can tell later
// whether the path still names it); all zero if that stat failed.
void write_file_atomic(const std::string& path, const std::string& data, mode_t mode = 0600,
                       struct stat* written = nullptr);
// Creates `path` (which must not exist) with `data`: for files in a directory nobody else sees yet.
void write_new_file(const std::string& path, const std::string& data, mode_t mode = 0600);
// Writes `data` to an existing file (cgroup and /proc knobs); throws naming the path.
void write_existing(const std::string& path, const std::string& data);
// Same, relative to a directory fd.
void write_existing_at(int dirfd, const char* name, const std::string& data);
// Best effort (a knob the host may refuse): 0, or the errno of the failed open/write. No exception,
// so an expected refusal costs no unwinding on a hot path.
int try_write_existing(const std::string& path, const std::string& data);
// Creates `path` and any missing parents; existing ones are fine.
void mkdir_p(const std::string& path, mode_t mode = 0755);
// Removes a directory tree without following symlinks; ENOENT is not an error.
void remove_tree(const std::string& path);
std::vector<std::string> list_dir(const std::string& path);  // names, without . and ..; empty if missing
std::vector<std::string> list_subdirs(const std::string& path);  // directories only (d_type; no stat per entry)
// Opens (creating, mode 0600) the lock file `path` and takes flock `how` (LOCK_SH / LOCK_EX), waiting for it.
// The lock lives as long as the returned descriptor.
UniqueFd lock_file(const std::string& path, int how);

// Start time of a process in clock ticks since boot (field 22 of /proc/PID/stat); nullopt if gone.
// Together with the pid it identifies a process across pid reuse.
std::optional<uint64_t> process_start_time(pid_t pid);
// This process's start time, read once per process (every create records its owner).
uint64_t own_start_time();
// True when `pid` runs (not a zombie) and started at `start`.
bool process_alive(pid_t pid, uint64_t start);
double now_unix_seconds();
uint64_t now_monotonic_ns();
std::string random_hex(size_t bytes);

}  // namespace sandlet::sys
