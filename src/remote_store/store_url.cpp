#include "remote_store/store_url.hpp"

#include <cstdlib>
#include <string_view>

#include "common/error.hpp"

namespace sandlet::store {

namespace {

[[noreturn]] void bad(const std::string& url, const std::string& part, const std::string& why) {
  throw Error(Code::kInvalidArgument, "invalid store URL '" + url + "': " + part + ": " + why);
}

std::string env_or_empty(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

// "host[:port]" (IPv6 literals in brackets); fills host and port.
void parse_authority(const std::string& url, std::string_view auth, uint16_t default_port, StoreConfig& c) {
  if (auth.empty()) bad(url, "host", "missing");
  if (auth.find('@') != std::string_view::npos)
    bad(url, "host", "credentials do not belong in the URL (use AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY)");
  std::string_view host = auth, port;
  if (auth.front() == '[') {
    const size_t close = auth.find(']');
    if (close == std::string_view::npos) bad(url, "host", "unterminated IPv6 literal");
    host = auth.substr(1, close - 1);
    std::string_view rest = auth.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':') bad(url, "host", "junk after the IPv6 literal");
      port = rest.substr(1);
    }
  } else if (const size_t colon = auth.rfind(':'); colon != std::string_view::npos) {
    host = auth.substr(0, colon);
    port = auth.substr(colon + 1);
  }
  if (host.empty() || host.size() > 253) bad(url, "host", "empty or too long");
  for (char ch : host) {
    const bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
                    ch == '-' || ch == '.' || ch == ':';
    if (!ok) bad(url, "host", "character '" + std::string(1, ch) + "' is not allowed");
  }
  c.host = std::string(host);
  c.port = default_port;
  if (auth.back() == ':' && port.empty()) bad(url, "port", "empty");
  if (!port.empty()) {
    unsigned long v = 0;
    for (char ch : port) {
      if (ch < '0' || ch > '9' || v > 65535) bad(url, "port", "not a number from 1 to 65535");
      v = v * 10 + static_cast<unsigned long>(ch - '0');
    }
    if (v == 0 || v > 65535) bad(url, "port", "not a number from 1 to 65535");
    c.port = static_cast<uint16_t>(v);
  }
}

// "a/b/" -> "a/b"; rejects empty components, ".", ".." and characters outside printable ASCII.
std::string clean_prefix(const std::string& url, std::string_view p) {
  while (!p.empty() && p.back() == '/') p.remove_suffix(1);
  while (!p.empty() && p.front() == '/') p.remove_prefix(1);
  if (p.empty()) return {};
  try {
    validate_key(std::string(p));
  } catch (const Error& e) {
    bad(url, "path prefix", e.what());
  }
  return std::string(p);
}

void parse_http(const std::string& url, std::string_view rest, bool tls, StoreConfig& c) {
  c.kind = StoreConfig::Kind::kHttp;
  c.tls = tls;
  if (rest.find_first_of("?#") != std::string_view::npos) bad(url, "query", "an HTTP store takes none");
  const size_t slash = rest.find('/');
  parse_authority(url, rest.substr(0, slash), tls ? 443 : 80, c);
  if (slash != std::string_view::npos) c.prefix = clean_prefix(url, rest.substr(slash));
}

void parse_s3(const std::string& url, std::string_view rest, StoreConfig& c) {
  c.kind = StoreConfig::Kind::kS3;
  std::string_view query;
  if (const size_t q = rest.find('?'); q != std::string_view::npos) {
    query = rest.substr(q + 1);
    rest = rest.substr(0, q);
  }
  if (rest.find('#') != std::string_view::npos || query.find('#') != std::string_view::npos)
    bad(url, "fragment", "not allowed");
  const size_t slash = rest.find('/');
  c.bucket = std::string(rest.substr(0, slash));
  if (c.bucket.size() < 3 || c.bucket.size() > 63) bad(url, "bucket", "must be 3 to 63 characters");
  for (char ch : c.bucket)
    if (!((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '-' || ch == '.'))
      bad(url, "bucket", "only lowercase letters, digits, '-' and '.' are allowed");
  if (slash != std::string_view::npos) c.prefix = clean_prefix(url, rest.substr(slash));
  std::string endpoint, style;
  while (!query.empty()) {
    const size_t amp = query.find('&');
    std::string_view item = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    const size_t eq = item.find('=');
    if (eq == std::string_view::npos) bad(url, "query '" + std::string(item) + "'", "expected name=value");
    const std::string name(item.substr(0, eq)), value(item.substr(eq + 1));
    if (name == "endpoint") endpoint = value;
    else if (name == "region") c.region = value;
    else if (name == "style") style = value;
    else bad(url, "query parameter '" + name + "'", "unknown (endpoint, region, style)");
  }
  if (c.region.empty()) bad(url, "region", "empty");
  for (char ch : c.region)
    if (!((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '-')) bad(url, "region", "malformed");
  if (endpoint.empty()) {
    // AWS itself: virtual-hosted buckets by default.
    c.tls = true;
    c.host = "s3." + c.region + ".amazonaws.com";
    c.port = 443;
    c.virtual_host_style = true;
  } else {
    std::string_view e = endpoint;
    if (starts_with(e, "http://")) {
      e.remove_prefix(7);
    } else if (starts_with(e, "https://")) {
      e.remove_prefix(8);
      c.tls = true;
    } else {
      bad(url, "endpoint", "must start with http:// or https://");
    }
    while (!e.empty() && e.back() == '/') e.remove_suffix(1);
    if (e.find('/') != std::string_view::npos) bad(url, "endpoint", "must not have a path");
    parse_authority(url, e, c.tls ? 443 : 80, c);
  }
  if (style == "virtual") c.virtual_host_style = true;
  else if (style == "path") c.virtual_host_style = false;
  else if (!style.empty()) bad(url, "style", "must be path or virtual");
  c.access_key = env_or_empty("AWS_ACCESS_KEY_ID");
  c.secret_key = env_or_empty("AWS_SECRET_ACCESS_KEY");
  c.session_token = env_or_empty("AWS_SESSION_TOKEN");
}

}  // namespace

void validate_key(const std::string& key) {
  auto reject = [&](const std::string& why) {
    throw Error(Code::kInvalidArgument, "invalid store key '" + key + "': " + why);
  };
  if (key.empty()) reject("empty");
  if (key.size() > 512) reject("longer than 512 bytes");
  for (char ch : key)
    if (ch <= 0x20 || ch >= 0x7f) reject("only printable ASCII without spaces is allowed");
  if (key.front() == '/') reject("must be relative");
  size_t start = 0;
  while (start <= key.size()) {
    size_t end = key.find('/', start);
    if (end == std::string::npos) end = key.size();
    const std::string_view part(key.data() + start, end - start);
    if (part.empty()) reject("empty path component");
    if (part == "." || part == "..") reject("'.' and '..' are not allowed");
    start = end + 1;
  }
}

StoreConfig parse_store_url(const std::string& url) {
  StoreConfig c;
  c.url = url;
  c.ca_file = env_or_empty("SANDLET_STORE_CA");
  std::string_view u = url;
  if (u.empty()) bad(url, "URL", "empty");
  if (starts_with(u, "http://")) {
    parse_http(url, u.substr(7), false, c);
  } else if (starts_with(u, "https://")) {
    parse_http(url, u.substr(8), true, c);
  } else if (starts_with(u, "s3://")) {
    parse_s3(url, u.substr(5), c);
  } else {
    std::string_view path = u;
    if (starts_with(u, "file://")) path = u.substr(7);
    else if (starts_with(u, "dir://")) path = u.substr(6);
    else if (u.find("://") != std::string_view::npos) bad(url, "scheme", "expected file, dir, http, https or s3");
    if (path.empty() || path.front() != '/') bad(url, "path", "a directory store needs an absolute path");
    for (char ch : path)
      if (static_cast<unsigned char>(ch) < 0x20 || ch == 0x7f) bad(url, "path", "control characters");
    c.kind = StoreConfig::Kind::kDir;
    c.dir = std::string(path);
    while (c.dir.size() > 1 && c.dir.back() == '/') c.dir.pop_back();
  }
  return c;
}

std::string describe(const StoreConfig& c) {
  switch (c.kind) {
    case StoreConfig::Kind::kDir:
      return "directory store " + c.dir;
    case StoreConfig::Kind::kHttp:
      return "HTTP store " + c.url;
    case StoreConfig::Kind::kS3:
      return "S3 store s3://" + c.bucket + (c.prefix.empty() ? "" : "/" + c.prefix) + " at " +
             (c.tls ? "https://" : "http://") + c.host + ":" + std::to_string(c.port);
  }
  return c.url;
}

}  // namespace sandlet::store
