// Field validation for the sandbox spec: the setters, parse_size and validate_spec. The JSON parser
// (spec_json.cpp) checks JSON types and then goes through these same setters, so a field is validated
// the same way, with the same message, whichever way it was set.
#include "spec/spec.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>

#include "common/error.hpp"
#include "registry/image_ref.hpp"
#include "spec/spec_text.hpp"
#include "spec/weaker_guarantees.hpp"

namespace sandlet {
namespace {

using spec_text::check_absolute_path;
using spec_text::check_text;
using spec_text::escaped;
using spec_text::quoted;

constexpr uint64_t kKiB = 1024;
constexpr uint64_t kMiB = kKiB << 10;
constexpr uint64_t kGiB = kMiB << 10;
constexpr uint64_t kTiB = kGiB << 10;
constexpr uint64_t kPiB = kTiB << 10;

constexpr size_t kMaxPath = 4095;           // PATH_MAX including the NUL
constexpr size_t kMaxLayers = 500;          // overlayfs stacks at most 500 lower layers
constexpr size_t kMaxEnvKey = 4096;
constexpr size_t kMaxEnvValue = 128 * 1024;  // the kernel's MAX_ARG_STRLEN
constexpr size_t kMaxHostname = 64;          // HOST_NAME_MAX
constexpr size_t kMaxHostLabel = 63;
constexpr size_t kMaxLabelKey = 63;
constexpr size_t kMaxLabelValue = 256;
constexpr size_t kMaxLabels = 64;
constexpr size_t kMaxUserName = 32;
constexpr uint64_t kIdCount = 65536;  // the sandbox's user namespace maps this many ids
constexpr double kMinCpus = 0.01;
constexpr double kMaxCpus = 1024;
constexpr uint64_t kMinMemory = 4 * kMiB;
constexpr uint64_t kMaxMemory = kPiB;  // keeps page rounding and unit conversions in backends from overflowing
constexpr uint64_t kMinPids = 2;
constexpr uint64_t kMaxPids = 4194304;  // the kernel's PID_MAX_LIMIT
constexpr uint64_t kMinDisk = kMiB;
constexpr uint64_t kMaxDisk = kTiB;
constexpr double kMaxSeconds = 30.0 * 24 * 3600;


// Length of the well-formed UTF-8 sequence starting at s[i] (the same rules Boost.JSON enforces:
// no overlongs, no surrogates, nothing above U+10FFFF), or 0 if there is none.
size_t utf8_sequence_length(std::string_view s, size_t i) {
  const auto c = static_cast<unsigned char>(s[i]);
  if (c < 0x80) return 1;
  size_t n;
  uint32_t cp;
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2, cp = c & 0x1F;
  } else if ((c & 0xF0) == 0xE0) {
    n = 3, cp = c & 0x0F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4, cp = c & 0x07;
  } else {
    return 0;
  }
  if (s.size() - i < n) return 0;
  for (size_t k = 1; k < n; ++k) {
    const auto d = static_cast<unsigned char>(s[i + k]);
    if ((d & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (d & 0x3F);
  }
  if (n == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) return 0;
  if (n == 4 && (cp < 0x10000 || cp > 0x10FFFF)) return 0;
  return n;
}

// The shortest text that reads back as the same double ("0.1", "1.5", "inf").
std::string number_text(double v) {
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

// A layer digest ("sha256:<hex>", hex) or a name of the store: [A-Za-z0-9][A-Za-z0-9._:-]{0,127}.
void check_store_ref(const std::string& field, std::string_view v) {
  std::string_view body = v.substr(0, 7) == "sha256:" ? v.substr(7) : v;
  auto ok = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
           c == '-' || c == ':';
  };
  if (body.empty() || body.size() > 128 || !std::isalnum(static_cast<unsigned char>(body[0])) ||
      !std::all_of(body.begin(), body.end(), ok)) {
    throw_invalid(field, "expected an absolute directory path, a layer digest or a layer/environment name "
                         "([A-Za-z0-9._:-], <= 128), got " + quoted(v));
  }
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_lower(char c) { return c >= 'a' && c <= 'z'; }
bool is_alnum(char c) { return is_digit(c) || is_lower(c) || (c >= 'A' && c <= 'Z'); }

void check_hostname(std::string_view v) {
  const std::string field = "hostname";
  if (v.empty() || v.size() > kMaxHostname) {
    throw_invalid(field, "must be 1.." + std::to_string(kMaxHostname) + " characters, got " +
                             std::to_string(v.size()));
  }
  const auto bad = [&](const std::string& why) {
    throw_invalid(field, quoted(v) + " is not a valid hostname: " + why);
  };
  size_t start = 0;
  while (true) {
    const size_t dot = v.find('.', start);
    const std::string_view label = v.substr(start, dot == std::string_view::npos ? v.npos : dot - start);
    if (label.empty()) bad("empty label");
    if (label.size() > kMaxHostLabel) bad("label longer than " + std::to_string(kMaxHostLabel) + " characters");
    for (char c : label) {
      if (!is_alnum(c) && c != '-') bad("only letters, digits, '-' and '.' are allowed");
    }
    if (label.front() == '-' || label.back() == '-') bad("a label must not start or end with '-'");
    if (dot == std::string_view::npos) break;
    start = dot + 1;
  }
}

// A numeric uid or gid: digits only, below kIdCount.
bool parse_id(std::string_view text, uint64_t& out) {
  if (text.empty() || text.size() > 10) return false;
  out = 0;
  for (char c : text) {
    if (!is_digit(c)) return false;
    out = out * 10 + static_cast<uint64_t>(c - '0');
  }
  return true;
}

void check_user(std::string_view v) {
  const std::string field = "user";
  if (v.empty()) return;
  const size_t colon = v.find(':');
  uint64_t uid = 0, gid = 0;
  const bool numeric = colon == std::string_view::npos
                           ? parse_id(v, uid)
                           : parse_id(v.substr(0, colon), uid) && parse_id(v.substr(colon + 1), gid);
  if (numeric) {
    if (uid >= kIdCount || gid >= kIdCount) {
      throw_invalid(field, quoted(v) + ": ids must be below " + std::to_string(kIdCount) +
                               " (the sandbox maps ids 0.." + std::to_string(kIdCount - 1) + ")");
    }
    return;
  }
  bool name = v.size() <= kMaxUserName && (is_lower(v[0]) || v[0] == '_');
  for (size_t i = 1; name && i < v.size(); ++i) {
    name = is_lower(v[i]) || is_digit(v[i]) || v[i] == '_' || v[i] == '-';
  }
  if (!name) {
    throw_invalid(field, quoted(v) + " is not a valid user: expected \"uid\", \"uid:gid\" (numbers below " +
                             std::to_string(kIdCount) + ") or a name matching [a-z_][a-z0-9_-]{0,31}");
  }
}

bool is_label_key_char(char c) { return is_alnum(c) || c == '.' || c == '_' || c == '/' || c == '-'; }

}  // namespace

namespace spec_text {

std::string escaped(std::string_view s, size_t max_chars) {
  std::string out;
  size_t i = 0;
  for (size_t shown = 0; i < s.size() && shown < max_chars; ++shown) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t n = utf8_sequence_length(s, i);
    if (n == 0 || c < 0x20 || c == 0x7F) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
      n = 1;
    } else if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else {
      out.append(s.substr(i, n));
    }
    i += n;
  }
  if (i < s.size()) out += "...";
  return out;
}

std::string quoted(std::string_view s) { return "\"" + escaped(s) + "\""; }

void check_text(const std::string& field, std::string_view v, const std::string& what) {
  for (size_t i = 0; i < v.size();) {
    if (v[i] == '\0') throw_invalid(field, what + " contains a NUL byte");
    const size_t n = utf8_sequence_length(v, i);
    if (n == 0) throw_invalid(field, what + " is not valid UTF-8");
    i += n;
  }
}

void check_absolute_path(const std::string& field, std::string_view v) {
  if (v.empty()) throw_invalid(field, "expected an absolute path, got an empty string");
  check_text(field, v, "path");
  if (v.front() != '/') throw_invalid(field, "expected an absolute path, got " + quoted(v));
  if (v.size() > kMaxPath) throw_invalid(field, "path longer than " + std::to_string(kMaxPath) + " bytes");
}

// Absolute, and already in the form the kernel would resolve it to lexically: no empty, "." or ".."
// component, no trailing '/'. (A user's "/data/" or "/a/../b" is most likely a mistake worth naming.)
void check_normalized_path(const std::string& field, std::string_view v) {
  check_absolute_path(field, v);
  if (v == "/") return;
  if (v.back() == '/') throw_invalid(field, quoted(v) + " ends in '/' (write it without)");
  for (size_t start = 1; start <= v.size();) {
    size_t end = v.find('/', start);
    if (end == std::string_view::npos) end = v.size();
    const std::string_view part = v.substr(start, end - start);
    if (part.empty() || part == "." || part == "..")
      throw_invalid(field, quoted(v) + " is not a normalized path (no \"//\", \".\" or \"..\" components)");
    start = end + 1;
  }
}

}  // namespace spec_text

// ---- setters -------------------------------------------------------------------------------------------

// Which names exist is the backend registry's to say (the runtime checks it at create, naming the field);
// here only the form.
void spec_set_backend(Spec& s, std::string_view v) {
  const bool well_formed = !v.empty() && v.size() <= 32 && std::all_of(v.begin(), v.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
  });
  if (!well_formed) throw_invalid("backend", quoted(v) + " is not a backend name (lower-case letters, digits, '_', '-')");
  s.backend = v;
}

