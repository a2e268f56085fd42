// HTTP/1.1 messages without I/O: a request serializer and an incremental response parser that is fed
// bytes as they arrive, so that a blocking client and a future io_uring-driven loader share one parser.
// Errors are thrown as sandlet::Error: kUnavailable for malformed or truncated responses (a retry may
// meet a healthy server), kResourceExhausted when a cap is exceeded.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace sandlet::store {

using HeaderList = std::vector<std::pair<std::string, std::string>>;

struct HttpRequest {
  std::string method;  // "GET", "HEAD", "PUT"
  std::string target;  // already encoded origin-form: "/a/b%20c?x=1"
  std::string host;  // the Host header's value ("h" or "h:port")
  HeaderList headers;  // extra headers, written as given
  std::optional<uint64_t> content_length;  // sets Content-Length (PUT); a body follows the head
  bool keep_alive = true;
};

// "/" + each byte outside [A-Za-z0-9-._~/] as %XX (the S3/SigV4 rules; '/' separates components).
std::string percent_encode_path(std::string_view path);
// Percent-encodes everything outside [A-Za-z0-9-._~] (query names and values).
std::string percent_encode_component(std::string_view s);
// "bytes=<offset>-<offset+len-1>"; len must be > 0.
std::string range_value(uint64_t offset, uint64_t len);
// The request head (request line, Host, headers, Content-Length, Connection), ending in the blank line.
// Throws kInvalidArgument for CR/LF or NUL in any field (header injection).
std::string serialize_request(const HttpRequest& request);

struct ContentRange {
  uint64_t first = 0, last = 0;  // inclusive
  std::optional<uint64_t> total;  // nullopt for "*"
};
// Parses "bytes first-last/total" (or "/*"); nullopt when malformed or first > last or last >= total.
std::optional<ContentRange> parse_content_range(std::string_view value);

class ResponseParser final {
 public:
  static constexpr size_t kMaxHeaderBytes = 64 * 1024;
  static constexpr size_t kDefaultErrorBodyCap = 64 * 1024;

  // body_cap: most body bytes a success (2xx) response may carry (more throws kResourceExhausted). An
  // error response's body is kept up to error_body_cap bytes, the rest read and dropped. head_request:
  // the response to a HEAD carries no body whatever its Content-Length says.
  explicit ResponseParser(uint64_t body_cap, bool head_request = false,
                          size_t error_body_cap = kDefaultErrorBodyCap);

  // A success (2xx) body goes to `sink` as it arrives instead of into body() (a blob of any size streamed to a
  // file); the cap still bounds it. Set before feeding.
  void set_body_sink(std::function<void(const char*, size_t)> sink) { sink_ = std::move(sink); }

  // Consumes bytes of the response; returns how many were used. Fewer than n only once done(): what is
  // left belongs to the next response on the connection.
  size_t feed(const char* data, size_t n);
  size_t feed(std::string_view s) { return feed(s.data(), s.size()); }
  // The peer closed the connection: completes a body delimited by the close, else throws (truncated).
  void finish_at_eof();

  bool headers_done() const { return state_ > State::kHead; }
  bool done() const { return state_ == State::kDone; }
  int status() const { return status_; }
  const std::string& reason() const { return reason_; }
  const std::string& status_line() const { return status_line_; }
  // The first header of that name (case-insensitive), trimmed.
  std::optional<std::string_view> header(std::string_view name) const;
  const HeaderList& headers() const { return headers_; }
  std::optional<uint64_t> content_length() const { return content_length_; }
  bool chunked() const { return chunked_; }
  // May the connection carry another request after this response?
  bool keep_alive() const { return keep_alive_; }
  const std::string& body() const { return body_; }
  std::string take_body() { return std::move(body_); }
  uint64_t body_bytes_seen() const { return body_seen_; }

 private:
  enum class State { kHead, kBody, kChunkSize, kChunkData, kChunkDataEnd, kTrailers, kUntilClose, kDone };
  void parse_head(std::string_view head);
  void parse_status_line(std::string_view line);
  void start_body();
  void add_body(const char* data, size_t n);
  size_t feed_line(const char* data, size_t n, std::string& line, size_t cap, bool& complete);

  uint64_t body_cap_;
  bool head_request_;
  size_t error_body_cap_;
  State state_ = State::kHead;
  std::string head_;  // bytes of the header block so far
  std::string line_;  // a chunk-size or trailer line so far
  size_t trailer_bytes_ = 0;
  int status_ = 0;
  int minor_version_ = 1;
  std::string reason_, status_line_;
  HeaderList headers_;
  std::optional<uint64_t> content_length_;
  bool chunked_ = false;
  bool keep_alive_ = true;
  uint64_t remaining_ = 0;  // of the body or the current chunk
  uint64_t body_seen_ = 0;
  uint64_t success_bytes_ = 0;  // of a 2xx body, kept or streamed
  std::string body_;
  std::function<void(const char*, size_t)> sink_;
};

}  // namespace sandlet::store
