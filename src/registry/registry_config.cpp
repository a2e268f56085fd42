#include "registry/registry_config.hpp"

#include <openssl/evp.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <boost/json.hpp>
#include <cstdlib>

#include "common/error.hpp"
#include "sys/fs_util.hpp"

namespace json = boost::json;

namespace sandlet::registry {
namespace {

[[noreturn]] void bad(const std::string& field, const std::string& why) {
  throw Error(Code::kInvalidArgument, "invalid " + field + ": " + why);
}

std::string req_string(const json::value& v, const std::string& field) {
  if (!v.is_string()) bad(field, "expected a string");
  return std::string(v.as_string());
}

std::vector<std::string> string_list(const json::value& v, const std::string& field) {
  if (!v.is_array()) bad(field, "expected an array of strings");
  std::vector<std::string> out;
  for (size_t i = 0; i < v.as_array().size(); ++i) {
    std::string s = req_string(v.as_array()[i], field + "[" + std::to_string(i) + "]");
    if (s.empty()) bad(field + "[" + std::to_string(i) + "]", "empty");
    out.push_back(std::move(s));
  }
  return out;
}

std::optional<std::string> base64_decode(const std::string& in) {
  if (in.empty() || in.size() % 4 != 0) return std::nullopt;
  std::string out(in.size() / 4 * 3, '\0');
  const int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(in.data()), static_cast<int>(in.size()));
  if (n < 0) return std::nullopt;
  size_t len = static_cast<size_t>(n);
  // EVP_DecodeBlock counts the padding's zero bytes.
  for (size_t i = in.size(); i > 0 && in[i - 1] == '=' && len > 0; --i) --len;
  out.resize(len);
  return out;
}

// The keys docker's config.json may use for one registry.
std::vector<std::string> auth_keys(const std::string& registry) {
  std::vector<std::string> keys = {registry, "https://" + registry, "http://" + registry, "https://" + registry + "/v1/",
                                   "https://" + registry + "/v2/"};
  if (registry == "docker.io") {
    keys.push_back("https://index.docker.io/v1/");
    keys.push_back("index.docker.io");
    keys.push_back("registry-1.docker.io");
  }
  return keys;
}

std::string default_auth_file() {
  if (const char* f = std::getenv("REGISTRY_AUTH_FILE"); f && *f) return f;
  if (const char* d = std::getenv("DOCKER_CONFIG"); d && *d) return std::string(d) + "/config.json";
  if (const char* h = std::getenv("HOME"); h && *h) return std::string(h) + "/.docker/config.json";
  return "";
}

}  // namespace

RegistryConfig parse_registry_config(const std::string& text, const std::string& field) {
  RegistryConfig c;
  if (text.empty()) return c;
  json::value v;
  try {
    v = json::parse(text);
  } catch (const std::exception& e) {
    bad(field, std::string("not JSON (") + e.what() + ")");
  }
  if (!v.is_object()) bad(field, "expected a JSON object");
  for (const auto& [key, val] : v.as_object()) {
    const std::string k(key), f = field + "." + k;
    if (k == "mirrors") {
      if (!val.is_object()) bad(f, "expected an object: registry -> [mirror, ...]");
      for (const auto& [reg, list] : val.as_object()) c.mirrors[std::string(reg)] = string_list(list, f + "." + std::string(reg));
    } else if (k == "insecure") {
      c.insecure = string_list(val, f);
    } else if (k == "ca_file") {
      c.ca_file = req_string(val, f);
      if (!c.ca_file.empty() && ::access(c.ca_file.c_str(), R_OK) != 0) bad(f, "'" + c.ca_file + "' is not readable");
    } else if (k == "auth_file") {
      c.auth_file = req_string(val, f);
    } else if (k == "platform") {
      c.platform = req_string(val, f);
      const size_t slash = c.platform.find('/');
      if (slash == std::string::npos || slash == 0 || slash + 1 == c.platform.size())
        bad(f, "expected os/arch[/variant], e.g. linux/amd64");
    } else if (k == "pull") {
      const std::string p = req_string(val, f);
      if (p == "missing") c.pull = PullPolicy::kMissing;
      else if (p == "never") c.pull = PullPolicy::kNever;
      else if (p == "always") c.pull = PullPolicy::kAlways;
      else bad(f, "'" + p + "' is not one of missing, never, always");
    } else if (k == "retries") {
      if (!val.is_int64() || val.as_int64() < 0 || val.as_int64() > 20) bad(f, "expected an integer 0..20");
      c.retries = static_cast<int>(val.as_int64());
    } else if (k == "timeout_s") {
      if (!val.is_number() || val.to_number<double>() <= 0 || val.to_number<double>() > 3600)
        bad(f, "expected seconds, more than 0 and at most 3600");
      c.timeout_s = val.to_number<double>();
    } else {
      bad(f, "unknown key (known: mirrors, insecure, ca_file, auth_file, platform, pull, retries, timeout_s)");
    }
  }
  return c;
}