void spec_add_layer(Spec& s, std::string_view v) {
  if (s.layers.size() >= kMaxLayers) {
    throw_invalid("layers", "at most " + std::to_string(kMaxLayers) + " layers are supported");
  }
  std::string field = "layers[" + std::to_string(s.layers.size()) + "]";
  if (!v.empty() && v[0] == '/') {
    check_absolute_path(field, v);
  } else {
    check_store_ref(field, v);
  }
  s.layers.emplace_back(v);
}

void spec_set_toolkit(Spec& s, std::string_view v) {
  if (!v.empty() && v[0] == '/') {
    check_absolute_path("toolkit", v);
  } else if (!v.empty()) {
    check_store_ref("toolkit", v);
  }
  s.toolkit = v;
}

// An environment: a store name or a registry reference ("ghcr.io/org/img:tag", "docker://..."), maybe "@N".
void spec_set_environment(Spec& s, std::string_view v) {
  const std::string text(v);
  const size_t at = text.rfind('@');
  const bool versioned = !v.empty() && !registry::has_docker_scheme(text) && at != std::string::npos &&
                         text.compare(at, 8, "@sha256:") != 0;
  const std::string name = versioned ? text.substr(0, at) : text;
  if (versioned) {
    const std::string ver = text.substr(at + 1);
    if (ver.empty() || ver.size() > 9 || ver[0] == '0' || !std::all_of(ver.begin(), ver.end(), is_digit))
      throw_invalid("environment", "the version after '@' must be a positive integer: " + quoted(v));
  }
  // A local name, else an image reference (pulled from its registry when the store lacks it).
  if (name.empty() || (name.find_first_of("/@") == std::string::npos && !registry::has_docker_scheme(name))) {
    if (!name.empty()) check_store_ref("environment", name);
  } else {
    try {
      registry::parse_image_ref(name, "image reference");
    } catch (const Error& e) {
      throw_invalid("environment", e.what());
    }
  }
  s.environment = v;
}

