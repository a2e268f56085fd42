/*
 * sandlet — embeddable sandbox runtime. The stable C ABI.
 *
 * Conventions (apply to every function below unless its comment says otherwise):
 *  - Fallible calls return a `sandlet_error_t *`: NULL on success, otherwise an error owned by the caller
 *    (free it with sandlet_error_delete). Outputs are trailing out-parameters, written only on success.
 *  - Every handle has exactly one NULL-safe release function (`_close` or `_delete`).
 *  - Strings passed in are copied; the caller keeps ownership. Strings returned by accessors are owned by
 *    the object they came from and stay valid until it is released.
 *  - Option structs are versioned by size: each starts with `uint32_t size`, set to sizeof(the struct) (the
 *    *_INIT macros do). Fields are only ever appended, so `size` tells which fields a caller's struct has:
 *    every field past it takes its default (a caller built against an older header keeps working). A larger
 *    struct (a newer header) is accepted when every byte past the fields this library knows is zero, i.e.
 *    the newer fields keep their defaults; otherwise the call fails with INVALID_ARGUMENT naming the struct.
 *    SANDLET_HAS_FIELD(type, field, size) says whether a struct of `size` bytes holds `field`.
 *  - Arrays of structs are returned as three out-parameters: the first element, the count and the element
 *    size (the library's sizeof(the struct), never smaller than the struct's first version). Step through
 *    them with SANDLET_ARRAY_AT(type, first, elem_size, i), not with your own sizeof, and test fields newer
 *    than the first version with SANDLET_HAS_FIELD(type, field, elem_size). (Lists of records, like
 *    sandlet_sandbox_list_t, are opaque handles with a count and per-item accessors instead.)
 *  - JSON documents returned (layer store, environments) are described field by field where the function
 *    is; every field listed is always present, and later versions may add fields: ignore those you do not
 *    know.
 *  - The library never exits, aborts or prints on the caller's behalf.
 *
 * Thread-safety: a runtime, and the sandboxes opened from it, may be used from any thread concurrently.
 * Specs and results are plain values: use one from one thread at a time.
 *
 * fork(): runtime and sandbox handles belong to the process that opened them (the runtime's threads exist
 * only there). In a fork()ed child every call on an inherited handle fails with FAILED_PRECONDITION, and
 * closing it there releases nothing (it never destroys the parent's sandboxes nor waits on its threads):
 * open a new runtime in the child, and attach to sandboxes by id.
 *
 * Asynchronous calls take a completion callback. Callbacks run on the runtime's event-loop thread; they
 * must not block, and must not call the blocking (synchronous) functions of this header — doing so returns
 * FAILED_PRECONDITION instead of deadlocking. They may call other *_async functions.
 */
#ifndef SANDLET_SANDLET_H
#define SANDLET_SANDLET_H

#include <stddef.h>
#include <stdint.h>

#if defined(SANDLET_BUILDING_LIBRARY)
#define SANDLET_API __attribute__((visibility("default")))
#else
#define SANDLET_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Bumped when the ABI changes incompatibly (a function removed or changed, a struct field moved or retyped).
   Compare with sandlet_abi_version() at run time. Version 1 is the ABI of the first release (0.1.0, not
   yet published): development snapshots before the size-versioned option structs are not compatible with
   it, and nothing built against them is supported.
   Adding to the ABI: a function is declared here with SANDLET_API and listed in cmake/sandlet.map (in the
   newest version node) and in cmake/sandlet.symbols, which the ctest `abi-symbols` compares with what
   libsandlet.so exports. A struct field is appended, has an all-zero default, adds no padding (the struct
   must not end in padding either), and is listed in test/abi/layout_test.cpp. */
#define SANDLET_ABI_VERSION 1

/* Whether a struct of `size` bytes (an option struct's `size`, or a returned array's element size) holds
   member `field` of `type` entirely. */
#ifdef __cplusplus
#define SANDLET_HAS_FIELD(type, field, size) \
  (offsetof(type, field) + sizeof(static_cast<type *>(nullptr)->field) <= static_cast<size_t>(size))
#else
#define SANDLET_HAS_FIELD(type, field, size) (offsetof(type, field) + sizeof(((type *)0)->field) <= (size_t)(size))
#endif

/* Element `i` of an array returned as (first, count, elem_size). */
#ifdef __cplusplus
#define SANDLET_ARRAY_AT(type, first, elem_size, i)                         \
  reinterpret_cast<const type *>(reinterpret_cast<const char *>(first) +    \
                                 static_cast<size_t>(i) * static_cast<size_t>(elem_size))
#else
#define SANDLET_ARRAY_AT(type, first, elem_size, i) \
  ((const type *)(const void *)((const char *)(first) + (size_t)(i) * (size_t)(elem_size)))
#endif

/* ---------------------------------------------------------------------------------------------------
 * Errors. Codes and their retry rules:
 *   INVALID_ARGUMENT    bad input; the message names the field. Do not retry unchanged.
 *   NOT_FOUND           no such sandbox, file, command or backend.
 *   ALREADY_EXISTS      the object exists already.
 *   PERMISSION_DENIED   the host or the sandbox refused the operation.
 *   RESOURCE_EXHAUSTED  a limit was hit (memory, pids, disk, output). Retry only after freeing something.
 *   FAILED_PRECONDITION wrong state (sandbox destroyed, blocking call from a callback). Fix the state first.
 *   UNAVAILABLE         transient (node full, agent restarting, sandbox paused). Retry later with backoff.
 *   UNIMPLEMENTED       the backend or a kernel feature is missing on this host; the message says which.
 *   DEADLINE_EXCEEDED   a timeout expired.
 *   CANCELLED           the operation was cancelled by the caller.
 *   INTERNAL            a bug or an unexpected kernel answer; the message carries the operation and errno.
 * ------------------------------------------------------------------------------------------------- */
