/*
 * sandlet — the C ABI of snapshots, restore and fork. Part of sandlet.h, which includes it at its end:
 * include sandlet.h, not this file. The conventions at the top of sandlet.h apply.
 */
#ifndef SANDLET_SANDLET_SNAPSHOT_H
#define SANDLET_SANDLET_SNAPSHOT_H

#ifndef SANDLET_SANDLET_H
#error "include <sandlet/sandlet.h>, which includes this file"
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------------------------------
 * Snapshots, restore and fork
 *
 * A snapshot packs a sandbox's changes to its files — since it was created, or since its last snapshot
 * (incremental) — into a layer of the store with role "diff": new and changed files, deletions (whiteouts),
 * directories made anew (opaque), renames, modes, owners, xattrs, hard links, symlinks, sparse files, device
 * nodes and fifos. The layer's "stack" lists the layers it goes on, lowest first. The sandbox keeps running:
 * its processes are frozen only while the data written since a first pass is copied again (the result says
 * how long). Host directories mounted into the sandbox are never packed.
 * Restore: a spec whose lowest layer is a snapshot gets the snapshot's stack below it (create with layer
 * "sha256:<snapshot>" alone). A snapshot is an ordinary layer: listed, inspected, exported, removed and
 * garbage-collected like the others (a sandbox's last snapshot is kept while the sandbox lives; name a
 * snapshot to keep it).
 * Default excludes of sandlet_sandbox_snapshot (not of a fork): what /tmp and /var/tmp hold, /root/.cache,
 * the .deb files in /var/cache/apt/archives and what /var/lib/apt/lists holds.
 *
 * Fork children (sandlet_sandbox_fork, sandlet_snapshot_fork) — what each of the n children inherits:
 *   - files: exactly the parent's at the snapshot (a fork excludes nothing unless asked); each child has its
 *     own writable layer over the shared read-only ones, so what one child, or the parent, does later is
 *     seen by no other. Processes and memory are not forked by the container backend (they come with the
 *     VM backends).
 *   - identity: a new id; hostname "<parent's first label>-<i>"; a fresh random SANDLET_SEED (16 hex
 *     digits) in its environment; a fresh /etc/machine-id (where the image has /etc).
 *   - labels: the parent's, plus those of the call, plus "sandlet.parent" (the parent's id; not for a fork
 *     of a snapshot), "sandlet.snapshot" (the snapshot's digest) and "sandlet.fork_index" ("0".."n-1").
 *   - spec: the parent's as resolved at its create (environment defaults, limits, lifetime, network policy).
 * Snapshot result JSON (sandlet_sandbox_snapshot; "snapshot" of a fork result):
 *   "layer"       object   the layer object of the snapshot (see the layer store section; "stack" added)
 *   "existed"     bool     the store had it already (the same changes on the same layers)
 *   "frozen_ns"   integer  how long the sandbox's processes were frozen
 *   "total_ns"    integer  the whole call
 *   "entries"     integer  files, directories, links and whiteouts packed
 *   "bytes"       integer  file data packed
 *   "flattened"   bool     the chain below was merged into one layer (it had reached snapshot_max_depth)
 * ------------------------------------------------------------------------------------------------- */
typedef struct sandlet_snapshot_options {
  uint32_t size;               /* sizeof(sandlet_snapshot_options_t) */
  int full;                    /* non-zero: every change since the sandbox was created, not since its last snapshot */
  const char *const *exclude;  /* n_exclude absolute paths inside the sandbox, each left out with all below
                                  it; components may be fnmatch(3) globs (a '*' stays within one
                                  component); <= 256 */
  size_t n_exclude;
  const char *name;            /* NULL, or names the snapshot layer */
  int no_default_excludes;     /* non-zero: only `exclude` */
  uint32_t max_depth;          /* 0 = the runtime's snapshot_max_depth; else that (>= 2) for this snapshot */
} sandlet_snapshot_options_t;
#define SANDLET_SNAPSHOT_OPTIONS_INIT {sizeof(sandlet_snapshot_options_t), 0, 0, 0, 0, 0, 0}

/* Snapshots `sb`. `opts` may be NULL. *result_json (may be NULL): a snapshot result, free with sandlet_free.
   UNIMPLEMENTED where the backend cannot (SANDLET_CAP_SNAPSHOT). Blocks; not from a completion callback. */
SANDLET_API sandlet_error_t *sandlet_sandbox_snapshot(sandlet_sandbox_t *sb, const sandlet_snapshot_options_t *opts,
                                                      char **result_json);
/* The same without blocking: `cb` runs once on the runtime's event-loop thread with the error or the result
   JSON (both owned by the callee's caller: free them). */
typedef void (*sandlet_json_cb)(void *user_data, sandlet_error_t *err, char *result_json);
SANDLET_API sandlet_error_t *sandlet_sandbox_snapshot_async(sandlet_sandbox_t *sb, const sandlet_snapshot_options_t *opts,
                                                            sandlet_json_cb cb, void *user_data);

typedef struct sandlet_fork_options {
  uint32_t size;              /* sizeof(sandlet_fork_options_t) */
  int copy_secrets;           /* non-zero: children get the parent's secrets (spec "secrets") too */
  size_t n;                   /* children: 1..1024 */
  const char *const *labels;  /* n_labels "KEY=VALUE" strings added to the children's labels */
  size_t n_labels;
  const char *const *exclude; /* as in sandlet_snapshot_options_t (no default list for a fork) */
  size_t n_exclude;
  int detached;               /* non-zero: the children are detached (outlive this process) whatever the
                                 parent's lifetime */
  uint32_t max_depth;         /* as in sandlet_snapshot_options_t, for the fork's snapshot */
} sandlet_fork_options_t;
#define SANDLET_FORK_OPTIONS_INIT {sizeof(sandlet_fork_options_t), 0, 1, 0, 0, 0, 0, 0, 0}

/* The outcome of a fork: the snapshot, and per child a sandbox or an error. */
typedef struct sandlet_fork_result sandlet_fork_result_t;
/* One snapshot of `sb`, then opts->n children on it, made at once; returns when every child is ready or has
   failed. The call fails only when nothing could be forked (bad options, the snapshot failed); a child that
   failed has an error in the result. `opts` must not be NULL (it holds n). *out: free with
   sandlet_fork_result_delete. Blocks. */
SANDLET_API sandlet_error_t *sandlet_sandbox_fork(sandlet_sandbox_t *sb, const sandlet_fork_options_t *opts,
                                                  sandlet_fork_result_t **out);
typedef void (*sandlet_fork_cb)(void *user_data, sandlet_error_t *err, sandlet_fork_result_t *result);
SANDLET_API sandlet_error_t *sandlet_sandbox_fork_async(sandlet_sandbox_t *sb, const sandlet_fork_options_t *opts,
                                                        sandlet_fork_cb cb, void *user_data);
/* n children restored from the snapshot layer `snapshot` (a store reference), each with `base` (may be NULL:
   the default spec; its layers and environment are replaced by the snapshot's chain) and the child identity
   above ("sandlet.parent" is not set). NOT_FOUND for an unknown snapshot, INVALID_ARGUMENT for a layer that
   is not a snapshot. */
SANDLET_API sandlet_error_t *sandlet_snapshot_fork(sandlet_runtime_t *rt, const char *snapshot, const sandlet_spec_t *base,
                                                   const sandlet_fork_options_t *opts, sandlet_fork_result_t **out);
SANDLET_API size_t sandlet_fork_result_count(const sandlet_fork_result_t *r);
/* Child i's handle, handed over to the caller (close it with sandlet_sandbox_close); NULL when that child
   failed or was taken already. */
SANDLET_API sandlet_sandbox_t *sandlet_fork_result_take(sandlet_fork_result_t *r, size_t i);
/* Child i's error (owned by the result), NULL when it is ready. */
SANDLET_API const sandlet_error_t *sandlet_fork_result_error(const sandlet_fork_result_t *r, size_t i);
/* The snapshot result JSON the children were made from (owned by the result). */
SANDLET_API const char *sandlet_fork_result_snapshot_json(const sandlet_fork_result_t *r);
/* Frees the result; children not taken are closed (an owned one is destroyed). NULL is fine. */
SANDLET_API void sandlet_fork_result_delete(sandlet_fork_result_t *r);

#ifdef __cplusplus
}
#endif
#endif /* SANDLET_SANDLET_SNAPSHOT_H */
