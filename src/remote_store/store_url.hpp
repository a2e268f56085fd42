// Which blob store a URL names (a directory, an HTTP(S) server, an S3 bucket), and the checks on the keys
// callers use inside it. Pure parsing: no I/O.
#pragma once
#include <cstdint>
#include <string>

namespace sandlet::store {

struct StoreConfig {
  enum class Kind { kDir, kHttp, kS3 };
  Kind kind = Kind::kDir;
  std::string url;  // as given (never contains secrets: credentials come from the environment)
  std::string dir;  // kDir: absolute path ("/p", "file:///p" or "dir:///p")
  bool tls = false;  // https (also for an S3 endpoint given as https://)
  std::string host;  // http(s) server or S3 endpoint
  uint16_t port = 0;
  std::string prefix;  // "" or "a/b" (no leading or trailing '/'); S3: the key prefix inside the bucket
  std::string bucket;
  std::string region = "us-east-1";
  bool virtual_host_style = false;  // S3: bucket.host instead of host/bucket
  std::string access_key, secret_key, session_token;  // AWS_ACCESS_KEY_ID / _SECRET_ACCESS_KEY / _SESSION_TOKEN
  std::string ca_file;  // https: CA bundle (SANDLET_STORE_CA); "" = the system default
  double timeout_s = 30;  // per request
  int retries = 4;  // retries of a failed request (exponential backoff with jitter, from 50 ms, cap 2 s)
};

// Throws Error{kInvalidArgument} naming the part of the URL that is wrong. Credentials and the CA bundle
// are read from the environment here (a caller may overwrite them afterwards).
StoreConfig parse_store_url(const std::string& url);

// The store for messages: its URL without credentials (there are none in it) and its kind.
std::string describe(const StoreConfig& config);

// Keys are relative paths such as "blobs/<sha256>": printable ASCII, at most 512 bytes, no leading '/',
// no "." or ".." component, no empty component. Throws Error{kInvalidArgument} naming the key.
void validate_key(const std::string& key);

}  // namespace sandlet::store
