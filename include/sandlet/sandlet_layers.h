/*
 * sandlet — the C ABI of the layer store and environments. Part of sandlet.h, which includes it at its end:
 * include sandlet.h, not this file. The conventions at the top of sandlet.h apply.
 */
#ifndef SANDLET_SANDLET_LAYERS_H
#define SANDLET_SANDLET_LAYERS_H

#ifndef SANDLET_SANDLET_H
#error "include <sandlet/sandlet.h>, which includes this file"
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------------------------------
 * Layer store: content-addressed EROFS layers under <root>/layers, and environments (named, versioned
 * lists of layers with env/workdir/user defaults). Results are JSON strings owned by the caller (free with
 * sandlet_free). All calls may be used from any thread; they block (imports take as long as reading the
 * source), so do not call them from a completion callback.
 *
 * The JSON documents they return (a digest is 64 lowercase hex digits of a sha256, without "sha256:";
 * times are unix seconds with a fraction):
 *
 * Layer object (each element of sandlet_layer_list, sandlet_layer_inspect, sandlet_layer_merge):
 *   "digest"          string   the layer's content digest (its files, their metadata and data)
 *   "role"            string   "base", "workspace", "toolkit" or "diff"
 *   "name"            string   the name it was imported under, "" when unnamed
 *   "source"          string   what it was imported from: the path given, "<path> layer <i>" for an image's
 *                              i-th layer, "merge of <digest prefixes>" for a merge
 *   "parent"          string   digest of the layer it goes on top of (an image's or a diff's), or ""
 *   "stack"           array    a snapshot's layers below it, lowest first (digests, or absolute paths of
 *                              host directories); [] for other layers
 *   "created"         number   when it was imported
 *   "size"            integer  bytes of file content it holds
 *   "stored_bytes"    integer  bytes its import added to the store (metadata + data no other layer had)
 *   "inodes"          integer  files, directories, links and special files in it
 *   "blobs"           array    digests (strings) of the data files its file content is read from, which
 *                              layers share: the names sandlet_layer_gc's "removed_blobs" reports
 * Import result (sandlet_layer_import):
 *   "layers"          array    layer objects, lowest first: one for a directory or tar, one per image layer
 *   "existed"         array    booleans, one per layer: it was in the store already (nothing was added)
 *   "environment"     string   the environment made of an image's layers when a name was given, else ""
 *   "missing"         array    for an exported layer: its parent and stack entries this store lacks
 *                              (digests; host directories absent here). It is imported, but a sandbox
 *                              cannot be restored from it until those are imported too
 * Export result (sandlet_layer_export):
 *   "digest"          string   the exported layer's digest
 *   "path"            string   the file written
 *   "bytes"           integer  bytes written to it
 *   "files"           integer  tar members: files, directories, links and special files (the root included)
 *   "compression"     string   "zstd" (the path ends in ".zst") or "none"
 * Layer gc report (sandlet_layer_gc):
 *   "removed_layers"  array    digests of the layers removed
 *   "removed_blobs"   array    digests of the data files removed (no layer left used them)
 *   "bytes_freed"     integer  bytes of metadata and data files removed
 * Environment object (each element of sandlet_env_list):
 *   "name"            string   the environment's name
 *   "versions"        array    environment versions, oldest first
 * Environment version (sandlet_env_create; the elements of an environment's "versions"):
 *   "version"         integer  1 for the first version of a name, then counting up
 *   "layers"          array    layer digests, lowest first
 *   "env"             object   environment variables (string values) a sandbox of it starts with
 *   "workdir"         string   its default working directory, "" when not set
 *   "user"            string   its default user ("uid[:gid]" or a name), "" when not set
 *   "created"         number   when the version was made
 *   "image"           object   what an image gave it: "reference" (the registry reference it was pulled as),
 *                              "manifest_digest", "platform" (strings, "" when not pulled from a registry),
 *                              the config's "entrypoint" and "cmd" (arrays, empty when none; never run)
 * ------------------------------------------------------------------------------------------------- */
typedef void (*sandlet_progress_fn)(void *user_data, uint64_t bytes, uint64_t total_bytes, uint64_t files);

typedef struct sandlet_layer_import_options {
  uint32_t size;                /* sizeof(sandlet_layer_import_options_t) */
  const char *role;             /* "base" (default when NULL), "workspace", "toolkit" or "diff" */
  const char *name;             /* NULL, or names the layer (an OCI image: the environment made of its layers) */
  const char *parent;           /* NULL, or the layer this one goes on top of (diffs) */
  int no_dedupe;                /* nonzero: do not reuse chunks of other layers */
  sandlet_progress_fn progress; /* NULL, or called from the importing thread every few hundred files */
  void *progress_user_data;
} sandlet_layer_import_options_t;
#define SANDLET_LAYER_IMPORT_OPTIONS_INIT {sizeof(sandlet_layer_import_options_t), 0, 0, 0, 0, 0, 0}

/* Imports a directory, a tar / tar.gz / tar.zst, an OCI image layout directory, a `docker save` tarball, or
   a file sandlet_layer_export wrote (on this node or another). Atomic. `opts` may be NULL (the defaults).
   *result_json (may be NULL): an import result.
   An exported file keeps its layer's digest, role, parent, stack and (when that name is free here) name;
   its content is checked against the digest its header records: DATA_LOSS naming both digests if they
   differ (a damaged or altered file; nothing is added), DATA_LOSS for a truncated file. `opts->role` given
   replaces the exported role; `opts->parent` given must be the exported parent (else INVALID_ARGUMENT).
   Overlay whiteouts in it stay whiteouts (no OCI ".wh." translation). */
SANDLET_API sandlet_error_t *sandlet_layer_import(sandlet_runtime_t *rt, const char *path,
                                                  const sandlet_layer_import_options_t *opts, char **result_json);
typedef struct sandlet_layer_export_options {
  uint32_t size;                /* sizeof(sandlet_layer_export_options_t) */
  int zstd_level;               /* a path ending in ".zst": the zstd level, 1..19 (0: 3) */
  sandlet_progress_fn progress; /* NULL, or called from the exporting thread every few hundred files with
                                   the file bytes read so far and the layer's size */
  void *progress_user_data;
} sandlet_layer_export_options_t;
#define SANDLET_LAYER_EXPORT_OPTIONS_INIT {sizeof(sandlet_layer_export_options_t), 0, 0, 0}

/* Writes layer `ref` (as for sandlet_layer_inspect) to the file `path`, for sandlet_layer_import on any
   node: a POSIX pax tar (`tar tvf` lists it; zstd-compressed when `path` ends in ".zst") of the layer's
   files with their owners, modes, nanosecond mtimes, xattrs, device numbers, hard and symbolic links and
   overlay whiteouts, preceded by a pax global header whose record SANDLET.layer holds the layer's digest,
   role, name, parent, stack and source as JSON. Written to "<path>.tmp-XXXXXXXX" and renamed: an error
   leaves no file behind; an existing file at `path` is replaced. The layer is mounted to be read (and left
   mounted only while a sandbox uses it). `opts` may be NULL. *result_json (may be NULL): an export
   result, owned by the caller (free with sandlet_free). Blocks for as long as writing takes. */
SANDLET_API sandlet_error_t *sandlet_layer_export(sandlet_runtime_t *rt, const char *ref, const char *path,
                                                  const sandlet_layer_export_options_t *opts, char **result_json);
/* *json: an array of layer objects, oldest first. */
SANDLET_API sandlet_error_t *sandlet_layer_list(sandlet_runtime_t *rt, char **json);
/* `ref`: a digest ("sha256:<hex>" or hex), a unique prefix of >= 12 hex digits, or a name. *json: a layer object. */
SANDLET_API sandlet_error_t *sandlet_layer_inspect(sandlet_runtime_t *rt, const char *ref, char **json);
/* FAILED_PRECONDITION if an environment or a live sandbox uses it. */
SANDLET_API sandlet_error_t *sandlet_layer_remove(sandlet_runtime_t *rt, const char *ref);
/* Removes layers that no environment, name, live sandbox or kept layer's parent chain references, then unused
   data. *report_json (may be NULL): a layer gc report. */
SANDLET_API sandlet_error_t *sandlet_layer_gc(sandlet_runtime_t *rt, char **report_json);
/* Flattens `n` >= 2 consecutive layers (lowest first) into one layer; *layer_json (may be NULL): its layer
   object. `opts` (may be NULL) gives its role and name; its parent is the lowest layer's parent. */
SANDLET_API sandlet_error_t *sandlet_layer_merge(sandlet_runtime_t *rt, const char *const *refs, size_t n,
                                                 const sandlet_layer_import_options_t *opts, char **layer_json);
/* A new version of environment `name`: `layers` (n refs, lowest first); `defaults_json` NULL or
   {"env":{"K":"V"},"workdir":"/abs","user":"uid[:gid]"}. *version_json (may be NULL): the environment version. */
SANDLET_API sandlet_error_t *sandlet_env_create(sandlet_runtime_t *rt, const char *name, const char *const *layers,
                                                size_t n, const char *defaults_json, char **version_json);
/* *json: an array of environment objects, by name. */
SANDLET_API sandlet_error_t *sandlet_env_list(sandlet_runtime_t *rt, char **json);
SANDLET_API sandlet_error_t *sandlet_env_remove(sandlet_runtime_t *rt, const char *name);

#ifdef __cplusplus
}
#endif
#endif /* SANDLET_SANDLET_LAYERS_H */
