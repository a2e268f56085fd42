// A client of one registry's Distribution API (v2): manifests and blobs of a repository, through the mirrors
// configured for that registry first. Handles the auth challenge (anonymous or credentialed Bearer tokens from
// the realm a 401 names, or Basic), redirects (blob downloads are often sent to other hosts; credentials are
// never sent there), retries with backoff, and resumable blob downloads (Range from what a file already holds).
// Errors: kUnavailable (unreachable after retries), kPermissionDenied (credentials missing or refused),
// kNotFound (no such repository, tag or blob on any endpoint), kDataLoss (a digest that does not match).
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "registry/registry_config.hpp"
#include "remote_store/connection.hpp"
#include "remote_store/http_message.hpp"

namespace sandlet::registry {

struct Url {
  bool tls = true;
  std::string host;
  uint16_t port = 443;
  std::string target = "/";  // path and query, already encoded
};
// "http(s)://host[:port][/path][?query]"; nullopt when malformed.
std::optional<Url> parse_url(const std::string& text);

struct FetchedManifest {
  std::string media_type;  // from the Content-Type (parameters dropped), or the document's own mediaType
  std::string body;
  std::string digest;      // "sha256:<hex>" of the body
  std::string endpoint;    // the mirror or registry that answered
};

// Bytes received so far for one blob (called from the downloading thread).
using BlobProgress = std::function<void(uint64_t received, uint64_t total)>;

class RegistryClient final {
 public:
  RegistryClient(RegistryConfig config, std::string registry);
  ~RegistryClient();
  RegistryClient(const RegistryClient&) = delete;
  RegistryClient& operator=(const RegistryClient&) = delete;

  // GET /v2/<repository>/manifests/<reference> (a tag or a digest), accepting OCI and Docker schema 2
  // manifests and indexes. A digest reference is checked against the body (kDataLoss).
  FetchedManifest manifest(const std::string& repository, const std::string& reference);

  // Downloads blob `digest` into `path` and checks it: a file already there is taken as a prefix of the blob
  // (the download resumes after it, also after a connection that breaks mid-body). On a digest mismatch the
  // file is removed and kDataLoss thrown. `size` is the descriptor's (a longer body is refused).
  void blob_to_file(const std::string& repository, const std::string& digest, uint64_t size, const std::string& path,
                    const BlobProgress& progress);

  // A small blob (an image config) into memory, checked against its digest.
  std::string blob(const std::string& repository, const std::string& digest, uint64_t max_bytes);

  // What the last successful request went to ("host:port"), for results and messages.
  const std::string& last_endpoint() const { return last_endpoint_; }
  uint64_t bytes_received() const { return bytes_received_; }
  // Checked between the parts of a blob download (a pull whose other layer failed stops the rest).
  void set_cancelled(std::function<bool()> fn) { cancelled_ = std::move(fn); }

 private:
  struct Endpoint;
  struct Response {
    int status = 0;
    std::string status_line;
    store::HeaderList headers;
    std::string body;
    std::optional<std::string> header(const std::string& name) const;
  };
  // A 2xx body as it arrives, with the response's status (a 200 to a Range request starts at byte 0).
  using Sink = std::function<void(int status, const char*, size_t)>;

  // Tries every endpoint in order for a request on `repository`; returns the first 2xx, or throws the most
  // telling error (not found on all beats unreachable).
  template <class Fn>
  auto on_endpoints(const std::string& what, Fn fn) -> decltype(fn(std::declval<Endpoint&>()));
  // One logical GET on `ep`: auth challenge, redirects, retries of retryable failures.
  Response get(Endpoint& ep, const std::string& repository, const std::string& path, const store::HeaderList& headers,
               uint64_t cap, const Sink& sink, const std::string& what);
  Response exchange(const Url& url, const store::HeaderList& headers, uint64_t cap, const Sink& sink);
  void authorize(Endpoint& ep, const std::string& repository, const std::string& challenge, const std::string& what);
  store::Connection& connection_for(const Url& url);

  RegistryConfig config_;
  std::string registry_;
  std::vector<std::unique_ptr<Endpoint>> endpoints_;
  std::map<std::string, std::unique_ptr<store::Connection>> connections_;  // "tls:host:port"
  std::set<std::string> ca_hosts_;  // "host:port" checked against config.ca_file: endpoints, token realms
  std::string last_endpoint_;
  uint64_t bytes_received_ = 0;
  std::function<bool()> cancelled_ = [] { return false; };
};

}  // namespace sandlet::registry
