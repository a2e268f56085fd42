/*
 * sandlet — the C ABI of the audit log. Part of sandlet.h, which includes it at its end: include sandlet.h,
 * not this file. The conventions at the top of sandlet.h apply. docs/AUDIT.md describes every record.
 *
 * Every runtime root has one audit log, JSON Lines at <root>/audit/audit.jsonl (rotated by size into
 * audit.jsonl.1 (newest) .. audit.jsonl.<keep>), in a directory only root may enter, never mounted into a
 * sandbox. Every process that opens a runtime on the root appends to it: one line per exec (sync, async,
 * streaming and one-shot runs), per lifecycle event (create, running, destroy with its reason, pause,
 * resume, snapshot, fork, attach), per policy denial and per named policy relaxation. Each record has
 * "ts" (RFC 3339 UTC, microseconds), "event", "sandbox" (the id), "labels" (the sandbox's), "pid" (of the
 * writing process) and the event's own fields. Writing never fails a sandbox operation: a record that
 * could not be written is counted in sandlet_runtime_stats_json ("audit": {"failed", "last_error", ...}).
 * At its end this header also has the logs kept of sandboxes past their end (sandlet_runtime_logs).
 */
#ifndef SANDLET_SANDLET_AUDIT_H
#define SANDLET_SANDLET_AUDIT_H

#ifndef SANDLET_SANDLET_H
#error "include <sandlet/sandlet.h>, which includes this file"
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* The live file of the runtime's audit log ("<root>/audit/audit.jsonl"), owned by the runtime (valid until
   it is closed). The file exists once a first record was written. */
SANDLET_API const char *sandlet_runtime_audit_path(const sandlet_runtime_t *rt);

/* Which records a reader returns: all conditions must hold. */
typedef struct sandlet_audit_filter {
  uint32_t size;              /* sizeof(sandlet_audit_filter_t) */
  const char *sandbox;        /* a sandbox id; NULL or "" = any */
  const char *const *labels;  /* n_labels "KEY=VALUE" entries, each a label the record's sandbox has */
  size_t n_labels;
  double since;               /* unix seconds: records whose "ts" is at or after it; 0 = all */
} sandlet_audit_filter_t;
#define SANDLET_AUDIT_FILTER_INIT {sizeof(sandlet_audit_filter_t), NULL, NULL, 0, 0}

/* A reader of one audit log: from its oldest rotated file to the live one, then on as records are appended.
   It keeps its place across rotations (files are followed by identity, not name), so each record is read
   exactly once, unless the reader falls so far behind that a file is rotated out of the kept set first.
   One thread at a time per reader; readers are independent of each other and of any runtime (a reader
   may outlive the runtime whose path it was given). */
typedef struct sandlet_audit_reader sandlet_audit_reader_t;

/* Opens a reader of the log whose live file is `path` (sandlet_runtime_audit_path; a log that does not
   exist yet reads as empty until it appears). `filter` may be NULL (every record). A label entry without
   '=' is INVALID_ARGUMENT naming it. On success *out is owned by the caller: release it with
   sandlet_audit_reader_close. */
SANDLET_API sandlet_error_t *sandlet_audit_reader_open(const char *path, const sandlet_audit_filter_t *filter,
                                                       sandlet_audit_reader_t **out);
/* The next matching record, one JSON object without its newline, in *line (owned by the caller: free with
   sandlet_free); *line is NULL when there is none now — call again later to follow the log (poll; the call
   never waits for records, it only waits for a rotation in progress). Lines that are not JSON objects (a
   write cut short by a full disk) are skipped. */
SANDLET_API sandlet_error_t *sandlet_audit_reader_next(sandlet_audit_reader_t *reader, char **line);
SANDLET_API void sandlet_audit_reader_close(sandlet_audit_reader_t *reader);

/* Kept logs (spec on_expiry "keep_logs" or "keep", docs/AUDIT.md).
   What is kept of sandbox `id` for debugging, as JSON in *out_json (free with sandlet_free):
     {"id", "state": "running"|"paused"|"dead"|"creating"|"expired", "backend", "environment",
      "labels": {...}, "created_at", "on_expiry",
      "reason", "ended_at", "keep_until",        (expired only: why and when it ended, kept until)
      "last_output": [ {record}, ... ],          the last 16 execs, oldest first (on_expiry keep_logs or
                                                 keep): an audit "output" record with the exec's fields
                                                 (argv, exit_code, signal, timed_out or error, byte counts)
                                                 and "stdout"/"stderr", the last 4000 bytes of each (valid
                                                 UTF-8; what the sandbox printed, i.e. untrusted)
      "audit": [ {record}, ... ]}                its last 64 audit records (as above), as far back as
                                                 the audit log's rotated files reach
   A live sandbox of the root (any process's), or one that expired under on_expiry "keep_logs" less than
   its keep_s ago. NOT_FOUND for neither; INVALID_ARGUMENT for a malformed id. */
SANDLET_API sandlet_error_t *sandlet_runtime_logs(sandlet_runtime_t *rt, const char *id, char **out_json);
/* The sandboxes that expired under on_expiry "keep_logs" and are still kept: a JSON array of
   {"id", "state": "expired", "backend", "environment", "labels", "created_at", "ended_at", "reason",
   "keep_until"}, sorted by id. */
SANDLET_API sandlet_error_t *sandlet_runtime_expired(sandlet_runtime_t *rt, char **out_json);
/* Drops what is kept of an expired sandbox at once (as gc does after its keep_s). NOT_FOUND when nothing is. */
SANDLET_API sandlet_error_t *sandlet_runtime_forget_expired(sandlet_runtime_t *rt, const char *id);

#ifdef __cplusplus
}
#endif

#endif /* SANDLET_SANDLET_AUDIT_H */