typedef enum sandlet_code {
  SANDLET_OK = 0,
  SANDLET_CANCELLED = 1,
  SANDLET_UNKNOWN = 2,
  SANDLET_INVALID_ARGUMENT = 3,
  SANDLET_DEADLINE_EXCEEDED = 4,
  SANDLET_NOT_FOUND = 5,
  SANDLET_ALREADY_EXISTS = 6,
  SANDLET_PERMISSION_DENIED = 7,
  SANDLET_RESOURCE_EXHAUSTED = 8,
  SANDLET_FAILED_PRECONDITION = 9,
  SANDLET_ABORTED = 10,
  SANDLET_OUT_OF_RANGE = 11,
  SANDLET_UNIMPLEMENTED = 12,
  SANDLET_INTERNAL = 13,
  SANDLET_UNAVAILABLE = 14,
  SANDLET_DATA_LOSS = 15
} sandlet_code_t;

/* When memory runs out, even for the error object, the error returned is a static one (RESOURCE_EXHAUSTED,
   "out of memory", ENOMEM), never NULL: read and release it like any other (sandlet_error_delete leaves it
   alone), and do not tell errors apart by their address. */
typedef struct sandlet_error sandlet_error_t;

SANDLET_API sandlet_code_t sandlet_error_code(const sandlet_error_t *err);   /* SANDLET_OK for NULL */
SANDLET_API const char *sandlet_error_message(const sandlet_error_t *err);  /* "" for NULL */
SANDLET_API int sandlet_error_errno(const sandlet_error_t *err);            /* 0 when no errno applies */
SANDLET_API void sandlet_error_delete(sandlet_error_t *err);                /* NULL is fine */
SANDLET_API const char *sandlet_code_name(sandlet_code_t code);             /* "INVALID_ARGUMENT", static */

/* Frees memory the library handed out as `void *`/`char *` (file contents, JSON strings). NULL is fine. */
SANDLET_API void sandlet_free(void *ptr);

/* ---------------------------------------------------------------------------------------------------
 * Versions.
 * ------------------------------------------------------------------------------------------------- */
SANDLET_API uint32_t sandlet_abi_version(void);      /* == SANDLET_ABI_VERSION of the built library */
SANDLET_API const char *sandlet_version_string(void); /* "0.1.0", static */

/* ---------------------------------------------------------------------------------------------------
 * Runtime: one per process is typical. It owns the state directory, an event-loop thread and a small
 * worker pool. Opening it sweeps what crashed runs left behind (like sandlet_runtime_gc).
 * ------------------------------------------------------------------------------------------------- */
typedef struct sandlet_runtime sandlet_runtime_t;

typedef struct sandlet_runtime_options {
  uint32_t size;            /* sizeof(sandlet_runtime_options_t) */
  uint32_t worker_threads;  /* threads for create/destroy work; 0 = default (2) */
  int skip_gc_on_open;      /* non-zero: do not sweep leftovers at open */
  int disable_warm_pool;    /* non-zero: no warm pool. By default, from its second create on, a runtime keeps
                               2 container sandboxes prepared (namespaces, cgroup, uid range, and — while
                               consecutive creates ask for the same environment — its root filesystem; when
                               they alternate between environments, without it) so that a create only
                               configures one */
  int create_soon;          /* non-zero: a create follows this open at once (a one-shot run, like the CLI's
                               `sandlet run`): the open starts making that sandbox's network namespace
                               (the slowest part of a container start) in the background. Costs that work
                               for nothing if no create follows; the close then waits for it */
  uint32_t snapshot_max_depth; /* snapshots stacked on each other before the chain below a new one is merged
                                  into one layer (so restores stack few layers); 0 = default (16); >= 2 */
  const char *store;        /* the store of sandlet_layer_push/_pull when they are given none (a URL, see
                               sandlet_store.h); NULL = $SANDLET_STORE */
  /* The node's loader of lazy layers (sandlet_store.h) takes these when this runtime starts it (a loader
     already running keeps its own until it is stopped): */
  uint64_t cache_max_bytes;   /* bytes of fetched data the cache keeps; chunks no mounted layer needs are
                                 evicted, least recently used first; 0 = default (10 GiB) */
  uint32_t fetch_unit;        /* bytes fetched per store request around a cold read, a multiple of 64 KiB
                                 (the chunk); 0 = default (64 KiB: one chunk) */
  uint32_t fetch_concurrency; /* store requests in flight on the node; 0 = default (8) */
  uint32_t fill_timeout_ms;   /* a read of data not fetched yet fails with EIO after this long; 0 = 60000 */
  /* The root's audit log (sandlet_audit.h), as this runtime writes it (processes sharing a root should agree): */
  uint32_t audit_keep;        /* rotated files kept (audit.jsonl.1 .. .N); 0 = default (5); <= 1000 */
  uint64_t audit_max_bytes;   /* the live file is rotated before it grows past this; 0 = 64 MiB; >= 65536 */
  const char *registries;     /* OCI registries (sandlet_image_pull), JSON; NULL = $SANDLET_REGISTRIES */
} sandlet_runtime_options_t;
#define SANDLET_RUNTIME_OPTIONS_INIT {sizeof(sandlet_runtime_options_t), 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}

/* Opens (creating if needed) the runtime rooted at `root`; NULL means $SANDLET_ROOT, else /var/lib/sandlet.
   `opts` may be NULL. On success *out is owned by the caller: release it with sandlet_runtime_close. */
SANDLET_API sandlet_error_t *sandlet_runtime_open(const char *root, const sandlet_runtime_options_t *opts,
                                                  sandlet_runtime_t **out);
/* Destroys every `owned` sandbox this runtime created, waits for in-flight callbacks, frees the runtime.
   Sandbox handles still open become unusable (calls return FAILED_PRECONDITION) but must still be closed.
   Must not be called from a callback. NULL is fine. */
