// The HTTP(S) and S3 stores: one keep-alive connection per object, requests retried with backoff while the
// store is unavailable, S3 requests signed with SigV4 (path-style by default: host/bucket/key).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <thread>

#include "common/error.hpp"
#include "image/sha256.hpp"
#include "remote_store/blob_store.hpp"
#include "remote_store/connection.hpp"
#include "remote_store/http_message.hpp"
#include "remote_store/sigv4.hpp"
#include "sys/fd.hpp"

namespace sandlet::store {

namespace {

constexpr char kEmptySha256[] = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

// What a request sends after its head: nothing, a string or a file's bytes.
struct Payload {
  const std::string* data = nullptr;
  std::string file;
  uint64_t size = 0;
  std::string sha256_hex = kEmptySha256;
};

struct Response {
  int status = 0;
  std::string status_line;
  HeaderList headers;
  std::string body;
  std::optional<uint64_t> content_length;
  std::optional<std::string> header(std::string_view name) const {
    for (const auto& [n, v] : headers)
      if (strcasecmp(n.c_str(), std::string(name).c_str()) == 0) return v;
    return std::nullopt;
  }
};

bool retryable_status(int s) { return s >= 500 || s == 408 || s == 429; }

// "<Code>X</Code>" and "<Message>Y</Message>" of an S3 error document, for messages.
std::string s3_error_detail(const std::string& body) {
  auto element = [&](const std::string& tag) -> std::string {
    const size_t a = body.find("<" + tag + ">");
    if (a == std::string::npos) return {};
    const size_t start = a + tag.size() + 2, b = body.find("</" + tag + ">", start);
    return b == std::string::npos ? std::string() : body.substr(start, std::min<size_t>(b - start, 200));
  };
  const std::string code = element("Code"), message = element("Message");
  if (code.empty()) return {};
  return " (" + code + (message.empty() ? "" : ": " + message) + ")";
}

class HttpStore final : public BlobStore {
 public:
  explicit HttpStore(const StoreConfig& c) : c_(c), name_(describe(c)) {
    endpoint_.host = c.kind == StoreConfig::Kind::kS3 && c.virtual_host_style ? c.bucket + "." + c.host : c.host;
    endpoint_.port = c.port;
    endpoint_.tls = c.tls;
    endpoint_.ca_file = c.ca_file;
    endpoint_.timeout_s = c.timeout_s;
    const bool v6 = endpoint_.host.find(':') != std::string::npos;
    host_header_ = v6 ? "[" + endpoint_.host + "]" : endpoint_.host;
    if (c.port != (c.tls ? 443 : 80)) host_header_ += ":" + std::to_string(c.port);
  }
  const StoreConfig& config() const override { return c_; }

  void check() override {
    if (s3()) {
      const Response r = request("HEAD", "(bucket)", bucket_path(), {}, Payload{}, 0, true);
      if (r.status == 404) throw Error(Code::kNotFound, name_ + ": the bucket '" + c_.bucket + "' does not exist");
      expect_success(r, "HEAD", "(bucket)");
      return;
    }
    // An absent key answers 404 on any healthy server; a rejected credential answers 401/403.
    const std::string key = ".sandlet-store-check";
    const Response r = request("HEAD", key, object_path(key), {}, Payload{}, 0, true);
    if (r.status != 404) expect_success(r, "HEAD", key);
  }

  std::optional<uint64_t> head(const std::string& key) override {
    validate_key(key);
    const Response r = request("HEAD", key, object_path(key), {}, Payload{}, 0, true);
    if (r.status == 404) return std::nullopt;
    expect_success(r, "HEAD", key);
    if (!r.content_length)
      throw Error(Code::kUnavailable, name_ + ": HEAD " + key + ": the response has no Content-Length");
    return r.content_length;
  }

  std::string get(const std::string& key, size_t max_bytes) override {
    validate_key(key);
    Response r = request("GET", key, object_path(key), {}, Payload{}, max_bytes, false);
    expect_success(r, "GET", key);
    return std::move(r.body);
  }

