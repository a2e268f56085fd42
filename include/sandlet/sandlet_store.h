/*
 * sandlet — the C ABI of remote layer stores and lazy layers. Part of sandlet.h, which includes it at its
 * end: include sandlet.h, not this file. The conventions at the top of sandlet.h apply.
 */
#ifndef SANDLET_SANDLET_STORE_H
#define SANDLET_SANDLET_STORE_H

#ifndef SANDLET_SANDLET_H
#error "include <sandlet/sandlet.h>, which includes this file"
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------------------------------
 * Stores and lazy layers
 *
 * A store holds layers for many nodes: their manifests, metadata images, chunk indexes and data blobs, plus
 * layer names. A store is named by a URL:
 *   /path, file:///path             a directory (a local path or a shared filesystem: NFS, CephFS, 3FS)
 *   http://host[:port]/prefix       an HTTP server with range requests (pushes use PUT, e.g. WebDAV)
 *   https://host[:port]/prefix      the same over TLS ($SANDLET_STORE_CA: a CA bundle; default: the system's)
 *   s3://bucket[/prefix]?endpoint=http://host:port[&region=R]
 *                                   an S3-compatible object store, requests signed (AWS signature v4) with
 *                                   $AWS_ACCESS_KEY_ID, $AWS_SECRET_ACCESS_KEY and $AWS_SESSION_TOKEN
 * A store argument of NULL means the runtime's store: sandlet_runtime_options_t.store, else $SANDLET_STORE;
 * neither set gives INVALID_ARGUMENT. A bad URL is INVALID_ARGUMENT naming the part; an unreachable store
 * UNAVAILABLE (after retries with backoff); rejected credentials PERMISSION_DENIED — at push or pull time,
 * never at a later read.
 *
 * A lazy pull fetches a layer's metadata image and chunk indexes only (a small fraction of the image), checks
 * them against the layer's digest, and records the layer as lazy: sandboxes use it at once, and its data is
 * fetched by the node's loader on first read, each chunk verified against its digest before any reader sees
 * it, into a node-wide cache (<root>/layers/cache) shared by every layer whose chunks are the same. The loader
 * is one process per node (per runtime root), started from the library on demand; it outlives the process
 * that started it and serves every runtime on the root. Reads of data not yet fetched block until the loader
 * has it; after the fill deadline without it (the store down, a chunk that fails verification) they fail with
 * EIO inside the sandbox — never zeros, never wrong bytes. A kernel without the mechanism lazy layers need
 * (fanotify pre-content events, Linux 6.14) gets an eager pull: the pull result says so.
 * --------------------------------------------------------------------------------------------------- */

/* Pushes layer `ref` (as for sandlet_layer_inspect) to `store` (NULL: the runtime's), with the layers it
   needs (its parent chain, a snapshot's stack) and its name. Objects the store already holds are not sent
   again. A `ref` that names no layer but an environment ("name" or "name@N") pushes its layers, then its
   record. *result_json (may be NULL; free with sandlet_free):
     {"digest", "store", "layers": [digests pushed, lowest first], "objects_sent", "bytes_sent",
      "objects_skipped", and for an environment "environment": {"name", "version"}} */
SANDLET_API sandlet_error_t *sandlet_layer_push(sandlet_runtime_t *rt, const char *ref, const char *store,
                                                char **result_json);

#define SANDLET_PULL_LAZY 0x1u /* metadata only: data is fetched on first read */
/* Pulls layer `ref` (a digest, "sha256:<hex>", or a name the store holds) from `store` (NULL: the runtime's)
   with the layers it needs, into this runtime's store; a layer already here is not fetched again (a lazy one
   stays lazy). A name the store gives no layer but an environment pulls the environment's layers and creates
   that version of it here (none when the newest one here is the same). `flags`: SANDLET_PULL_*.
   *result_json (may be NULL; free with sandlet_free):
     {"digest", "store", "layers": [digests, lowest first], "lazy": true|false,
      "eager_reason": "" or why a lazy pull fetched everything (the kernel lacks what lazy layers need),
      "bytes_fetched", "image_bytes", and for an environment "environment": {"name", "version"}} */
SANDLET_API sandlet_error_t *sandlet_layer_pull(sandlet_runtime_t *rt, const char *ref, const char *store,
                                                uint32_t flags, char **result_json);

/* Registry images. Progress of a pull, called on the pulling threads one call at a time: `phase` "manifest",
   "download" (`bytes` of `total` of blob `layer`), "import" (layer `layer` of `layers`) or "done". */
typedef void (*sandlet_image_progress_fn)(void *user, const char *phase, size_t layer, size_t layers,
                                          uint64_t bytes, uint64_t total);
/* Pulls image `ref` ("docker://REGISTRY/REPO:TAG", "...@sha256:<hex>", or the same without "docker://"; names
   without a registry are the default registry's) from its registry or the mirrors the runtime's `registries`
   option gives for it, for the `platform` of that option (default: linux on this machine's architecture), into
   this runtime's store: each image layer a store layer, and an environment `name` (NULL or "": the image's
   canonical reference, "docker.io/library/debian:bookworm") with the config's env / workdir / user and its
   entrypoint / cmd recorded. Every blob is checked against its digest before it is imported; a layer pulled
   before is not fetched again; a second pull of an unchanged tag fetches the manifest only (of a digest,
   nothing). Blocks; `progress` may be NULL. Errors: NOT_FOUND (no such repository, tag or platform),
   PERMISSION_DENIED (credentials missing or refused), UNAVAILABLE (registry unreachable after retries),
   DATA_LOSS (a digest mismatch: nothing of that blob is imported). sandlet_layer_pull with a "docker://"
   reference does the same (its `store` must be NULL, `flags` 0).
   *result_json (may be NULL; free with sandlet_free): {"reference", "environment", "version", "new_version",
     "manifest_digest", "platform", "endpoint", "layers": [digests], "blobs_fetched", "layers_reused",
     "bytes_fetched", "seconds"} */
SANDLET_API sandlet_error_t *sandlet_image_pull(sandlet_runtime_t *rt, const char *ref, const char *name,
                                                sandlet_image_progress_fn progress, void *user,
                                                char **result_json);

/* The node's loader and its cache, as JSON (free with sandlet_free); does not start a loader:
     {"running": bool, "pid", "fetcher_pid", "started" (unix seconds),
      "settings": {"cache_max_bytes", "fetch_unit", "fetch_concurrency", "fill_timeout_ms"},
      "cache": {"dir", "bytes" (on disk), "max_bytes", "blobs"},
      "layers": [{"digest", "name", "image_bytes", "fetched_bytes", "hits", "misses", "fetch_errors",
                  "fetch_ms": {"p50", "p90", "p99"}}, ...]} — every lazy layer of the store; counters are
   those of the running loader (0 when none runs). */
SANDLET_API sandlet_error_t *sandlet_loader_status(sandlet_runtime_t *rt, char **json);

#ifdef __cplusplus
}
#endif
#endif /* SANDLET_SANDLET_STORE_H */
