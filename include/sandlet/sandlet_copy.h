/*
 * sandlet — the C ABI of directory copies into and out of a sandbox, as `docker cp` makes them. Part of
 * sandlet.h, which includes it at its end: include sandlet.h, not this file. The conventions at the top of
 * sandlet.h apply.
 *
 * A copy moves a tree — a directory with everything under it, or one file, symlink or FIFO — over the
 * sandbox's agent channel as a stream of entries (what a tar header holds) and file data: modes (set-id
 * and sticky bits included), modification times, symlinks (as links, never followed), hard links (kept
 * as links when both ends are in the copy), empty directories and FIFOs. Sockets and device nodes are
 * left out and counted (`skipped`). The source becomes the destination: an existing directory there is
 * merged into (it and the directories already in it keep their own mode and owner; files, links and FIFOs
 * replace what had their name, each atomically), missing parents are made. A failed copy leaves what it
 * had placed (as tar does) and no temporary file.
 *
 * Nothing leaves its destination. Into a sandbox, every entry is made beneath the destination by the
 * agent with the user's credentials, and a symlink met on the way that leads outside it (absolute, or by
 * "..") fails the copy with PERMISSION_DENIED. Out of a sandbox, what the sandbox sends is hostile: no
 * symlink is followed below the destination at all, hard links may only name files of the same copy,
 * set-user-ID and set-group-ID bits are dropped, symlinks that would point outside the destination are left
 * out unless allow_outside_links, and max_bytes / max_entries cap what it may write.
 *
 * Owners: into a sandbox, everything belongs to `user` (default: the spec's user), unless keep_owners
 * gives each entry its source's uid and gid (the agent then works as root). Out of a sandbox, files belong
 * to the calling process's user unless keep_owners (which needs the caller to be root on the host).
 *
 * A copy blocks; any thread but the event loop's may make one. It resumes a paused sandbox first. The
 * agent moving no data for two minutes fails it with DEADLINE_EXCEEDED.
 */
#ifndef SANDLET_SANDLET_COPY_H
#define SANDLET_SANDLET_COPY_H

#ifndef SANDLET_SANDLET_H
#error "include <sandlet/sandlet.h>, which includes this file"
#endif

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sandlet_copy_stats {
  uint64_t entries; /* directories, files, links and FIFOs copied (the root included) */
  uint64_t bytes;   /* file data */
  uint64_t skipped; /* sockets and device nodes left out */
} sandlet_copy_stats_t;

/* Called on the copying thread after each entry and every 4 MiB of data (progress bars). Returning non-zero
   stops the copy, which then fails with CANCELLED (what it placed so far stays). */
typedef int (*sandlet_copy_progress_cb)(void *user_data, const sandlet_copy_stats_t *so_far);

typedef struct sandlet_copy_options {
  uint32_t size;          /* sizeof(sandlet_copy_options_t) */
  int keep_owners;        /* non-zero: each entry keeps its source's uid and gid (see above) */
  const char *user;       /* NULL = the spec's user: whose credentials read or write inside, and who owns
                             what a copy into the sandbox makes; "uid[:gid]" or a name from /etc/passwd */
  int follow_links;       /* non-zero: a symlink named as the source is followed (else it is copied as a
                             link); links below the source are always copied as links */
  int allow_outside_links; /* out of a sandbox: non-zero makes symlinks that point outside the destination
                             (absolute, or climbing out with ".."), as docker cp does; by default they are
                             left out and counted in `skipped` (a host program that later followed one
                             would read or write a host file), and a source that is such a link fails */
  uint64_t max_bytes;     /* out of a sandbox: file data in all; more is OUT_OF_RANGE. 0 = 8 GiB */
  uint64_t max_entries;   /* out of a sandbox: entries in all; more is OUT_OF_RANGE. 0 = 1,048,576 */
  sandlet_copy_progress_cb progress; /* NULL = none */
  void *progress_user_data;
} sandlet_copy_options_t;

#define SANDLET_COPY_OPTIONS_INIT {sizeof(sandlet_copy_options_t), 0, 0, 0, 0, 0, 0, 0, 0}

/* `host_path` (a directory, file, symlink or FIFO on the host) becomes `path` (absolute) in the sandbox.
   `opts` and `stats` may be NULL. */
SANDLET_API sandlet_error_t *sandlet_sandbox_copy_in(sandlet_sandbox_t *sb, const char *host_path, const char *path,
                                                     const sandlet_copy_options_t *opts, sandlet_copy_stats_t *stats);
/* `path` in the sandbox becomes `host_path` on the host. */
SANDLET_API sandlet_error_t *sandlet_sandbox_copy_out(sandlet_sandbox_t *sb, const char *path, const char *host_path,
                                                      const sandlet_copy_options_t *opts, sandlet_copy_stats_t *stats);
/* Unpacks a tar stream read from `fd` (to its end; plain, gzip or zstd; any of tar's formats) at `path`,
   which becomes the archive's root ("./"): as `docker cp - ID:path` does. Members whose directories the
   archive lacks get them (0755). The caller keeps `fd`. */
SANDLET_API sandlet_error_t *sandlet_sandbox_put_archive(sandlet_sandbox_t *sb, int fd, const char *path,
                                                         const sandlet_copy_options_t *opts,
                                                         sandlet_copy_stats_t *stats);
/* Writes `path` to `fd` as a POSIX tar stream, its members named under the path's last component
   ("dir", "dir/a", ...; a copy of "/" from "./"), as `docker cp ID:path -` does. */
SANDLET_API sandlet_error_t *sandlet_sandbox_get_archive(sandlet_sandbox_t *sb, const char *path, int fd,
                                                         const sandlet_copy_options_t *opts,
                                                         sandlet_copy_stats_t *stats);

#ifdef __cplusplus
}
#endif

#endif /* SANDLET_SANDLET_COPY_H */