SANDLET_API void sandlet_runtime_close(sandlet_runtime_t *rt);
SANDLET_API const char *sandlet_runtime_root(const sandlet_runtime_t *rt);

/* Backends known to this build and whether this host can run each: *out, *count and *elem_size describe an
   array (see the conventions at the top: walk it with SANDLET_ARRAY_AT). The array is owned by the runtime
   and valid until it is closed. `reason` is "" when available, otherwise says what is missing. */
typedef struct sandlet_backend_info {
  const char *name;       /* "container", "fncall", "microvm", "fullvm" (the build's own table) */
  int available;          /* non-zero if this host can run it */
  uint32_t capabilities;  /* SANDLET_CAP_* bits: what it supports beyond create, exec, files and destroy
                             (0 when unavailable) */
  const char *reason;     /* why not, e.g. "no /dev/kvm" */
  /* Added later: read only when SANDLET_HAS_FIELD(sandlet_backend_info_t, field, elem_size). */
  const char *summary;    /* one line: what the backend is for */
  const char *details_json; /* a JSON object of the backend's own facts: the VM backends' "accelerator"
                               ("kvm" or "tcg"), "kvm" ("hardware", "pvm", "absent", "unusable"),
                               "accelerator_reason", "kernel", "kernel_release"; fncall's "pools_on" (array) */
} sandlet_backend_info_t;
#define SANDLET_CAP_PREPARE_AHEAD 0x01u /* prepares sandboxes ahead of a create (a warm pool) */
#define SANDLET_CAP_ONE_SHOT 0x02u      /* sandlet_run starts the command itself (else: sandlet_run.h) */
#define SANDLET_CAP_PAUSE 0x04u         /* sandlet_sandbox_pause / _resume */
#define SANDLET_CAP_SNAPSHOT 0x08u      /* snapshots and restores (sandlet_snapshot.h) */
#define SANDLET_CAP_FORK 0x10u          /* forks: one snapshot and N restores (set wherever SANDLET_CAP_SNAPSHOT is) */
#define SANDLET_CAP_STORE_LAYERS 0x20u  /* layers of the runtime's layer store (sandlet_spec_add_layer by name) */
#define SANDLET_CAP_LAYER_IMAGES 0x40u  /* the store's layers, taken as images (VM block devices) */
#define SANDLET_CAP_SET_LIMITS 0x80u    /* a running sandbox's cpus, memory and pids change in place (calls) */
#define SANDLET_CAP_REUSE_CHECK 0x100u  /* the host can tell a sandbox a call left clean (fncall reuse) */
#define SANDLET_CAP_MACHINE_STATE 0x200u /* snapshots carry memory and device state */
SANDLET_API sandlet_error_t *sandlet_runtime_backends(sandlet_runtime_t *rt, const sandlet_backend_info_t **out,
                                                      size_t *count, size_t *elem_size);

/* Removes what crashed or expired runs left behind: dead sandboxes' cgroups and directories, sandboxes
   past their max lifetime, `owned` sandboxes whose owner process died. Never touches a live sandbox of
   another live process. Also removes the node's "sandlet" parent cgroups (one per hierarchy) when no
   sandbox group is left in them; closing a runtime keeps them for the next one. *removed (may be NULL)
   receives how many sandboxes were cleaned up. */
SANDLET_API sandlet_error_t *sandlet_runtime_gc(sandlet_runtime_t *rt, size_t *removed);

/* Every kernel feature the container backend and the layer store use, probed on this host (never inferred
   from the kernel's version), as a JSON object; free *out with sandlet_free. What `sandlet doctor` prints:
     {"kernel": "<release, informational>",
      "container_backend": "" when this host can run it, else what is missing (a kernel interface, root,
                           user namespaces, cgroup2),
      "features": [{"name", "present", "used_for", "probe": what the kernel answered,
                    "path": the mechanism sandlet takes here (or what fails without it)}, ...],
      "weaker_guarantees": [{"name", "guarantee", "why"}, ...]: what a create refuses with UNIMPLEMENTED
                           unless its spec accepts the name (sandlet_spec_accept_weaker),
      "paths": {"overlay": "...", "store_layers": "..."},
      "backends": [{"name", "summary", "available", "reason", "capabilities": ["pause", ...],
                    "details": {...}}, ...]}   (as sandlet_runtime_backends, one object per backend)
   Takes a few milliseconds (some probes make and drop a user namespace). */
SANDLET_API sandlet_error_t *sandlet_runtime_features_json(sandlet_runtime_t *rt, char **out);

/* Counters of this runtime since it opened, as a JSON object (free with sandlet_free):
     {"warm_pool": {"target": N,      prepared sandboxes it keeps ready (0 = off)
                    "ready": N,       prepared and waiting now
                    "hits": N,        creates handed a prepared sandbox
                    "misses": N,      creates on a backend that can prepare ahead which found none fitting
                    "prepared": N,    sandboxes the pool prepared
                    "discarded": N,   prepared ones thrown away (other environment, died waiting, close)
                    "staged": bool,   preparing with the root filesystem of the environment asked for last
                    "backend": "container",   the backend it prepares for ("" before the first create)
                    "shape": {"memory": N, "cpus": X, "disk": N}},  the limits of the last create: a
                                      backend whose shape is fixed at launch (a VM) prepares that one
      "audit": {"path": "...",        the audit log's live file (sandlet_audit.h)
                "written": N,         records this runtime wrote
                "failed": N,          records it could not write (the operation went on)
                "rotations": N,       rotations it made
                "truncated": N,       records whose fields were cut to fit the line cap
                "last_error": "..."}} why the last failed one failed ("" when none) */
SANDLET_API sandlet_error_t *sandlet_runtime_stats_json(sandlet_runtime_t *rt, char **out);