  void get_range(const std::string& key, uint64_t offset, size_t len, char* out) override {
    validate_key(key);
    if (len == 0) return;
    const std::string what = "range " + std::to_string(offset) + "+" + std::to_string(len) + " of " + key;
    Response r;
    try {
      r = request("GET", key, object_path(key), {{"Range", range_value(offset, len)}}, Payload{}, len, false);
    } catch (const Error& e) {
      // More bytes than the range: the server answered with the whole object.
      if (e.code() != Code::kResourceExhausted) throw;
      throw Error(Code::kFailedPrecondition, std::string(e.what()) + " (the server ignored the Range header)");
    }
    if (r.status == 416) throw Error(Code::kOutOfRange, name_ + ": " + what + " passes the object's end");
    expect_success(r, "GET", key);
    if (r.status == 206) {
      const auto cr = parse_content_range(r.header("Content-Range").value_or(""));
      if (!cr || cr->first != offset)
        throw Error(Code::kUnavailable, name_ + ": GET " + what + ": bad Content-Range '" +
                                            r.header("Content-Range").value_or("") + "'");
      if (cr->last - cr->first + 1 < len)
        throw Error(Code::kOutOfRange, name_ + ": " + what + " passes the object's end (" +
                                           (cr->total ? std::to_string(*cr->total) : std::string("?")) + " bytes)");
      if (cr->last - cr->first + 1 != len || r.body.size() != len)
        throw Error(Code::kUnavailable, name_ + ": GET " + what + ": the server sent another range");
    } else if (!(r.status == 200 && offset == 0 && r.body.size() == len)) {
      throw Error(Code::kFailedPrecondition, name_ + ": GET " + what + ": the server ignored the Range (" +
                                                 r.status_line + ")");
    }
    std::memcpy(out, r.body.data(), len);
  }

  void put(const std::string& key, const std::string& data) override {
    validate_key(key);
    Payload p;
    p.data = &data;
    p.size = data.size();
    if (s3()) p.sha256_hex = hex_sha256(data);
    expect_success(request("PUT", key, object_path(key), {}, p, 0, false), "PUT", key);
  }

  void put_file(const std::string& key, const std::string& path) override {
    validate_key(key);
    struct stat st{};
    if (::stat(path.c_str(), &st) != 0) throw_errno("put " + key + " to " + name_ + ": stat " + path);
    if (!S_ISREG(st.st_mode)) throw Error(Code::kInvalidArgument, "put " + key + ": " + path + " is not a file");
    Payload p;
    p.file = path;
    p.size = static_cast<uint64_t>(st.st_size);
    // S3 gets the real payload hash (one more read of the file): the store then checks what arrived.
    if (s3()) p.sha256_hex = image::to_hex(image::sha256_file(path));
    expect_success(request("PUT", key, object_path(key), {}, p, 0, false), "PUT", key);
  }

 private:
  bool s3() const { return c_.kind == StoreConfig::Kind::kS3; }

  std::string bucket_path() const { return c_.virtual_host_style ? "/" : "/" + c_.bucket; }

  std::string object_path(const std::string& key) const {
    std::string p = c_.prefix.empty() ? key : c_.prefix + "/" + key;
    if (s3() && !c_.virtual_host_style) p = c_.bucket + "/" + p;
    return percent_encode_path("/" + p);
  }

  // Turns a final non-success status into the documented error.
  void expect_success(const Response& r, const std::string& method, const std::string& key) const {
    if (r.status >= 200 && r.status < 300) return;
    const std::string where = name_ + ": " + method + " " + key + ": ";
    const std::string detail = r.status_line + s3_error_detail(r.body);
    if (r.status == 401 || r.status == 403)
      throw Error(Code::kPermissionDenied, "credentials rejected by " + name_ + ": " + method + " " + key + ": " + detail);
    if (r.status == 404) throw Error(Code::kNotFound, where + "not found (" + detail + ")");
    if (r.status == 416) throw Error(Code::kOutOfRange, where + detail);
    if (retryable_status(r.status)) throw Error(Code::kUnavailable, where + detail);
    if (r.status == 400) throw Error(Code::kInvalidArgument, where + detail);
    if (r.status >= 300 && r.status < 400)
      throw Error(Code::kFailedPrecondition, where + detail + " (redirects are not followed)");
    throw Error(Code::kFailedPrecondition, where + detail);
  }

  // Retries while the store is unavailable; returns the last response (maybe an error status).
  Response request(const std::string& method, const std::string& key, const std::string& path,
                   const HeaderList& headers, const Payload& payload, uint64_t cap, bool head_request) {
    const int attempts = 1 + std::max(0, c_.retries);
    const std::string attempts_note = " (after " + std::to_string(attempts) + " attempts)";
    for (int attempt = 1;; ++attempt) {
      std::optional<Response> r;
      try {
        r = exchange_once_or_fresh(method, path, headers, payload, cap, head_request);
      } catch (const Error& e) {
        if (e.code() != Code::kUnavailable || attempt == attempts)
          throw Error(e.code(),
                      name_ + ": " + method + " " + key + ": " + e.what() +
                          (e.code() == Code::kUnavailable ? attempts_note : std::string()),
                      e.err_no());
      }
      if (r && !retryable_status(r->status)) return std::move(*r);
      if (r && attempt == attempts)
        throw Error(Code::kUnavailable, name_ + ": " + method + " " + key + ": " + r->status_line +
                                            s3_error_detail(r->body) + attempts_note);
      std::this_thread::sleep_for(std::chrono::duration<double>(retry_delay_s(attempt)));
    }
  }

