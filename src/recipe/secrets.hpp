// Build secrets (docs/BUILD.md, "Secrets and identities"): values a RUN step may read as a file without
// them ever being part of a layer, the build cache, the audit log, progress or an error message.
// `--secret id=NAME,src=FILE|env=VAR` gives a value to the build; `RUN --mount=type=secret,id=NAME,...`
// asks for it in one step. Parsing is pure; staging (secret_stage.hpp) touches the host.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace sandlet::build {

// One `--mount=type=secret,...` of a RUN: where the value appears and as whom.
struct SecretMount {
  std::string id;      // [A-Za-z0-9._-], 1..255; defaults to the target's last component
  std::string target;  // absolute, normalized; default /run/secrets/ID
  bool required = false;  // a missing secret fails the build (else the step runs without the file)
  uint32_t mode = 0400;
  uint32_t uid = 0, gid = 0;  // ids inside the sandbox
  bool operator==(const SecretMount&) const = default;
};

// Parses the value of one `--mount=` flag ("type=secret,id=x,target=/p"); `where` prefixes errors
// ("RECIPE:LINE: RUN --mount"). Only type=secret is accepted.
SecretMount parse_secret_mount(std::string_view value, const std::string& where);

// Checks a RUN's mounts together: each target once, and the directories holding them (each becomes one
// private read-only directory during the step) neither "/" nor nested in one another.
void check_secret_mounts(const std::vector<SecretMount>& mounts, const std::string& where);

// The directory a target's file appears in (the mount point of its group).
std::string secret_dir(const std::string& target);

constexpr size_t kMaxSecretBytes = 512 << 10;  // one secret's value
constexpr size_t kMaxSecrets = 64;

// Loads `--secret` values: "id=NAME,src=FILE" (the file's bytes) or "id=NAME,env=VAR" (the variable of
// this process; `getenv`). Errors name "secrets[i]" and the id or path, never the value.
std::map<std::string, std::string> load_secrets(const std::vector<std::string>& sources);

}  // namespace sandlet::build
