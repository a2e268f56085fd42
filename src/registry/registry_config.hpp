// How a runtime reaches OCI registries: mirrors, plain-HTTP registries, CA bundles, credentials, retries and
// the platform to pick from a multi-platform image. Given per runtime as JSON (RuntimeOptions::registries,
// sandlet_runtime_options_t.registries, $SANDLET_REGISTRIES); docs/REGISTRIES.md has the schema.
#pragma once
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace sandlet::registry {

// Basic credentials, sent to the registry or its token server. (Identity/refresh tokens of config.json are not
// used: an entry with only one is no credentials.)
struct Credentials {
  std::string username, password;
  bool empty() const { return username.empty(); }
};

enum class PullPolicy { kMissing, kNever, kAlways };

struct RegistryConfig {
  // registry ("docker.io", "ghcr.io", "host:port") -> mirrors tried first, in order ("host[:port]" or an
  // http(s) URL with an optional path prefix). The registry itself is tried after them.
  std::map<std::string, std::vector<std::string>> mirrors;
  std::vector<std::string> insecure;  // registries (or mirrors) reached over plain HTTP
  std::string ca_file;                // the CA bundle of the registries and mirrors ("" = the system's store)
  std::string auth_file;              // credentials in docker's config.json format ("" = the usual places)
  std::string platform;               // "os/arch[/variant]" ("" = linux/<this machine's arch>)
  PullPolicy pull = PullPolicy::kMissing;  // what a create or a build does with an image not in the store
  int retries = 4;                    // per request, exponential backoff with jitter
  double timeout_s = 60;              // per network wait
};

// Parses the JSON object (keys: mirrors, insecure, ca_file, auth_file, platform, pull, retries, timeout_s).
// "" = every default. Throws Error(kInvalidArgument) naming `field`.KEY.
RegistryConfig parse_registry_config(const std::string& json_text, const std::string& field = "registries");

// `config` with what the process environment adds when the runtime was given nothing: $SANDLET_REGISTRIES
// (the same JSON).
RegistryConfig registry_config_from_env_or(const std::string& json_text, const std::string& field = "registries");

bool is_insecure(const RegistryConfig& config, const std::string& host);

// Credentials for `registry` from the auth file: `config.auth_file`, else $REGISTRY_AUTH_FILE, else
// $DOCKER_CONFIG/config.json, else ~/.docker/config.json. Keys are matched as docker does ("host",
// "https://host", "https://host/v1/", and the default registry's historic index URL). Credential helpers
// are not run. nullopt when no entry matches. A malformed file is kInvalidArgument naming it.
std::optional<Credentials> find_credentials(const RegistryConfig& config, const std::string& registry);

// "linux/amd64" for this machine (GOARCH names: amd64, arm64, ...).
std::string host_platform();

}  // namespace sandlet::registry