namespace {
// An environment variable of `map` ("env" or "secrets"), checked alike.
void set_variable(std::map<std::string, std::string>& map, const char* what, std::string_view key,
                  std::string_view value) {
  if (key.empty()) throw_invalid(what, "key must not be empty");
  check_text(what, key, "key " + quoted(key));
  if (key.find('=') != std::string_view::npos) throw_invalid(what, "key " + quoted(key) + " must not contain '='");
  if (key.size() > kMaxEnvKey) throw_invalid(what, "key longer than " + std::to_string(kMaxEnvKey) + " bytes");
  const std::string field = std::string(what) + "." + escaped(key);
  check_text(field, value, "value");
  if (value.size() > kMaxEnvValue) throw_invalid(field, "value longer than " + std::to_string(kMaxEnvValue) + " bytes");
  map.insert_or_assign(std::string(key), std::string(value));
}
}  // namespace

void spec_set_env(Spec& s, std::string_view key, std::string_view value) { set_variable(s.env, "env", key, value); }

void spec_set_secret(Spec& s, std::string_view key, std::string_view value) {
  set_variable(s.secrets, "secrets", key, value);
}

void spec_set_workdir(Spec& s, std::string_view v) {
  check_absolute_path("workdir", v);
  s.workdir = v;
}

void spec_set_hostname(Spec& s, std::string_view v) {
  check_hostname(v);
  s.hostname = v;
}