/* ---------------------------------------------------------------------------------------------------
 * Spec: what a sandbox looks like. Build from JSON or field by field; every setter validates and names the
 * field in its error. JSON schema (all fields optional except layers):
 *   { "backend": "container",
 *     "layers": ["/lowest/dir", ...],            read-only lower directories, lowest first (a snapshot
 *                                                as the lowest brings its whole chain: see Snapshots)
 *     "env": {"K": "V"}, "workdir": "/", "hostname": "sandbox", "user": "0:0" | "name",
 *     "secrets": {"TOKEN": "..."},                env variables never shown or forked (sandlet_spec_set_secret)
 *     "limits": {"cpus": 1.5, "memory": "512M"|bytes, "pids": 256, "disk": "1G"|bytes},
 *                                                 disk bounds the writable layer's bytes and its inodes
 *                                                 (one per 4 KiB, at least 16384); always bounded too:
 *                                                 /dev/shm (256 MiB, 16384 inodes), /dev (64 MiB, 4096
 *                                                 inodes), RLIMIT_NOFILE of commands (hard <= 65536)
 *     "network": "none" | {"allow": [{"cidr": "10.0.0.0/8", "ports": "443", "protocol": "tcp"}, ...],
 *                          "dns": ["10.0.0.53"], "publish": [{"host_port": 8080, "port": 80}],
 *                          "egress_rate": "10M"}      (docs/NETWORK.md: what is enforced and how)
 *     "labels": {"task": "t1"},
 *     "lifetime": "owned"|"detached", "max_lifetime_s": 3600, "idle_timeout_s": 0,
 *     "on_expiry": "destroy"|"keep_logs"|"keep", "keep_s": 3600,   what max_lifetime_s / idle_timeout_s do (below)
 *     "accept_weaker": ["memory_swap"],         guarantees this sandbox may get in a weaker form (below)
 *     "mounts": [{"source": "/host/dir", "target": "/inside", "readonly": true}, "/src:/dst:rw", ...],
 *     "policy": {"seccomp": {"profile": "default", "deny": ["getcwd"], "allow": ["ptrace"]},
 *                "files": [{"path": "/usr", "access": "read-only"|"hidden"|"writable"}, ...],
 *                "mask_kernel_files": true},
 *     "toolkit": "/host/dir" | "layer-name" | "sha256:..." }
 *
 *   policy.files: <= 64 rules that bind root inside (read-only: no write, unlink, rename, chmod, chown,
 *   link, truncate or xattr below the path; hidden: an empty read-only stand-in; writable: undoes a
 *   read-only rule around it; the most specific path wins). policy.mask_kernel_files (default true): /proc's
 *   kernel-internal files read empty. toolkit: mounted read-only at /.sandlet/toolkit for execs with the
 *   `toolkit` option. docs/POLICY.md has the exact semantics.
 *
 *   policy.seccomp (docs/POLICY.md): "profile" is "default" (the newest version) or a version
 *   ("default-v1", "default-v2"); "deny" adds system calls (names this architecture knows; not the ones
 *   the init needs) that fail with EPERM; "allow" names relaxations ("ptrace", "io_uring",
 *   "perf_event_open", "vsock", "netlink") that lift the profile's denial of their calls or socket
 *   families. Calls of another ABI (i386, x32) kill the process. The effective policy is in the
 *   sandbox's info JSON ("effective_policy").
 *   mounts: host directories (<= 64) mounted into the sandbox before anything in it runs, with their
 *   submounts; an object, or "SOURCE:TARGET[:ro|rw]" for paths without ':'; read-only unless "readonly" is
 *   false or the short form ends in ":rw". Paths absolute and normalized; a target is not "/" nor in /proc,
 *   /dev or /sys, and no target equals or lies inside another; a missing target directory is made (in the
 *   sandbox's writable layer), one reached through a symlink of the image is refused. Only directories.
 *   Read-only: no write, chmod or remount succeeds inside, root's included (the sandbox cannot mount); owners
 *   show as on the host (host uid N as uid N inside, ids above 65535 as 65534) where the filesystem supports
 *   idmapped mounts, else every owner shows as 65534 and access follows the "other" permission bits. Both
 *   kinds are nosuid and nodev. Read-write: never idmapped, so nothing written inside is ever owned by a host
 *   id outside the sandbox's own range (a setuid file root inside makes is setuid to the sandbox's host
 *   uid, not host root); root inside writes only where the host directory lets that range (or everyone)
 *   write, and sees the host's own owners as 65534. Snapshots never include mounts.
 * ------------------------------------------------------------------------------------------------- */
typedef struct sandlet_spec sandlet_spec_t;

SANDLET_API sandlet_error_t *sandlet_spec_new(sandlet_spec_t **out);
SANDLET_API sandlet_error_t *sandlet_spec_from_json(const char *json, size_t len, sandlet_spec_t **out);
/* *out is a NUL-terminated JSON string; free it with sandlet_free. */
SANDLET_API sandlet_error_t *sandlet_spec_to_json(const sandlet_spec_t *spec, char **out);
SANDLET_API void sandlet_spec_delete(sandlet_spec_t *spec);

SANDLET_API sandlet_error_t *sandlet_spec_set_backend(sandlet_spec_t *spec, const char *backend);
/* `layer`: an absolute host directory, or a layer of the runtime's store by digest ("sha256:<hex>", hex, or a
   unique prefix of >= 12 hex digits) or by name. Layers are stacked lowest first. A create whose layer or
   environment the store does not have fails with INVALID_ARGUMENT naming the field ("layers[0]"). */
SANDLET_API sandlet_error_t *sandlet_spec_add_layer(sandlet_spec_t *spec, const char *layer);
/* An environment of the store, "name" (latest version) or "name@N": its layers go below the spec's, its env
   is the base of the spec's, its workdir/user apply when the spec keeps "/" and root. */
