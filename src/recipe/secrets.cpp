// Parsing `RUN --mount=type=secret,...` and loading `--secret` values (secrets.hpp).
#include "recipe/secrets.hpp"

#include <cctype>
#include <cstdlib>
#include <set>

#include "common/error.hpp"
#include "sys/fs_util.hpp"

namespace sandlet::build {
namespace {

[[noreturn]] void bad(const std::string& where, const std::string& why) {
  throw Error(Code::kInvalidArgument, where + ": " + why);
}

bool valid_id(std::string_view id) {
  if (id.empty() || id.size() > 255 || id == "." || id == "..") return false;
  for (char c : id)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-')) return false;
  return true;
}

// Absolute, no empty / "." / ".." component, no trailing '/', not "/" itself.
bool normalized(std::string_view p) {
  if (p.size() < 2 || p.front() != '/' || p.back() == '/' || p.size() > 4095) return false;
  for (size_t start = 1; start <= p.size();) {
    size_t end = p.find('/', start);
    if (end == std::string_view::npos) end = p.size();
    std::string_view part = p.substr(start, end - start);
    if (part.empty() || part == "." || part == "..") return false;
    for (char c : part)
      if (c == '\0' || static_cast<unsigned char>(c) < 0x20) return false;
    start = end + 1;
  }
  return true;
}

bool within(std::string_view inner, std::string_view outer) {
  if (outer == "/") return true;
  return inner.substr(0, outer.size()) == outer && (inner.size() == outer.size() || inner[outer.size()] == '/');
}

uint32_t number(std::string_view v, int base, uint32_t max, const std::string& where, const std::string& key) {
  if (v.empty() || v.size() > 10) bad(where, key + "=" + std::string(v) + " is not a valid number");
  uint64_t n = 0;
  for (char c : v) {
    int d = c >= '0' && c <= '9' ? c - '0' : 99;
    if (d >= base) bad(where, key + "=" + std::string(v) + (base == 8 ? " is not an octal mode" : " is not a number"));
    n = n * static_cast<uint64_t>(base) + static_cast<uint64_t>(d);
  }
  if (n > max) bad(where, key + "=" + std::string(v) + " is out of range (at most " + std::to_string(max) + ")");
  return static_cast<uint32_t>(n);
}

bool boolean(std::string_view v, const std::string& where, const std::string& key) {
  if (v.empty() || v == "true" || v == "1") return true;
  if (v == "false" || v == "0") return false;
  bad(where, key + "=" + std::string(v) + " is not true or false");
}

// "k=v,k=v" into pairs (a bare "k" has an empty value and no '=').
std::vector<std::pair<std::string, std::string>> split_options(std::string_view text) {
  std::vector<std::pair<std::string, std::string>> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(',', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view item = text.substr(start, end - start);
    size_t eq = item.find('=');
    out.emplace_back(std::string(item.substr(0, eq)), eq == std::string_view::npos ? "" : std::string(item.substr(eq + 1)));
    start = end + 1;
  }
  return out;
}

}  // namespace

std::string secret_dir(const std::string& target) {
  size_t slash = target.rfind('/');
  return slash == 0 ? "/" : target.substr(0, slash);
}

SecretMount parse_secret_mount(std::string_view value, const std::string& where) {
  SecretMount m;
  std::string type;
  bool has_target = false;
  std::set<std::string> seen;
  for (auto& [key, v] : split_options(value)) {
    if (key.empty()) bad(where, "an empty option (expected type=secret,id=NAME[,target=PATH]...)");
    if (!seen.insert(key == "dst" || key == "destination" ? "target" : key).second)
      bad(where, key + " is given twice");
    if (key == "type") {
      type = v;
    } else if (key == "id") {
      if (!valid_id(v)) bad(where, "id=" + v + " is not a valid secret id (1 to 255 of A-Z a-z 0-9 . _ -)");
      m.id = v;
    } else if (key == "target" || key == "dst" || key == "destination") {
      if (!normalized(v)) bad(where, key + "=" + v + " is not an absolute, normalized path of a file");
      for (std::string_view kernel : {"/proc", "/dev", "/sys"})
        if (within(v, kernel)) bad(where, key + "=" + v + " is inside " + std::string(kernel) + " (the sandbox's own)");
      m.target = v;
      has_target = true;
    } else if (key == "required") {
      m.required = boolean(v, where, key);
    } else if (key == "mode") {
      m.mode = number(v, 8, 07777, where, key);
    } else if (key == "uid") {
      m.uid = number(v, 10, 65535, where, key);
    } else if (key == "gid") {
      m.gid = number(v, 10, 65535, where, key);
    } else {
      bad(where, "unknown option '" + key + "' (a secret mount takes type, id, target, required, mode, uid, gid)");
    }
  }
  if (type.empty()) bad(where, "needs type=secret");
  if (type != "secret") {
    std::string why = type == "cache" || type == "tmpfs" ? "a step's files are its layer; COPY what a step needs"
                      : type == "bind"                   ? "a step reads its context through COPY"
                      : type == "ssh"                    ? "build steps have no network"
                                                         : "unknown mount type";
    bad(where, "type=" + type + " is not supported (" + why + "); only type=secret is");
  }
  if (m.id.empty()) {
    if (!has_target) bad(where, "needs id=NAME (or a target to take it from)");
    std::string base = m.target.substr(m.target.rfind('/') + 1);
    if (!valid_id(base)) bad(where, "needs id=NAME (the target's name " + base + " is not a valid id)");
    m.id = base;
  }
  if (!has_target) m.target = "/run/secrets/" + m.id;
  return m;
}

void check_secret_mounts(const std::vector<SecretMount>& mounts, const std::string& where) {
  if (mounts.size() > kMaxSecrets) bad(where, "at most " + std::to_string(kMaxSecrets) + " secret mounts per RUN");
  std::set<std::string> targets, dirs;
  for (const auto& m : mounts) {
    if (!targets.insert(m.target).second) bad(where, "two secrets mount at " + m.target);
    dirs.insert(secret_dir(m.target));
  }
  for (const auto& d : dirs) {
    if (d == "/") bad(where, "a secret's target needs a directory below / (its directory is replaced during the step)");
    for (const auto& other : dirs)
      if (other != d && within(other, d))
        bad(where, "secret targets in " + d + " and " + other + " nest (each directory holding secrets is one mount)");
    for (const auto& t : targets)
      if (t == d) bad(where, "secret target " + t + " is also the directory of another secret");
  }
}

std::map<std::string, std::string> load_secrets(const std::vector<std::string>& sources) {
  std::map<std::string, std::string> out;
  if (sources.size() > kMaxSecrets) bad("secrets", "at most " + std::to_string(kMaxSecrets) + " secrets");
  for (size_t i = 0; i < sources.size(); ++i) {
    const std::string field = "invalid build field 'secrets[" + std::to_string(i) + "]'";
    std::string id, src, env;
    for (auto& [key, v] : split_options(sources[i])) {
      if (key == "id") id = v;
      else if (key == "src" || key == "source") src = v;
      else if (key == "env") env = v;
      else if (key == "type" && (v == "file" || v == "env")) continue;
      else bad(field, "unknown option '" + key + "' (expected id=NAME,src=FILE or id=NAME,env=VAR)");
    }
    if (!valid_id(id)) bad(field, "needs id=NAME (1 to 255 of A-Z a-z 0-9 . _ -)");
    if (src.empty() == env.empty()) bad(field, "secret " + id + " needs exactly one of src=FILE and env=VAR");
    if (out.count(id)) bad(field, "secret " + id + " is given twice");
    std::string value;
    if (!src.empty()) {
      try {
        value = sys::read_file(src, kMaxSecretBytes);
      } catch (const Error& e) {
        // The path and why, never any of the file's bytes.
        throw Error(Code::kInvalidArgument, field + ": secret " + id + ": " + e.what(), e.err_no());
      }
    } else {
      const char* v = std::getenv(env.c_str());
      if (v == nullptr) bad(field, "secret " + id + ": environment variable " + env + " is not set");
      value = v;
      if (value.size() > kMaxSecretBytes) bad(field, "secret " + id + " is larger than 512 KiB");
    }
    out.emplace(id, std::move(value));
  }
  return out;
}

}  // namespace sandlet::build