void spec_set_user(Spec& s, std::string_view v) {
  check_user(v);
  s.user = v;
}

void spec_set_cpus(Spec& s, double v) {
  if (!(v == 0 || (v >= kMinCpus && v <= kMaxCpus))) {
    throw_invalid("limits.cpus", "must be 0 (unlimited) or between 0.01 and 1024, got " + number_text(v));
  }
  s.limits.cpus = v == 0 ? 0 : v;  // no -0
}

void spec_set_memory(Spec& s, uint64_t v) {
  if (v != 0 && v < kMinMemory) {
    throw_invalid("limits.memory",
                  "must be 0 (unlimited) or at least 4 MiB (4194304 bytes), got " + std::to_string(v));
  }
  if (v > kMaxMemory) throw_invalid("limits.memory", "must be at most 1 PiB, got " + std::to_string(v));
  s.limits.memory = v;
}

void spec_set_pids(Spec& s, uint64_t v) {
  if (v < kMinPids || v > kMaxPids) {
    throw_invalid("limits.pids", "must be between " + std::to_string(kMinPids) + " and " +
                                     std::to_string(kMaxPids) + ", got " + std::to_string(v));
  }
  s.limits.pids = v;
}

void spec_set_disk(Spec& s, uint64_t v) {
  if (v < kMinDisk || v > kMaxDisk) {
    throw_invalid("limits.disk", "must be between 1 MiB and 1 TiB (" + std::to_string(kMinDisk) + ".." +
                                     std::to_string(kMaxDisk) + " bytes), got " + std::to_string(v));
  }
  s.limits.disk = v;
}

void spec_set_network(Spec& s, std::string_view v) {
  // The JSON parser's words (a policy object is set with spec_set_network_json).
  if (v != "none") throw_invalid("network", "expected \"none\" or a policy object, got " + quoted(v));
  s.network = NetworkPolicy{};
}

void spec_set_network_json(Spec& s, std::string_view json) { s.network = parse_network_text(json); }

void spec_set_label(Spec& s, std::string_view key, std::string_view value) {
  bool key_ok = !key.empty() && key.size() <= kMaxLabelKey;
  for (size_t i = 0; key_ok && i < key.size(); ++i) key_ok = is_label_key_char(key[i]);
  if (!key_ok) throw_invalid("labels", "key " + quoted(key) + " must be 1..63 characters of [A-Za-z0-9._/-]");
  const std::string field = "labels." + std::string(key);
  check_text(field, value, "value");
  if (value.size() > kMaxLabelValue) {
    throw_invalid(field, "value longer than " + std::to_string(kMaxLabelValue) + " bytes");
  }
  auto it = s.labels.find(std::string(key));
  if (it != s.labels.end()) {
    it->second = value;
    return;
  }
  if (s.labels.size() >= kMaxLabels) throw_invalid("labels", "at most " + std::to_string(kMaxLabels) + " labels");
  s.labels.emplace(std::string(key), std::string(value));
}

void spec_set_lifetime(Spec& s, std::string_view v) {
  if (v == "owned") {
    s.lifetime = Lifetime::kOwned;
  } else if (v == "detached") {
    s.lifetime = Lifetime::kDetached;
  } else {
    throw_invalid("lifetime", "expected \"owned\" or \"detached\", got " + quoted(v));
  }
}

namespace {
// A span of time that must pass: in (0, 30 days], else INVALID_ARGUMENT naming `field`.
double positive_seconds(const char* field, double seconds) {
  if (!(seconds > 0 && seconds <= kMaxSeconds))
    throw_invalid(field, "must be greater than 0 and at most 2592000 (30 days), got " + number_text(seconds));
  return seconds;
}
}  // namespace

void spec_set_max_lifetime(Spec& s, double seconds) { s.max_lifetime_s = positive_seconds("max_lifetime_s", seconds); }

void spec_set_idle_timeout(Spec& s, double seconds) {
  if (!(seconds >= 0 && seconds <= kMaxSeconds)) {
    throw_invalid("idle_timeout_s",
                  "must be 0 (none) or at most 2592000 (30 days), got " + number_text(seconds));
  }
  s.idle_timeout_s = seconds == 0 ? 0 : seconds;  // no -0
}

