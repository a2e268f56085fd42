// The sandbox spec: the one place user input is parsed and validated (Boost.JSON).
// Every error is an Error(kInvalidArgument) whose message names the field and the reason;
// nothing is created from a spec that did not validate.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "spec/policy_spec.hpp"
#include "spec/network_spec.hpp"

namespace sandlet {

enum class Lifetime { kOwned, kDetached };
// What a sandbox's max lifetime or idle timeout does: destroy it; destroy it but keep its logs (the audit
// trail and the last output of its commands, runtime/agent/output_log.hpp) for keep_s; or keep it for debugging
// (its processes stopped, its files, writable layer and processes' state kept, exec and file calls still
// served) until an explicit destroy or keep_s later.
enum class OnExpiry { kDestroy, kKeepLogs, kKeep };

// A host directory mounted into the sandbox (before anything inside runs; the sandbox's own processes
// cannot mount). Read-only: root inside cannot write or remount it. Read-write: what the sandbox writes
// is stored under the sandbox's own host uid range, never as host root (sandlet.h, "mounts").
struct Mount {
  std::string source;    // absolute, normalized host path of a directory (its submounts come along)
  std::string target;    // absolute, normalized path inside: not "/", /proc, /dev, /sys or below them
  bool readonly = true;
  bool operator==(const Mount&) const = default;
};

struct Limits {
  double cpus = 0;           // 0 = no CPU limit; else quota in CPUs (0.01 .. 1024)
  uint64_t memory = 0;       // bytes; 0 = no memory limit; else 4 MiB .. 1 PiB
  uint64_t pids = 4096;      // max processes; 2 (the agent plus one) .. 4194304; the default stops fork bombs
  uint64_t disk = 2ull << 30;  // bytes of the writable layer; 1 MiB .. 1 TiB
  // Fixed bounds besides these (include/sandlet/sandlet.h, "limits"): the writable layer holds at most
  // max(disk / 4 KiB, 16384) inodes; /dev is 64 MiB and 4096 inodes; /dev/shm 256 MiB and 16384 inodes;
  // a command's RLIMIT_NOFILE is at most 65536 (hard); output per stream per exec is capped (16 MiB default).
};

struct Spec {
  std::string backend = "container";
  // Lowest first (<= 500): absolute paths of host directories, or layers of the runtime's store by digest
  // ("sha256:<64 hex>", 64 hex, or a unique prefix of >= 12 hex digits) or by layer name.
  std::vector<std::string> layers;
  // "" or an environment of the store: "name" (latest version) or "name@N". Its layers go below `layers`;
  // its env is the base of `env`; its workdir/user apply when the spec leaves workdir "/" and user "".
  std::string environment;
  std::map<std::string, std::string> env;    // keys: non-empty, no '=' or NUL, <= 4096 bytes; values <= 128 KiB
  // Credentials, as env (the same rules; a key in both is an error): in every command's environment, but
  // never shown by info or list and not given to fork children unless the fork asks.
  std::map<std::string, std::string> secrets;
  std::string workdir = "/";                 // absolute
  std::string hostname = "sandbox";          // RFC 1123 label(s), <= 64 chars
  std::string user;                          // "" (root), "uid", "uid:gid" (ids < 65536), [a-z_][a-z0-9_-]{0,31}
  Limits limits;
  NetworkPolicy network;                     // "none" (loopback only) or a policy (network_spec.hpp)
  std::map<std::string, std::string> labels; // <= 64; keys 1..63 chars [A-Za-z0-9._/-]; values <= 256 bytes
  Lifetime lifetime = Lifetime::kOwned;
  double max_lifetime_s = 86400;             // > 0, <= 30 days; a lost owner never leaves a sandbox forever
  double idle_timeout_s = 0;                 // 0 = none; else destroyed after this long idle (<= 30 days)
  OnExpiry on_expiry = OnExpiry::kDestroy;
  double keep_s = 3600;                      // with kKeepLogs / kKeep: > 0, <= 30 days after the expiry
  // Guarantees this sandbox may get in a weaker form where the host cannot give them in full (names of
  // spec/weaker_guarantees.hpp, each once). Without the name, such a create fails (UNIMPLEMENTED).
  std::vector<std::string> accept_weaker;
  // <= 64; each target once, none inside another's (nested mounts are refused).
  std::vector<Mount> mounts;
  // What the sandbox may do beyond its namespaces: seccomp profile, relaxations and extra denials; file
  // rules and kernel-file masks that bind root inside (policy_spec.hpp, docs/POLICY.md).
  Policy policy;
  // "" or the protected toolkit: a host directory or a store layer, as a `layers` entry; mounted read-only at
  // /.sandlet/toolkit for execs with the `toolkit` option (docs/POLICY.md, "Protected toolkit").
  std::string toolkit;
};

// Parses a JSON object (schema in include/sandlet/sandlet.h). Unknown fields and duplicate keys are errors;
// absent fields keep their defaults. Sizes accept a number of bytes or a string with a binary suffix:
// "512M", "1G", "64k", "1.5G", "100" (bytes). Malformed JSON: "invalid spec: malformed JSON at offset N ...".
Spec parse_spec_json(std::string_view json);
// Every field, sizes as integers; parse_spec_json(spec_to_json(s)) gives back s exactly (doubles included).
std::string spec_to_json(const Spec& spec);

// Whole-spec checks: every field as its setter checks it (a Spec may have been filled in directly), at least
// one layer or an environment, and each directory layer and mount source exists and is a directory (the
// Error then carries the errno). Store references are checked for syntax only here; the runtime resolves them.
void validate_spec(const Spec& spec);

// Field setters used by the C ABI's field-by-field builder; each validates like the JSON parser does.
void spec_set_backend(Spec& s, std::string_view v);
void spec_add_layer(Spec& s, std::string_view v);
void spec_set_environment(Spec& s, std::string_view v);
void spec_set_env(Spec& s, std::string_view key, std::string_view value);
void spec_set_secret(Spec& s, std::string_view key, std::string_view value);
void spec_set_workdir(Spec& s, std::string_view v);
void spec_set_hostname(Spec& s, std::string_view v);
void spec_set_user(Spec& s, std::string_view v);
void spec_set_cpus(Spec& s, double v);
void spec_set_memory(Spec& s, uint64_t v);
void spec_set_pids(Spec& s, uint64_t v);
void spec_set_disk(Spec& s, uint64_t v);
void spec_set_network(Spec& s, std::string_view v);       // "none" only: a policy comes as JSON
void spec_set_network_json(Spec& s, std::string_view json);  // "none" or a policy object (network_spec.hpp)
void spec_set_label(Spec& s, std::string_view key, std::string_view value);
void spec_set_lifetime(Spec& s, std::string_view v);
void spec_set_max_lifetime(Spec& s, double seconds);
void spec_set_idle_timeout(Spec& s, double seconds);
void spec_set_on_expiry(Spec& s, std::string_view mode);  // "destroy" | "keep_logs" | "keep"
const char* on_expiry_name(OnExpiry mode);
void spec_set_keep(Spec& s, double seconds);
// What the label "sandlet/priority" asks for: "latency" or "batch" (kUnset without it); any other value is
// INVALID_ARGUMENT naming the label. The CPU class is best-effort only for "batch"; node admission queues
// a create first only for "latency".
constexpr const char* kPriorityLabel = "sandlet/priority";
enum class SpecPriority { kUnset, kLatency, kBatch };
SpecPriority spec_priority(const Spec& s);
void spec_accept_weaker(Spec& s, std::string_view guarantee);  // adds one name (a repeat is a no-op)
// Appends a mount (fields named "mounts[N].source"/".target", N its index); the short form is
// "SRC:DST", "SRC:DST:ro" or "SRC:DST:rw" (paths without ':'; read-only when the mode is left out).
void spec_add_mount(Spec& s, std::string_view source, std::string_view target, bool readonly);
void spec_add_mount_text(Spec& s, std::string_view text);
void spec_set_toolkit(Spec& s, std::string_view v);  // "" clears; else checked as a `layers` entry
// validate_spec's part for mounts on the host: each source exists and is a directory.
void check_mount_sources(const Spec& spec);

// "512M" -> 536870912; throws Error(kInvalidArgument) naming `field` on bad input. Grammar: digits, an
// optional fraction (only with a suffix; rounded down to whole bytes), an optional k/M/G/T (1024-based,
// either case) then optionally "i", "iB" or "B". No range check beyond 64 bits: that is the field's job.
uint64_t parse_size(std::string_view text, const std::string& field);

}  // namespace sandlet