SANDLET_API sandlet_error_t *sandlet_spec_set_environment(sandlet_spec_t *spec, const char *environment);
SANDLET_API sandlet_error_t *sandlet_spec_set_env(sandlet_spec_t *spec, const char *key, const char *value);
/* A secret: set like an env variable (the same rules; a key in both is an error) and in every command's
   environment, but never shown by info or list (its value reads "<hidden>") and not given to fork children
   unless the fork asks (sandlet_fork_options_t.copy_secrets). */
SANDLET_API sandlet_error_t *sandlet_spec_set_secret(sandlet_spec_t *spec, const char *key, const char *value);
SANDLET_API sandlet_error_t *sandlet_spec_set_workdir(sandlet_spec_t *spec, const char *path);
SANDLET_API sandlet_error_t *sandlet_spec_set_hostname(sandlet_spec_t *spec, const char *hostname);
SANDLET_API sandlet_error_t *sandlet_spec_set_user(sandlet_spec_t *spec, const char *user);
SANDLET_API sandlet_error_t *sandlet_spec_set_cpus(sandlet_spec_t *spec, double cpus);
SANDLET_API sandlet_error_t *sandlet_spec_set_memory(sandlet_spec_t *spec, uint64_t bytes);
SANDLET_API sandlet_error_t *sandlet_spec_set_pids(sandlet_spec_t *spec, uint64_t pids);
SANDLET_API sandlet_error_t *sandlet_spec_set_disk(sandlet_spec_t *spec, uint64_t bytes);
/* "none" (loopback only, the default). A policy is set with sandlet_spec_set_network_json. */
SANDLET_API sandlet_error_t *sandlet_spec_set_network(sandlet_spec_t *spec, const char *mode);
/* The "network" value as a NUL-terminated JSON text: "none" (bare or quoted) or a policy object (schema in
   docs/NETWORK.md); errors name the field ("network.allow[2].cidr"). `json` is only read during the call. */
SANDLET_API sandlet_error_t *sandlet_spec_set_network_json(sandlet_spec_t *spec, const char *json);
SANDLET_API sandlet_error_t *sandlet_spec_set_label(sandlet_spec_t *spec, const char *key, const char *value);
SANDLET_API sandlet_error_t *sandlet_spec_set_lifetime(sandlet_spec_t *spec, const char *policy);
SANDLET_API sandlet_error_t *sandlet_spec_set_max_lifetime(sandlet_spec_t *spec, double seconds);
SANDLET_API sandlet_error_t *sandlet_spec_set_idle_timeout(sandlet_spec_t *spec, double seconds);
/* What the max lifetime or the idle timeout does, enforced inside the sandbox (no owner process needed):
   "destroy" (the default) ends the sandbox at once. "keep_logs" ends it at once too, but keeps its logs for
   `keep_seconds` (> 0, <= 30 days): while it runs, each exec's audit fields and the last 4000 bytes of its
   stdout and stderr are kept (the last 16 execs), and at its expiry they go into a tombstone listed by
   sandlet_runtime_expired and shown by sandlet_runtime_logs with its audit trail, until gc after
   `keep_seconds` or sandlet_runtime_forget_expired. "keep" keeps it for debugging: every process in it is
   stopped (SIGSTOP: state, memory and open files as they were), its files and writable layer stay, exec and
   file calls still work (a debugger's `ps`, `cat`, copies out); it ends `keep_seconds` (> 0, <= 30 days)
   later, or at an explicit destroy. Its info and list entry keep state "running" meanwhile; the audit
   trail records its end with the reason (max_lifetime / idle_timeout) either way. */
SANDLET_API sandlet_error_t *sandlet_spec_set_on_expiry(sandlet_spec_t *spec, const char *mode, double keep_seconds);
/* Accepts one guarantee in a weaker form where this host cannot give it in full (repeatable; a repeat is a
   no-op). Without it such a create fails with UNIMPLEMENTED naming the guarantee and why. Names:
   "exec_kill_descendants" (a kill of a command reaches every process it started: needs cgroup.kill),
   "memory_swap" (limits.memory bounds swap too: needs swap accounting where the host has swap).
   An unknown name is INVALID_ARGUMENT. sandlet_runtime_features_json says which ones this host weakens. */
SANDLET_API sandlet_error_t *sandlet_spec_accept_weaker(sandlet_spec_t *spec, const char *guarantee);
/* Mounts the host directory `source` at `target` inside the sandbox (appended to "mounts"; at most 64),
   read-only when `readonly` is nonzero. Both paths absolute and normalized; `target` not "/" and not in
   /proc, /dev or /sys; no two targets equal or nested. Whether `source` exists and is a directory is
   checked at create (INVALID_ARGUMENT naming "mounts[N].source", with the errno). Ownership and what root
   inside may do there: see "mounts" in the schema above. Container backend. */
SANDLET_API sandlet_error_t *sandlet_spec_add_mount(sandlet_spec_t *spec, const char *source, const char *target,
                                                    int readonly);

/* ---------------------------------------------------------------------------------------------------
 * Sandboxes.
 * An `owned` sandbox is destroyed when its runtime closes, when the creating process dies, or when the
 * last handle to it in the creating runtime is closed. A `detached` one lives until destroyed or until its
 * max lifetime; any process can attach to it by id.
 * ------------------------------------------------------------------------------------------------- */
typedef struct sandlet_sandbox sandlet_sandbox_t;

/* Creates a sandbox. On failure nothing is left behind. *out is owned by the caller (sandlet_sandbox_close). */
SANDLET_API sandlet_error_t *sandlet_sandbox_create(sandlet_runtime_t *rt, const sandlet_spec_t *spec,
                                                    sandlet_sandbox_t **out);
/* Completion: `err` (owned by the callback, NULL on success) and `sb` (owned by the callback, NULL on error). */
typedef void (*sandlet_create_cb)(void *user_data, sandlet_error_t *err, sandlet_sandbox_t *sb);
SANDLET_API sandlet_error_t *sandlet_sandbox_create_async(sandlet_runtime_t *rt, const sandlet_spec_t *spec,
                                                          sandlet_create_cb cb, void *user_data);