void spec_set_on_expiry(Spec& s, std::string_view mode) {
  if (mode == "destroy") {
    s.on_expiry = OnExpiry::kDestroy;
  } else if (mode == "keep_logs") {
    s.on_expiry = OnExpiry::kKeepLogs;
  } else if (mode == "keep") {
    s.on_expiry = OnExpiry::kKeep;
  } else {
    throw_invalid("on_expiry", "expected \"destroy\", \"keep_logs\" or \"keep\", got " + quoted(mode));
  }
}

const char* on_expiry_name(OnExpiry mode) {
  switch (mode) {
    case OnExpiry::kKeepLogs: return "keep_logs";
    case OnExpiry::kKeep: return "keep";
    default: return "destroy";
  }
}

SpecPriority spec_priority(const Spec& s) {
  auto it = s.labels.find(kPriorityLabel);
  if (it == s.labels.end()) return SpecPriority::kUnset;
  if (it->second == "latency") return SpecPriority::kLatency;
  if (it->second == "batch") return SpecPriority::kBatch;
  throw_invalid(std::string("labels.") + kPriorityLabel, "must be \"latency\" or \"batch\", got " + quoted(it->second));
}

void spec_set_keep(Spec& s, double seconds) { s.keep_s = positive_seconds("keep_s", seconds); }

// ---- sizes ---------------------------------------------------------------------------------------------

uint64_t parse_size(std::string_view text, const std::string& field) {
  const auto bad = [&]() {
    throw_invalid(field, "expected a size like \"512M\", \"1.5G\", \"64KiB\" or \"100\" (bytes), got " +
                             quoted(text));
  };
  const auto too_large = [&]() { throw_invalid(field, "size " + quoted(text) + " does not fit in 64 bits"); };
  if (text.empty() || !is_digit(text[0])) bad();

  size_t i = 0;
  uint64_t whole = 0;
  for (; i < text.size() && is_digit(text[i]); ++i) {
    if (__builtin_mul_overflow(whole, 10, &whole) ||
        __builtin_add_overflow(whole, static_cast<uint64_t>(text[i] - '0'), &whole)) {
      too_large();
    }
  }

  // The fraction as frac_num / frac_den, exact; 18 digits keep frac_den within 64 bits.
  bool has_fraction = false;
  uint64_t frac_num = 0, frac_den = 1;
  if (i < text.size() && text[i] == '.') {
    has_fraction = true;
    const size_t first = ++i;
    for (; i < text.size() && is_digit(text[i]); ++i) {
      if (i - first >= 18) throw_invalid(field, "size " + quoted(text) + " has too many fractional digits");
      frac_num = frac_num * 10 + static_cast<uint64_t>(text[i] - '0');
      frac_den *= 10;
    }
    if (i == first) bad();
  }

  uint64_t multiplier = 1;
  if (i < text.size()) {
    switch (text[i]) {
      case 'k': case 'K': multiplier = kKiB; break;
      case 'm': case 'M': multiplier = kMiB; break;
      case 'g': case 'G': multiplier = kGiB; break;
      case 't': case 'T': multiplier = kTiB; break;
      default: break;
    }
    if (multiplier != 1) ++i;
  }
  const std::string_view rest = text.substr(i);
  const bool rest_ok = rest.empty() || rest == "B" || (multiplier != 1 && (rest == "i" || rest == "iB"));
  if (!rest_ok) bad();
  // A fraction of a byte means nothing; "1.5" is almost certainly a unit left out.
  if (has_fraction && multiplier == 1) {
    throw_invalid(field, "a fractional size needs a unit suffix (k, M, G, T), got " + quoted(text));
  }

  uint64_t bytes;
  if (__builtin_mul_overflow(whole, multiplier, &bytes)) too_large();
  // Round the fraction down to whole bytes ("1.3K" is 1331 bytes).
  __extension__ typedef unsigned __int128 u128;  // frac_num * multiplier needs up to 100 bits
  const auto frac_bytes = static_cast<uint64_t>(static_cast<u128>(frac_num) * multiplier / frac_den);
  if (__builtin_add_overflow(bytes, frac_bytes, &bytes)) too_large();
  // 0 means "unlimited" for some limits: a tiny non-zero size must not silently become that.
  if (bytes == 0 && (whole != 0 || frac_num != 0)) {
    throw_invalid(field, "size " + quoted(text) + " is smaller than one byte");
  }
  return bytes;
}