RegistryConfig registry_config_from_env_or(const std::string& text, const std::string& field) {
  if (!text.empty()) return parse_registry_config(text, field);
  if (const char* e = std::getenv("SANDLET_REGISTRIES"); e && *e) return parse_registry_config(e, "$SANDLET_REGISTRIES");
  return RegistryConfig{};
}

bool is_insecure(const RegistryConfig& config, const std::string& host) {
  return std::find(config.insecure.begin(), config.insecure.end(), host) != config.insecure.end();
}

std::optional<Credentials> find_credentials(const RegistryConfig& config, const std::string& registry) {
  const std::string path = config.auth_file.empty() ? default_auth_file() : config.auth_file;
  if (path.empty() || ::access(path.c_str(), F_OK) != 0) {
    if (!config.auth_file.empty()) throw Error(Code::kInvalidArgument, "registry auth file " + path + " does not exist");
    return std::nullopt;
  }
  std::string text;
  try {
    text = sys::read_file(path);
  } catch (const Error& e) {
    throw Error(Code::kInvalidArgument, "registry auth file: " + std::string(e.what()));
  }
  json::value v;
  try {
    v = json::parse(text);
  } catch (const std::exception& e) {
    throw Error(Code::kInvalidArgument, "registry auth file " + path + ": not JSON (" + e.what() + ")");
  }
  const json::object* auths = nullptr;
  if (v.is_object())
    if (const auto* a = v.as_object().if_contains("auths"); a && a->is_object()) auths = &a->as_object();
  if (!auths) return std::nullopt;
  for (const std::string& key : auth_keys(registry)) {
    const auto* entry = auths->if_contains(key);
    if (!entry || !entry->is_object()) continue;
    const json::object& o = entry->as_object();
    Credentials c;
    if (const auto* a = o.if_contains("auth"); a && a->is_string() && !a->as_string().empty()) {
      const auto decoded = base64_decode(std::string(a->as_string()));
      const size_t colon = decoded ? decoded->find(':') : std::string::npos;
      if (colon == std::string::npos)
        throw Error(Code::kInvalidArgument, "registry auth file " + path + ": the 'auth' of '" + key +
                                                "' is not base64 of user:password");
      c.username = decoded->substr(0, colon);
      c.password = decoded->substr(colon + 1);
    } else {
      if (const auto* u = o.if_contains("username"); u && u->is_string()) c.username = std::string(u->as_string());
      if (const auto* p = o.if_contains("password"); p && p->is_string()) c.password = std::string(p->as_string());
    }
    if (!c.empty()) return c;
  }
  return std::nullopt;
}

std::string host_platform() {
  struct utsname u{};
  ::uname(&u);
  const std::string m = u.machine;
  std::string arch = m;
  if (m == "x86_64") arch = "amd64";
  else if (m == "aarch64") arch = "arm64";
  else if (m == "i686" || m == "i386") arch = "386";
  else if (m.rfind("armv7", 0) == 0) arch = "arm/v7";
  return "linux/" + arch;
}

}  // namespace sandlet::registry