/* Opens a handle on an existing sandbox by id, also one created by another process. */
SANDLET_API sandlet_error_t *sandlet_sandbox_attach(sandlet_runtime_t *rt, const char *id,
                                                    sandlet_sandbox_t **out);
SANDLET_API const char *sandlet_sandbox_id(const sandlet_sandbox_t *sb);
/* Kills every process of the sandbox and removes it. When this returns nothing of the sandbox runs any
   more and it is no longer listed or attachable; its host resources (cgroups, directory, uid range) are
   reclaimed in the background right after, and sandlet_runtime_close waits for that. The handle stays
   valid (every call on it fails with FAILED_PRECONDITION) until closed. */
SANDLET_API sandlet_error_t *sandlet_sandbox_destroy(sandlet_sandbox_t *sb);
SANDLET_API sandlet_error_t *sandlet_sandbox_destroy_async(sandlet_sandbox_t *sb,
                                                           void (*cb)(void *user_data, sandlet_error_t *err),
                                                           void *user_data);
/* Releases the handle (see the ownership rule above). NULL is fine. */
SANDLET_API void sandlet_sandbox_close(sandlet_sandbox_t *sb);
/* The sandbox's record as a JSON object (free with sandlet_free); sandlet_sandbox_list_json gives the same:
     "version": 2                  the record format
     "id": "3f9c0a1b2c3d"          12 hex digits
     "backend": "container"
     "state": "running"            "creating", "running", "paused", "dead" (its processes are gone; gc
                                   reclaims it), "destroyed" (this handle's sandbox was destroyed)
     "spec": {...}                 as in the spec JSON above, layers resolved to the directories stacked
     "created_at", "deadline"      unix seconds (float); deadline = created_at + max_lifetime_s
     "owner_pid", "owner_start"    the creating process (pid, start time in clock ticks since boot)
     "environment": "name@N"       the environment version it was made from ("" for none)
     "layers": [{"ref","digest"}]  each lower layer as asked for and the store digest it resolved to ("" for
                                   a host directory)
     "backend_state": {...}        the backend's own section, for operators; not a stable interface. The
                                   container backend's: "slot" and "uid_base" (its host uid range: root
                                   inside = uid_base), "init_pid" and "init_start" (PID 1 as the host sees
                                   it), "cgroup_v2" and "cgroup_v1" (its cgroup directories), "agent_socket" */
SANDLET_API sandlet_error_t *sandlet_sandbox_info_json(sandlet_sandbox_t *sb, char **out);
/* Freezes every process of the sandbox (memory, files and open connections stay; a frozen sandbox uses no
   CPU) / lets them run on. An exec or file call on a sandbox paused through this runtime resumes it first.
   Pausing a paused sandbox (or resuming a running one) does nothing. UNIMPLEMENTED where the backend cannot
   (sandlet_runtime_backends says which can: SANDLET_CAP_PAUSE in its capabilities). */
SANDLET_API sandlet_error_t *sandlet_sandbox_pause(sandlet_sandbox_t *sb);
SANDLET_API sandlet_error_t *sandlet_sandbox_resume(sandlet_sandbox_t *sb);
/* Replaces the sandbox's network allowlist in one step. `policy_json` (NUL-terminated, only read during the
   call): {"allow": [rules as in the spec's "network"], "dns": [...]}; {"allow": []} denies everything but
   the sandbox's own loopback. Every later connect(), UDP send and outgoing packet is checked against the
   new set only: connections opened before stay open but a packet they send to a destination no longer
   allowed is dropped (docs/NETWORK.md). FAILED_PRECONDITION for a sandbox created with network "none";
   INVALID_ARGUMENT naming the field for a bad policy. The sandbox's record (info) shows the new rules.
   Thread-safety: as every sandbox call. */
SANDLET_API sandlet_error_t *sandlet_sandbox_net_update(sandlet_sandbox_t *sb, const char *policy_json);
/* *out: {"filtered": bool, "connect_denied": N, "sendmsg_denied": N, "egress_dropped": N, "denied": [...]},
   the sandbox's network denials so far (all 0 and "filtered" false for network "none"); "denied" holds
   the last 64 as {"seq": N, "address": "10.0.0.1", "port": 80, "protocol": "tcp"|"udp"|"icmp"|"other",
   "hook": "connect"|"sendmsg"|"egress"}, oldest first. Free *out with sandlet_free. */
SANDLET_API sandlet_error_t *sandlet_sandbox_net_stats_json(sandlet_sandbox_t *sb, char **out);
/* *out: {"counted": bool, "denied": N, "by_syscall": {"mount": N, ...}, "records": [...]}, the system calls
   the sandbox's seccomp policy refused so far (each still failed with the policy's errno: EPERM, or
   EAFNOSUPPORT/EPROTONOSUPPORT for a socket family; "counted" false where the kernel could not count
   them). "records" holds the last 64 as {"seq": N, "syscall": "mount", "nr": 165, "pid": N (inside the
   sandbox), "time_ns": N (Unix time), "errno": N, "args": [N, N, N] (the first three arguments), and for
   socket/socketpair "family": "AF_VSOCK" (or the number)}, oldest first ("errno", "args" and "family"
   are missing for a sandbox an older library started). UNIMPLEMENTED for a backend that does not count
   (docs/POLICY.md). Free *out with sandlet_free. */
SANDLET_API sandlet_error_t *sandlet_sandbox_seccomp_stats_json(sandlet_sandbox_t *sb, char **out);


/* ---------------------------------------------------------------------------------------------------
 * Exec.
 * ------------------------------------------------------------------------------------------------- */
#define SANDLET_STDOUT 1
#define SANDLET_STDERR 2

/* Streaming output: called on the event-loop thread with each chunk as it arrives. When set, output is
   delivered only through this callback and the result's stdout/stderr stay empty. */