  // A kept-alive connection the server has since closed fails before any response byte: that one is
  // retried at once on a fresh connection, without spending a retry.
  Response exchange_once_or_fresh(const std::string& method, const std::string& path, const HeaderList& headers,
                                  const Payload& payload, uint64_t cap, bool head_request) {
    const bool reused = conn_.is_open();
    bool got_bytes = false;
    try {
      return exchange(method, path, headers, payload, cap, head_request, got_bytes);
    } catch (const Error& e) {
      conn_.close();
      if (!reused || got_bytes || e.code() != Code::kUnavailable) throw;
    }
    return exchange(method, path, headers, payload, cap, head_request, got_bytes);
  }

  Response exchange(const std::string& method, const std::string& path, const HeaderList& extra,
                    const Payload& payload, uint64_t cap, bool head_request, bool& got_bytes) {
    got_bytes = false;
    HttpRequest req;
    req.method = method;
    req.target = path;
    req.host = host_header_;
    req.headers = extra;
    if (method == "PUT") req.content_length = payload.size;
    if (s3()) {
      SigV4Request sr;
      sr.method = method;
      sr.canonical_uri = path;
      sr.headers = extra;
      sr.headers.emplace_back("host", host_header_);
      sr.payload_hash = payload.sha256_hex;
      sr.amz_date = amz_date_now();
      req.headers = sign_request(std::move(sr), SigV4Credentials{c_.access_key, c_.secret_key, c_.session_token,
                                                                 c_.region, "s3"});
    }
    if (!conn_.is_open()) conn_.open(endpoint_);
    const std::string head = serialize_request(req);
    conn_.write_all(head.data(), head.size());
    send_payload(payload);
    ResponseParser parser(cap, head_request);
    std::string buf(64 * 1024, '\0');
    bool leftover = false;
    while (!parser.done()) {
      const size_t n = conn_.read_some(buf.data(), buf.size());
      if (n == 0) {
        parser.finish_at_eof();
        break;
      }
      got_bytes = true;
      leftover = parser.feed(buf.data(), n) < n;
    }
    if (!parser.keep_alive() || leftover) conn_.close();
    Response r;
    r.status = parser.status();
    r.status_line = parser.status_line();
    r.headers = parser.headers();
    r.content_length = parser.content_length();
    r.body = parser.take_body();
    return r;
  }

  void send_payload(const Payload& p) {
    if (p.data) {
      conn_.write_all(p.data->data(), p.data->size());
      return;
    }
    if (p.file.empty()) return;
    sys::UniqueFd fd(::open(p.file.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd) throw_errno("open " + p.file);
    std::string buf(256 * 1024, '\0');
    uint64_t sent = 0;
    while (sent < p.size) {
      const ssize_t r = ::pread(fd.get(), buf.data(), std::min<uint64_t>(buf.size(), p.size - sent),
                                static_cast<off_t>(sent));
      if (r < 0) {
        if (errno == EINTR) continue;
        throw_errno("read " + p.file);
      }
      if (r == 0)
        throw Error(Code::kFailedPrecondition, p.file + " shrank while being uploaded (" + std::to_string(sent) +
                                                   " of " + std::to_string(p.size) + " bytes)");
      conn_.write_all(buf.data(), static_cast<size_t>(r));
      sent += static_cast<uint64_t>(r);
    }
  }

  StoreConfig c_;
  std::string name_;
  Endpoint endpoint_;
  std::string host_header_;
  Connection conn_;
};

}  // namespace

std::unique_ptr<BlobStore> open_http_store(const StoreConfig& config) {
  if (config.kind == StoreConfig::Kind::kS3 && (config.access_key.empty() || config.secret_key.empty()))
    throw Error(Code::kInvalidArgument, describe(config) +
                                            ": no credentials (set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY)");
  if (config.host.empty()) throw Error(Code::kInvalidArgument, describe(config) + ": no host");
  return std::make_unique<HttpStore>(config);
}

}  // namespace sandlet::store