void spec_accept_weaker(Spec& s, std::string_view guarantee) {
  std::string known;
  for (const auto& g : kWeakerGuarantees) {
    if (g.name == guarantee) {
      for (const auto& have : s.accept_weaker)
        if (have == guarantee) return;
      s.accept_weaker.emplace_back(guarantee);
      return;
    }
    known += std::string(known.empty() ? "" : ", ") + "\"" + std::string(g.name) + "\"";
  }
  throw_invalid("accept_weaker", "unknown guarantee " + quoted(guarantee) + " (known: " + known + ")");
}

// ---- whole-spec checks ---------------------------------------------------------------------------------

void validate_spec(const Spec& spec) {
  // A Spec is a plain struct that C++ callers may fill in directly: run every field through its setter.
  Spec check;
  spec_set_backend(check, spec.backend);
  for (const auto& layer : spec.layers) spec_add_layer(check, layer);
  spec_set_environment(check, spec.environment);
  for (const auto& [key, value] : spec.env) spec_set_env(check, key, value);
  for (const auto& [key, value] : spec.secrets) {
    spec_set_secret(check, key, value);
    if (spec.env.count(key)) throw_invalid("secrets." + escaped(key), "also set in env");
  }
  spec_set_workdir(check, spec.workdir);
  spec_set_hostname(check, spec.hostname);
  spec_set_user(check, spec.user);
  spec_set_cpus(check, spec.limits.cpus);
  spec_set_memory(check, spec.limits.memory);
  spec_set_pids(check, spec.limits.pids);
  spec_set_disk(check, spec.limits.disk);
  validate_network(spec.network);
  for (const auto& [key, value] : spec.labels) spec_set_label(check, key, value);
  if (spec.lifetime != Lifetime::kOwned && spec.lifetime != Lifetime::kDetached) {
    throw_invalid("lifetime", "expected \"owned\" or \"detached\"");
  }
  spec_set_max_lifetime(check, spec.max_lifetime_s);
  spec_set_idle_timeout(check, spec.idle_timeout_s);
  if (spec.on_expiry != OnExpiry::kDestroy && spec.on_expiry != OnExpiry::kKeepLogs && spec.on_expiry != OnExpiry::kKeep)
    throw_invalid("on_expiry", "expected \"destroy\", \"keep_logs\" or \"keep\"");
  spec_set_keep(check, spec.keep_s);
  spec_priority(spec);  // a bad value fails every backend's create alike, before anything is made
  for (const auto& g : spec.accept_weaker) spec_accept_weaker(check, g);
  for (const auto& m : spec.mounts) spec_add_mount(check, m.source, m.target, m.readonly);
  validate_policy(spec.policy);
  spec_set_toolkit(check, spec.toolkit);

  if (spec.layers.empty() && spec.environment.empty()) {
    throw_invalid("layers", "at least one layer (or an environment) is required");
  }
  for (size_t i = 0; i < spec.layers.size(); ++i) {
    const std::string& path = spec.layers[i];
    if (path[0] != '/') continue;  // a store reference: resolved (and reported) by the runtime
    struct stat st;
    int err = 0;
    if (::stat(path.c_str(), &st) != 0) {
      err = errno;
    } else if (!S_ISDIR(st.st_mode)) {
      err = ENOTDIR;
    }
    if (err != 0) {
      throw Error(Code::kInvalidArgument, "invalid spec field 'layers[" + std::to_string(i) + "]': " +
                                              escaped(path, kMaxPath) + ": " + std::strerror(err),
                  err);
    }
  }
  check_mount_sources(spec);
  if (!spec.toolkit.empty() && spec.toolkit[0] == '/') {
    struct stat st;
    const int err = ::stat(spec.toolkit.c_str(), &st) != 0 ? errno : !S_ISDIR(st.st_mode) ? ENOTDIR : 0;
    if (err != 0)
      throw Error(Code::kInvalidArgument,
                  "invalid spec field 'toolkit': " + escaped(spec.toolkit, kMaxPath) + ": " + std::strerror(err), err);
  }
}

}  // namespace sandlet