typedef void (*sandlet_output_cb)(void *user_data, int stream, const void *data, size_t len);

typedef struct sandlet_exec_options {
  uint32_t size;                 /* sizeof(sandlet_exec_options_t) */
  const char *const *argv;       /* NULL-terminated, argv[0] required; resolved through PATH */
  const char *const *env;        /* NULL-terminated "KEY=VALUE" added to the spec's env; may be NULL */
  const char *cwd;               /* NULL = the spec's workdir; entered as root, then the user's ids apply */
  const char *user;              /* NULL = the spec's user; "uid[:gid]" or a name from /etc/passwd */
  const void *stdin_data;        /* bytes fed to stdin, then EOF; NULL = empty stdin */
  size_t stdin_len;
  double timeout_s;              /* 0 = no timeout; on expiry every process of this exec is killed */
  uint64_t output_limit;         /* per stream, streaming included; 0 = default 16 MiB; UINT64_MAX = no cap.
                                    Beyond it output is dropped and flagged */
  int kill_on_output_limit;      /* non-zero: kill the command when a stream passes the limit */
  int keep_background;           /* non-zero: processes the command leaves running (`server &`) survive its
                                    exit and the exec completes when the main process exits; their later
                                    output is discarded. Default: they are killed with the command. */
  sandlet_output_cb on_output;   /* optional streaming callback */
  void *output_user_data;
  int toolkit;                   /* non-zero: run from the spec's protected toolkit: argv[0] found only in
                                    /.sandlet/toolkit (bin, usr/bin, sbin, usr/sbin), PATH fixed to those,
                                    LD_* and similar loader variables removed, a dynamic binary run through
                                    the toolkit's own loader. FAILED_PRECONDITION on a sandbox without a
                                    toolkit. Not for one-shot runs. (docs/POLICY.md, "Protected toolkit") */
  int stdin_stream;              /* non-zero: stdin stays open after stdin_data; more comes through
                                    sandlet_exec_control_write_stdin, its end with sandlet_exec_control_close_stdin
                                    (so only with sandlet_sandbox_exec_start and its control handle) */
  int tty;                       /* non-zero: stdin, stdout and stderr are one new pseudo-terminal inside the
                                    sandbox, the command's controlling terminal (a session of its own), owned by
                                    its user: what a shell or an editor needs. All output arrives as
                                    SANDLET_STDOUT, with the terminal's line discipline applied (echo, \r\n);
                                    stdin_data, then what sandlet_exec_control_write_stdin writes, is typed
                                    into it; the end of stdin closes nothing (write "\x04" as on a keyboard).
                                    Resize with sandlet_exec_control_resize. (docs/SHELLS.md) */
  uint32_t tty_rows;             /* the terminal's size: 0 = 24 rows x 80 columns; at most 4096 each */
  uint32_t tty_cols;
  int reserved;                  /* must be 0 (room for the next flag; else the struct would end in padding) */
} sandlet_exec_options_t;
#define SANDLET_EXEC_OPTIONS_INIT {sizeof(sandlet_exec_options_t), 0, 0, 0, 0, 0, 0, 0.0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}

typedef struct sandlet_exec_result sandlet_exec_result_t;

/* Runs a command and waits for it to exit and for its output to end. Processes it leaves running are
   killed when it exits, unless keep_background is set; a timeout kills all of them. An exec belongs to the
   process that started it: if that process dies before the command ends, the command and everything it
   started are killed (the sandbox itself stays, e.g. a detached one for a restarted trainer to reattach).
   A command that cannot be started (not found, not executable) is an error (NOT_FOUND / PERMISSION_DENIED),
   not a result; so is a missing cwd or user (NOT_FOUND). */
SANDLET_API sandlet_error_t *sandlet_sandbox_exec(sandlet_sandbox_t *sb, const sandlet_exec_options_t *opts,
                                                  sandlet_exec_result_t **out);
typedef void (*sandlet_exec_cb)(void *user_data, sandlet_error_t *err, sandlet_exec_result_t *result);
/* The options (and the strings/bytes they point to) are copied before this returns. When this returns an
   error the callback is never called; otherwise it is called exactly once, after the last on_output. */
SANDLET_API sandlet_error_t *sandlet_sandbox_exec_async(sandlet_sandbox_t *sb, const sandlet_exec_options_t *opts,
                                                        sandlet_exec_cb cb, void *user_data);

/* Like sandlet_sandbox_exec_async, and *control (may be NULL) receives a handle on the running command:
   signal it or cancel it. The handle is owned by the caller (sandlet_exec_control_delete); it may outlive
   the exec (calls then do nothing) and releasing it does not cancel anything. */
typedef struct sandlet_exec_control sandlet_exec_control_t;
SANDLET_API sandlet_error_t *sandlet_sandbox_exec_start(sandlet_sandbox_t *sb, const sandlet_exec_options_t *opts,
                                                        sandlet_exec_cb cb, void *user_data,
                                                        sandlet_exec_control_t **control);
/* Delivers signal `signo` to every process of the exec. */
SANDLET_API sandlet_error_t *sandlet_exec_control_signal(sandlet_exec_control_t *control, int signo);
/* Kills every process of the exec (SIGKILL); its callback then gets CANCELLED (if it had not completed yet)
   once the sandbox has reported the command's exit — or after 2 s without that report, when the library
   drops the exec's connection (which makes the sandbox kill whatever is left). */
SANDLET_API void sandlet_exec_control_cancel(sandlet_exec_control_t *control);
/* Feeds `len` bytes to the stdin of an exec started with stdin_stream (or typed into its terminal). The
   bytes are copied; this blocks only while the sandbox is 4 MiB behind in reading them (never when called
   from a library callback). Returns NULL, also when the exec has already ended (the bytes are dropped);
   FAILED_PRECONDITION when the exec has no open stdin or it was closed. */
