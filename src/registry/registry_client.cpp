#include "registry/registry_client.hpp"

#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <chrono>
#include <cstring>
#include <random>
#include <thread>

#include "common/error.hpp"
#include "image/sha256.hpp"
#include "sys/fd.hpp"

namespace json = boost::json;

namespace sandlet::registry {

struct RegistryClient::Endpoint {
  Url base;
  std::string name;  // "host:port" as configured (for messages and the insecure list)
  bool mirror = false;
  std::optional<Credentials> credentials;
  bool credentials_looked_up = false;
  std::map<std::string, std::string> authorization;  // repository -> Authorization header value
  bool down = false;  // a mirror that could not be reached: skipped for the rest of this client's life
};

namespace {

constexpr const char* kAcceptManifests =
    "application/vnd.oci.image.index.v1+json, application/vnd.oci.image.manifest.v1+json, "
    "application/vnd.docker.distribution.manifest.list.v2+json, "
    "application/vnd.docker.distribution.manifest.v2+json";
constexpr int kMaxRedirects = 5;

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string base64(const std::string& in) {
  std::string out(4 * ((in.size() + 2) / 3) + 1, '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(in.data()), static_cast<int>(in.size()));
  out.resize(static_cast<size_t>(n));
  return out;
}

std::string host_header(const Url& u) {
  const bool v6 = u.host.find(':') != std::string::npos;
  std::string h = v6 ? "[" + u.host + "]" : u.host;
  if (u.port != (u.tls ? 443 : 80)) h += ":" + std::to_string(u.port);
  return h;
}

void backoff(int attempt) {
  static thread_local std::mt19937 rng{std::random_device{}()};
  const double base = std::min(5.0, 0.25 * static_cast<double>(1u << std::min(attempt, 5)));
  std::uniform_real_distribution<double> jitter(0.5, 1.0);
  std::this_thread::sleep_for(std::chrono::duration<double>(base * jitter(rng)));
}

bool retryable_status(int s) { return s >= 500 || s == 408 || s == 429; }

// `Bearer realm="...",service="...",scope="..."` -> scheme and parameters (quoted strings unescaped).
std::pair<std::string, std::map<std::string, std::string>> parse_challenge(const std::string& h) {
  std::map<std::string, std::string> params;
  size_t i = h.find(' ');
  const std::string scheme = lower(h.substr(0, i));
  while (i != std::string::npos && i < h.size()) {
    while (i < h.size() && (h[i] == ' ' || h[i] == ',')) ++i;
    const size_t eq = h.find('=', i);
    if (eq == std::string::npos) break;
    std::string key = lower(h.substr(i, eq - i)), value;
    i = eq + 1;
    if (i < h.size() && h[i] == '"') {
      for (++i; i < h.size() && h[i] != '"'; ++i) {
        if (h[i] == '\\' && i + 1 < h.size()) ++i;
        value += h[i];
      }
      ++i;
    } else {
      const size_t end = h.find(',', i);
      value = h.substr(i, end == std::string::npos ? std::string::npos : end - i);
      i = end;
    }
    params[key] = value;
  }
  return {scheme, params};
}

Url endpoint_url(const RegistryConfig& config, const std::string& spec) {
  if (spec.find("://") != std::string::npos) {
    auto u = parse_url(spec);
    if (!u) throw Error(Code::kInvalidArgument, "invalid registry mirror URL '" + spec + "'");
    u->target = u->target == "/" ? "" : u->target;
    if (!u->target.empty() && u->target.back() == '/') u->target.pop_back();
    return *u;
  }
  Url u;
  std::string host = spec == "docker.io" ? "registry-1.docker.io" : spec;
  u.tls = !is_insecure(config, spec);
  u.port = u.tls ? 443 : 80;
  // host, host:port, [v6] or [v6]:port; a port is 1..65535.
  const size_t close = host.rfind(']');
  const size_t colon = host.rfind(':');
  if (colon != std::string::npos && (close == std::string::npos || colon > close)) {
    const std::string port = host.substr(colon + 1);
    const bool digits = !port.empty() && port.size() <= 5 && port.find_first_not_of("0123456789") == std::string::npos;
    if (!digits || std::stoi(port) < 1 || std::stoi(port) > 65535)
      throw Error(Code::kInvalidArgument, "registry '" + spec + "': the port must be 1..65535");
    u.port = static_cast<uint16_t>(std::stoi(port));
    host.resize(colon);
  }
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  if (host.empty()) throw Error(Code::kInvalidArgument, "registry '" + spec + "': no host");
  u.host = host;
  u.target = "";
  return u;
}

}  // namespace

std::optional<Url> parse_url(const std::string& text) {
  Url u;
  std::string rest;
  if (text.rfind("https://", 0) == 0) {
    rest = text.substr(8);
  } else if (text.rfind("http://", 0) == 0) {
    u.tls = false;
    u.port = 80;
    rest = text.substr(7);
  } else {
    return std::nullopt;
  }
  const size_t slash = rest.find_first_of("/?");
  std::string authority = rest.substr(0, slash);
  u.target = slash == std::string::npos ? "/" : rest.substr(slash);
  if (u.target[0] == '?') u.target = "/" + u.target;
  if (authority.empty() || authority.find('@') != std::string::npos) return std::nullopt;
  if (authority[0] == '[') {
    const size_t close = authority.find(']');
    if (close == std::string::npos) return std::nullopt;
    u.host = authority.substr(1, close - 1);
    authority = authority.substr(close + 1);
    if (!authority.empty() && authority[0] != ':') return std::nullopt;
  } else {
    const size_t colon = authority.find(':');
    u.host = authority.substr(0, colon);
    authority = colon == std::string::npos ? "" : authority.substr(colon);
  }
  if (!authority.empty()) {
    const std::string port = authority.substr(1);
    if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
    const int p = std::stoi(port);
    if (p <= 0 || p > 65535) return std::nullopt;
    u.port = static_cast<uint16_t>(p);
  }
  for (char c : u.target)
    if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7f) return std::nullopt;
  if (u.host.empty()) return std::nullopt;
  return u;
}

std::optional<std::string> RegistryClient::Response::header(const std::string& name) const {
  for (const auto& [n, v] : headers)
    if (strcasecmp(n.c_str(), name.c_str()) == 0) return v;
  return std::nullopt;
}

RegistryClient::RegistryClient(RegistryConfig config, std::string registry)
    : config_(std::move(config)), registry_(std::move(registry)) {
  std::vector<std::string> specs;
  if (auto it = config_.mirrors.find(registry_); it != config_.mirrors.end()) specs = it->second;
  specs.push_back(registry_);
  for (size_t i = 0; i < specs.size(); ++i) {
    auto ep = std::make_unique<Endpoint>();
    ep->base = endpoint_url(config_, specs[i]);
    ep->name = specs[i];
    ep->mirror = i + 1 < specs.size();
    ca_hosts_.insert(ep->base.host + ":" + std::to_string(ep->base.port));
    endpoints_.push_back(std::move(ep));
  }
}

RegistryClient::~RegistryClient() = default;

template <class Fn>
auto RegistryClient::on_endpoints(const std::string& what, Fn fn) -> decltype(fn(std::declval<Endpoint&>())) {
  std::string mirror_errors;
  for (auto& ep : endpoints_) {
    if (ep->down) continue;
    try {
      auto r = fn(*ep);
      last_endpoint_ = ep->name;
      return r;
    } catch (const Error& e) {
      if (!ep->mirror) {
        if (mirror_errors.empty()) throw;
        throw Error(e.code(), std::string(e.what()) + " (mirrors tried first: " + mirror_errors + ")", e.err_no());
      }
      if (e.code() == Code::kUnavailable) ep->down = true;
      mirror_errors += (mirror_errors.empty() ? "" : "; ") + ep->name + ": " + e.what();
    }
  }
  throw Error(Code::kInternal, what + ": no endpoint");  // the registry itself is always last
}

store::Connection& RegistryClient::connection_for(const Url& url) {
  const std::string key = std::string(url.tls ? "tls:" : "tcp:") + url.host + ":" + std::to_string(url.port);
  auto& c = connections_[key];
  if (!c) c = std::make_unique<store::Connection>();
  if (!c->is_open()) {
    store::Endpoint e;
    e.host = url.host;
    e.port = url.port;
    e.tls = url.tls;
    // The configured bundle is for the registry and its mirrors; a host a redirect sends blobs to (a storage
    // service) is checked against the system's store.
    if (ca_hosts_.count(url.host + ":" + std::to_string(url.port))) e.ca_file = config_.ca_file;
    e.timeout_s = config_.timeout_s;
    c->open(e);
  }
  return *c;
}

RegistryClient::Response RegistryClient::exchange(const Url& url, const store::HeaderList& headers, uint64_t cap,
                                                  const Sink& sink) {
  for (int fresh = 0;; ++fresh) {
    const std::string key = std::string(url.tls ? "tls:" : "tcp:") + url.host + ":" + std::to_string(url.port);
    const bool reused = connections_.count(key) && connections_[key]->is_open();
    store::Connection& conn = connection_for(url);
    bool got_bytes = false;
    try {
      store::HttpRequest req;
      req.method = "GET";
      req.target = url.target;
      req.host = host_header(url);
      req.headers = headers;
      req.headers.emplace_back("User-Agent", "sandlet");
      const std::string head = store::serialize_request(req);
      conn.write_all(head.data(), head.size());
      store::ResponseParser parser(cap);
      uint64_t sunk = 0;
      if (sink)
        parser.set_body_sink([&](const char* d, size_t n) {
          bytes_received_ += n;
          sunk += n;
          sink(parser.status(), d, n);
        });
      std::string buf(64 * 1024, '\0');
      bool leftover = false;
      while (!parser.done()) {
        const size_t n = conn.read_some(buf.data(), buf.size());
        if (n == 0) {
          parser.finish_at_eof();
          break;
        }
        got_bytes = true;
        leftover = parser.feed(buf.data(), n) < n;
      }
      if (!parser.keep_alive() || leftover) conn.close();
      bytes_received_ += parser.body_bytes_seen() - sunk;  // manifests, configs, tokens, error bodies
      Response r;
      r.status = parser.status();
      r.status_line = parser.status_line();
      r.headers = parser.headers();
      r.body = parser.take_body();
      return r;
    } catch (const Error& e) {
      conn.close();
      // A kept-alive connection the server closed meanwhile fails before any byte: once more, fresh.
      if (!reused || got_bytes || fresh > 0 || e.code() != Code::kUnavailable) throw;
    }
  }
}

void RegistryClient::authorize(Endpoint& ep, const std::string& repository, const std::string& challenge,
                               const std::string& what) {
  if (!ep.credentials_looked_up) {
    ep.credentials = find_credentials(config_, ep.mirror ? ep.name : registry_);
    ep.credentials_looked_up = true;
  }
  const auto [scheme, params] = parse_challenge(challenge);
  const std::string creds_note = ep.credentials ? "" : " (no credentials for " + ep.name + " in the auth file)";
  if (scheme == "basic") {
    if (!ep.credentials)
      throw Error(Code::kPermissionDenied, what + ": " + ep.name + " asks for credentials" + creds_note);
    ep.authorization[repository] = "Basic " + base64(ep.credentials->username + ":" + ep.credentials->password);
    return;
  }
  if (scheme != "bearer")
    throw Error(Code::kPermissionDenied, what + ": " + ep.name + " asks for an unsupported auth scheme '" + scheme + "'");
  const auto realm_it = params.find("realm");
  auto realm = realm_it == params.end() ? std::nullopt : parse_url(realm_it->second);
  if (!realm) throw Error(Code::kPermissionDenied, what + ": " + ep.name + " names no usable token realm");
  if (ep.base.tls && !realm->tls)
    throw Error(Code::kPermissionDenied, what + ": " + ep.name + " (https) sends credentials to a plain-http token realm; refused");
  ca_hosts_.insert(realm->host + ":" + std::to_string(realm->port));
  std::string scope = params.count("scope") ? params.at("scope") : "repository:" + repository + ":pull";
  std::string query;
  if (params.count("service")) query += "service=" + store::percent_encode_component(params.at("service"));
  query += std::string(query.empty() ? "" : "&") + "scope=" + store::percent_encode_component(scope);
  realm->target += (realm->target.find('?') == std::string::npos ? "?" : "&") + query;
  store::HeaderList headers;
  if (ep.credentials)
    headers.emplace_back("Authorization",
                         "Basic " + base64(ep.credentials->username + ":" + ep.credentials->password));
  Response r;
  for (int attempt = 0;; ++attempt) {
    try {
      r = exchange(*realm, headers, 1 << 20, nullptr);
      if (!retryable_status(r.status) || attempt >= config_.retries) break;
    } catch (const Error& e) {
      if (e.code() != Code::kUnavailable || attempt >= config_.retries)
        throw Error(e.code(), what + ": token server " + realm->host + ": " + e.what(), e.err_no());
    }
    backoff(attempt);
  }
  if (r.status == 401 || r.status == 403)
    throw Error(Code::kPermissionDenied, what + ": the token server of " + ep.name + " refused " +
                                             (ep.credentials ? "the credentials" : "an anonymous token") + " (" +
                                             r.status_line + ")" + creds_note);
  if (r.status < 200 || r.status >= 300)
    throw Error(Code::kUnavailable, what + ": token server of " + ep.name + ": " + r.status_line);
  std::string token;
  try {
    const json::value v = json::parse(r.body);
    if (const auto* t = v.as_object().if_contains("token"); t && t->is_string()) token = std::string(t->as_string());
    if (const auto* t = v.as_object().if_contains("access_token"); token.empty() && t && t->is_string())
      token = std::string(t->as_string());
  } catch (const std::exception&) {
  }
  if (token.empty() || token.find_first_of("\r\n") != std::string::npos)
    throw Error(Code::kPermissionDenied, what + ": the token server of " + ep.name + " sent no token");
  ep.authorization[repository] = "Bearer " + token;
}

RegistryClient::Response RegistryClient::get(Endpoint& ep, const std::string& repository, const std::string& path,
                                             const store::HeaderList& extra, uint64_t cap, const Sink& sink,
                                             const std::string& what) {
  Url url = ep.base;
  url.target = ep.base.target + path;
  bool challenged = false;
  int redirects = 0, attempt = 0;
  uint64_t sunk = 0;
  // A mirror that fails is left for the next endpoint at once; only the registry itself is retried.
  const int retries = ep.mirror ? 0 : config_.retries;
  const Sink counting = sink ? Sink([&](int status, const char* d, size_t n) {
    sunk += n;
    sink(status, d, n);
  })
                             : Sink();
  for (;;) {
    store::HeaderList headers = extra;
    const bool same_host = url.host == ep.base.host && url.port == ep.base.port;
    if (same_host)
      if (auto it = ep.authorization.find(repository); it != ep.authorization.end())
        headers.emplace_back("Authorization", it->second);
    Response r;
    try {
      r = exchange(url, headers, cap, counting);
    } catch (const Error& e) {
      // A host name that does not exist is not retried: that registry is not there.
      if (e.code() == Code::kUnavailable && e.err_no() == ENOENT)
        throw Error(Code::kNotFound, what + ": " + e.what(), ENOENT);
      // After body bytes went to the sink, the caller resumes (it knows where it stopped).
      if (e.code() != Code::kUnavailable || sunk > 0 || attempt >= retries)
        throw Error(e.code(), what + ": " + ep.name + ": " + e.what() +
                                  (e.code() == Code::kUnavailable && sunk == 0
                                       ? " (after " + std::to_string(attempt + 1) + " attempts)"
                                       : ""),
                    e.err_no());
      backoff(attempt++);
      continue;
    }
    if (r.status == 401 && same_host && !challenged) {
      challenged = true;
      authorize(ep, repository, r.header("WWW-Authenticate").value_or("Bearer"), what);
      continue;
    }
    if (r.status == 401 || r.status == 403)
      throw Error(Code::kPermissionDenied, what + ": " + ep.name + " refused access (" + r.status_line + ")");
    if (r.status >= 300 && r.status < 400 && r.header("Location")) {
      if (++redirects > kMaxRedirects) throw Error(Code::kUnavailable, what + ": more than 5 redirects");
      const std::string loc = *r.header("Location");
      if (loc.rfind("/", 0) == 0) {
        url.target = loc;
      } else if (auto next = parse_url(loc)) {
        if (url.tls && !next->tls) throw Error(Code::kPermissionDenied, what + ": refused a redirect from https to http");
        url = *next;
      } else {
        throw Error(Code::kUnavailable, what + ": bad redirect Location '" + loc.substr(0, 200) + "'");
      }
      continue;
    }
    if (retryable_status(r.status)) {
      if (attempt >= retries)
        throw Error(Code::kUnavailable, what + ": " + ep.name + ": " + r.status_line + " (after " +
                                            std::to_string(attempt + 1) + " attempts)");
      backoff(attempt++);
      continue;
    }
    if (r.status == 404) throw Error(Code::kNotFound, what + ": " + ep.name + ": not found");
    if (r.status == 416) throw Error(Code::kOutOfRange, what + ": " + ep.name + ": " + r.status_line);
    if (r.status < 200 || r.status >= 300)
      throw Error(Code::kFailedPrecondition, what + ": " + ep.name + ": " + r.status_line);
    return r;
  }
}

FetchedManifest RegistryClient::manifest(const std::string& repository, const std::string& reference) {
  const std::string what = "manifest " + registry_ + "/" + repository + (reference.rfind("sha256:", 0) == 0 ? "@" : ":") + reference;
  return on_endpoints(what, [&](Endpoint& ep) {
    Response r = get(ep, repository, "/v2/" + repository + "/manifests/" + reference, {{"Accept", kAcceptManifests}},
                     4u << 20, nullptr, what);
    FetchedManifest m;
    m.body = std::move(r.body);
    m.digest = "sha256:" + image::to_hex(image::sha256(m.body));
    m.endpoint = ep.name;
    std::string ct = r.header("Content-Type").value_or("");
    m.media_type = lower(ct.substr(0, ct.find(';')));
    while (!m.media_type.empty() && m.media_type.back() == ' ') m.media_type.pop_back();
    if (m.media_type.empty() || m.media_type == "application/json" || m.media_type == "text/plain") {
      try {
        const json::value v = json::parse(m.body);
        if (const auto* t = v.as_object().if_contains("mediaType"); t && t->is_string())
          m.media_type = std::string(t->as_string());
      } catch (const std::exception&) {
      }
    }
    if (reference.rfind("sha256:", 0) == 0 && reference != m.digest)
      throw Error(Code::kDataLoss, what + ": " + ep.name + " sent a manifest whose digest is " + m.digest);
    if (auto d = r.header("Docker-Content-Digest"); d && d->rfind("sha256:", 0) == 0 && *d != m.digest)
      throw Error(Code::kDataLoss, what + ": the body's digest " + m.digest + " differs from the registry's " + *d);
    return m;
  });
}

std::string RegistryClient::blob(const std::string& repository, const std::string& digest, uint64_t max_bytes) {
  const std::string what = "blob " + digest + " of " + registry_ + "/" + repository;
  return on_endpoints(what, [&](Endpoint& ep) {
    Response r = get(ep, repository, "/v2/" + repository + "/blobs/" + digest, {}, max_bytes, nullptr, what);
    const std::string got = "sha256:" + image::to_hex(image::sha256(r.body));
    if (got != digest) throw Error(Code::kDataLoss, what + ": " + ep.name + " sent bytes whose digest is " + got);
    return std::move(r.body);
  });
}

void RegistryClient::blob_to_file(const std::string& repository, const std::string& digest, uint64_t size,
                                  const std::string& path, const BlobProgress& progress) {
  const std::string what = "blob " + digest + " of " + registry_ + "/" + repository;
  on_endpoints(what, [&](Endpoint& ep) {
    // Each endpoint starts from byte 0: what another one left is not trusted as a prefix.
    sys::UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
    if (!fd) throw_errno("open " + path);
    // What the file already holds is a prefix of the blob: hash it, then ask for the rest.
    image::Sha256 hash;
    uint64_t have = 0;
    {
      std::string buf(1 << 20, '\0');
      for (;;) {
        const ssize_t n = ::read(fd.get(), buf.data(), buf.size());
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) throw_errno("read " + path);
        if (n == 0) break;
        hash.update(buf.data(), static_cast<size_t>(n));
        have += static_cast<uint64_t>(n);
      }
    }
    if (have > size) {
      if (::ftruncate(fd.get(), 0) != 0) throw_errno("truncate " + path);
      ::lseek(fd.get(), 0, SEEK_SET);
      (void)hash.finish();  // resets it
      have = 0;
    }
    while (have < size) {
      const uint64_t before = have;
      bool first = true;
      const Sink sink = [&](int status, const char* d, size_t n) {
        const bool restart = first && status != 206 && have > 0;
        first = false;
        if (restart) {
          // The server ignored the Range and sends the whole blob: start the file over.
          if (::ftruncate(fd.get(), 0) != 0) throw_errno("truncate " + path);
          ::lseek(fd.get(), 0, SEEK_SET);
          (void)hash.finish();  // resets it
          have = 0;
        }
        if (have + n > size)
          throw Error(Code::kDataLoss, what + ": more bytes than the descriptor's " + std::to_string(size));
        for (size_t off = 0; off < n;) {
          const ssize_t w = ::write(fd.get(), d + off, n - off);
          if (w < 0 && errno == EINTR) continue;
          if (w < 0) throw_errno("write " + path);
          off += static_cast<size_t>(w);
        }
        hash.update(d, n);
        have += n;
        if (progress) progress(have, size);
      };
      store::HeaderList headers;
      if (have > 0) headers.emplace_back("Range", "bytes=" + std::to_string(have) + "-");
      try {
        get(ep, repository, "/v2/" + repository + "/blobs/" + digest, headers, size, sink, what);
      } catch (const Error& e) {
        // Cut mid-body: resume from what arrived. A request that brought nothing was retried by get() already.
        if (e.code() != Code::kUnavailable || have == before || cancelled_()) throw;
        continue;
      }
      if (have < size && have == before)
        throw Error(Code::kDataLoss, what + ": " + ep.name + " ended the blob after " + std::to_string(have) + " of " +
                                         std::to_string(size) + " bytes");
    }
    const std::string got = "sha256:" + image::to_hex(hash.finish());
    if (got != digest) {
      ::unlink(path.c_str());
      throw Error(Code::kDataLoss, what + ": " + ep.name + " sent " + std::to_string(size) +
                                       " bytes whose digest is " + got + " (nothing imported)");
    }
    return 0;
  });
}

}  // namespace sandlet::registry
