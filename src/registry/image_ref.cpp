#include "registry/image_ref.hpp"

#include <cctype>

#include "common/error.hpp"

namespace sandlet::registry {
namespace {

constexpr const char* kScheme = "docker://";

bool lower_alnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

// One path component: lowercase alphanumerics separated by '.', '_', "__" or runs of '-'.
bool valid_component(const std::string& c) {
  if (c.empty() || !lower_alnum(c.front()) || !lower_alnum(c.back())) return false;
  for (size_t i = 0; i < c.size(); ++i) {
    const char ch = c[i];
    if (lower_alnum(ch) || ch == '-') continue;
    if (ch == '.' || ch == '_') {
      if (!lower_alnum(c[i - 1])) {
        if (!(ch == '_' && c[i - 1] == '_' && i >= 2 && lower_alnum(c[i - 2]))) return false;
      }
      continue;
    }
    return false;
  }
  return true;
}

// host, host:port or [v6]:port; a port is 1..65535.
bool valid_registry(const std::string& r) {
  if (r.empty() || r.size() > 255) return false;
  for (char c : r)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == ':' || c == '[' || c == ']'))
      return false;
  const size_t close = r.rfind(']'), colon = r.rfind(':');
  if (r[0] == '[' && close == std::string::npos) return false;
  if (r[0] != '[' && r.find(':') != colon) return false;  // one colon, before the port
  if (colon == std::string::npos || (close != std::string::npos && colon < close)) return r[0] != ':';
  const std::string port = r.substr(colon + 1);
  if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos) return false;
  const int p = std::stoi(port);
  return p >= 1 && p <= 65535 && colon > 0;
}

bool valid_tag(const std::string& t) {
  if (t.empty() || t.size() > 128) return false;
  const auto word = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  if (!word(t[0])) return false;
  for (char c : t)
    if (!(word(c) || c == '.' || c == '-')) return false;
  return true;
}

bool valid_digest(const std::string& d) {
  if (d.size() != 7 + 64 || d.compare(0, 7, "sha256:") != 0) return false;
  for (size_t i = 7; i < d.size(); ++i)
    if (!std::isxdigit(static_cast<unsigned char>(d[i])) || std::isupper(static_cast<unsigned char>(d[i])))
      return false;
  return true;
}

[[noreturn]] void bad(const std::string& field, const std::string& text, const std::string& why) {
  throw Error(Code::kInvalidArgument, "invalid " + field + " '" + text + "': " + why);
}

}  // namespace

std::string ImageRef::canonical() const {
  if (!digest.empty()) return registry + "/" + repository + "@" + digest;
  return registry + "/" + repository + ":" + tag;
}

bool has_docker_scheme(const std::string& text) { return text.rfind(kScheme, 0) == 0; }

ImageRef parse_image_ref(const std::string& text, const std::string& field) {
  std::string s = has_docker_scheme(text) ? text.substr(std::string(kScheme).size()) : text;
  if (s.empty()) bad(field, text, "no image name");
  if (s.size() > 1024) bad(field, text.substr(0, 64) + "...", "longer than 1024 characters");
  ImageRef ref;
  if (const size_t at = s.find('@'); at != std::string::npos) {
    ref.digest = s.substr(at + 1);
    s.resize(at);
    if (!valid_digest(ref.digest)) bad(field, text, "the digest must be sha256: and 64 lowercase hex digits");
  }
  // A ':' after the last '/' starts the tag (one before it is a registry's port).
  const size_t slash = s.rfind('/');
  if (const size_t colon = s.rfind(':'); colon != std::string::npos && (slash == std::string::npos || colon > slash)) {
    ref.tag = s.substr(colon + 1);
    s.resize(colon);
    if (!valid_tag(ref.tag)) bad(field, text, "a tag is 1-128 characters [A-Za-z0-9_.-], not starting with '.' or '-'");
  }
  const size_t first = s.find('/');
  const std::string head = s.substr(0, first);
  if (first != std::string::npos &&
      (head.find('.') != std::string::npos || head.find(':') != std::string::npos || head == "localhost")) {
    ref.registry = head;
    ref.repository = s.substr(first + 1);
    if (!valid_registry(ref.registry)) bad(field, text, "'" + ref.registry + "' is not a registry host[:port]");
  } else {
    ref.registry = kDefaultRegistry;
    ref.repository = s;
  }
  if (ref.registry == "index.docker.io") ref.registry = kDefaultRegistry;
  if (ref.registry == kDefaultRegistry && ref.repository.find('/') == std::string::npos)
    ref.repository = "library/" + ref.repository;
  if (ref.repository.empty() || ref.repository.size() > 255) bad(field, text, "no repository name");
  size_t begin = 0;
  while (begin <= ref.repository.size()) {
    size_t end = ref.repository.find('/', begin);
    if (end == std::string::npos) end = ref.repository.size();
    if (!valid_component(ref.repository.substr(begin, end - begin)))
      bad(field, text,
          "repository components are lowercase letters and digits, separated by '.', '_', '__' or '-' (got '" +
              ref.repository + "')");
    begin = end + 1;
  }
  if (ref.tag.empty() && ref.digest.empty()) ref.tag = "latest";
  return ref;
}

bool looks_like_image_ref(const std::string& text) {
  try {
    parse_image_ref(text);
    return true;
  } catch (const Error&) {
    return false;
  }
}

}  // namespace sandlet::registry