SANDLET_API sandlet_error_t *sandlet_exec_control_write_stdin(sandlet_exec_control_t *control, const void *data,
                                                              size_t len);
/* Ends that stdin (the command reads EOF once it consumed what came before). Idempotent; nothing for an exec
   without stdin_stream. */
SANDLET_API void sandlet_exec_control_close_stdin(sandlet_exec_control_t *control);
/* Sets the size of the terminal of an exec started with tty (its foreground processes get SIGWINCH).
   INVALID_ARGUMENT outside 1..4096; FAILED_PRECONDITION for an exec without a terminal. */
SANDLET_API sandlet_error_t *sandlet_exec_control_resize(sandlet_exec_control_t *control, uint32_t rows,
                                                         uint32_t cols);
SANDLET_API void sandlet_exec_control_delete(sandlet_exec_control_t *control); /* NULL is fine */

SANDLET_API int sandlet_exec_result_exit_code(const sandlet_exec_result_t *r); /* -1 if killed by a signal */
SANDLET_API int sandlet_exec_result_signal(const sandlet_exec_result_t *r);    /* 0 if it exited */
SANDLET_API int sandlet_exec_result_timed_out(const sandlet_exec_result_t *r);
SANDLET_API const char *sandlet_exec_result_stdout(const sandlet_exec_result_t *r, size_t *len); /* NUL-terminated too */
SANDLET_API const char *sandlet_exec_result_stderr(const sandlet_exec_result_t *r, size_t *len);
SANDLET_API int sandlet_exec_result_stdout_truncated(const sandlet_exec_result_t *r);
SANDLET_API int sandlet_exec_result_stderr_truncated(const sandlet_exec_result_t *r);
SANDLET_API uint64_t sandlet_exec_result_duration_ns(const sandlet_exec_result_t *r);  /* request to exit */
SANDLET_API uint64_t sandlet_exec_result_run_ns(const sandlet_exec_result_t *r);       /* spawn to exit, in the sandbox */
SANDLET_API void sandlet_exec_result_delete(sandlet_exec_result_t *r);

/* One-shot runs (a new sandbox, one command, gone): sandlet_run.h, included at the end. */

/* ---------------------------------------------------------------------------------------------------
 * Files, resolved inside the sandbox's root (symlinks cannot escape it). A file call whose sandbox does not
 * answer within a minute, plus a second for every 4 MiB moved (max_bytes for reads), is DEADLINE_EXCEEDED.
 * ------------------------------------------------------------------------------------------------- */
/* Creates or replaces `path` (atomically), creating missing parent directories. mode 0 = 0644. Replacing a
   file the spec's user may not write is PERMISSION_DENIED (EACCES), as open(2) would say. */
SANDLET_API sandlet_error_t *sandlet_sandbox_write_file(sandlet_sandbox_t *sb, const char *path, const void *data,
                                                        size_t len, uint32_t mode);
/* Reads at most `max_bytes` (0 = 64 MiB); a larger file is OUT_OF_RANGE. *data is freed with sandlet_free. */
SANDLET_API sandlet_error_t *sandlet_sandbox_read_file(sandlet_sandbox_t *sb, const char *path, uint64_t max_bytes,
                                                       void **data, size_t *len);

/* Asynchronous forms. For writes `data` is copied before the call returns. The completion receives the
   error (owned by the callback, NULL on success) and, for reads, the bytes (valid only during the
   callback) and the file's mode. */
typedef void (*sandlet_file_cb)(void *user_data, sandlet_error_t *err, const void *data, size_t len, uint32_t mode);
SANDLET_API sandlet_error_t *sandlet_sandbox_write_file_async(sandlet_sandbox_t *sb, const char *path,
                                                              const void *data, size_t len, uint32_t mode,
                                                              sandlet_file_cb cb, void *user_data);
SANDLET_API sandlet_error_t *sandlet_sandbox_read_file_async(sandlet_sandbox_t *sb, const char *path,
                                                             uint64_t max_bytes, sandlet_file_cb cb, void *user_data);

/* ---------------------------------------------------------------------------------------------------
 * Listing: all sandboxes under the runtime's root, from every process.
 * ------------------------------------------------------------------------------------------------- */
typedef struct sandlet_sandbox_list sandlet_sandbox_list_t;
/* `label_filter` is NULL or "key=value"; only sandboxes carrying that label are listed. */
SANDLET_API sandlet_error_t *sandlet_runtime_list(sandlet_runtime_t *rt, const char *label_filter,
                                                  sandlet_sandbox_list_t **out);
SANDLET_API size_t sandlet_sandbox_list_count(const sandlet_sandbox_list_t *l);
SANDLET_API const char *sandlet_sandbox_list_id(const sandlet_sandbox_list_t *l, size_t i);
SANDLET_API const char *sandlet_sandbox_list_state(const sandlet_sandbox_list_t *l, size_t i); /* "running", "dead" */
SANDLET_API const char *sandlet_sandbox_list_json(const sandlet_sandbox_list_t *l, size_t i); /* the full record */
SANDLET_API void sandlet_sandbox_list_delete(sandlet_sandbox_list_t *l);

#ifdef __cplusplus
}
#endif
/* The layer store; snapshots, restore and fork; builds from a recipe; remote stores; the audit log and kept logs; metrics
   and node admission; FnCall calls in pooled containers; job-level pause and resume (parts of this header,
   kept in their own files). */
#include "sandlet/sandlet_layers.h"
#include "sandlet/sandlet_snapshot.h"
#include "sandlet/sandlet_build.h"
#include "sandlet/sandlet_store.h"
#include "sandlet/sandlet_audit.h"
#include "sandlet/sandlet_metrics.h"
#include "sandlet/sandlet_fncall.h"
#include "sandlet/sandlet_jobs.h"
#include "sandlet/sandlet_copy.h"
#include "sandlet/sandlet_run.h"
#include "sandlet/sandlet_session.h"
#endif /* SANDLET_SANDLET_H */
