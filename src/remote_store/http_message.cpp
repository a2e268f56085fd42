#include "remote_store/http_message.hpp"

#include <algorithm>

#include "common/error.hpp"

namespace sandlet::store {

namespace {

[[noreturn]] void malformed(const std::string& why) {
  throw Error(Code::kUnavailable, "malformed HTTP response: " + why);
}

char lower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (lower(a[i]) != lower(b[i])) return false;
  return true;
}

bool is_token_char(char c) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
  return std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// Decimal digits only, no sign, fits 63 bits.
std::optional<uint64_t> parse_decimal(std::string_view s) {
  if (s.empty() || s.size() > 18) return std::nullopt;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  return v;
}

// Does a comma-separated header value contain this token (case-insensitive)?
bool has_token(std::string_view value, std::string_view token) {
  while (!value.empty()) {
    const size_t comma = value.find(',');
    if (iequals(trim(value.substr(0, comma)), token)) return true;
    if (comma == std::string_view::npos) break;
    value.remove_prefix(comma + 1);
  }
  return false;
}

void check_field(std::string_view s, const char* what) {
  for (char c : s)
    if (c == '\r' || c == '\n' || c == '\0')
      throw Error(Code::kInvalidArgument, std::string("HTTP request ") + what + " contains CR, LF or NUL");
}

const char kHex[] = "0123456789ABCDEF";

std::string encode(std::string_view s, bool keep_slash) {
  std::string out;
  out.reserve(s.size());
  for (unsigned char c : s) {
    const bool unreserved = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                            c == '-' || c == '.' || c == '_' || c == '~' || (keep_slash && c == '/');
    if (unreserved) {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

}  // namespace

std::string percent_encode_path(std::string_view path) {
  std::string out = encode(path, true);
  if (out.empty() || out.front() != '/') out.insert(out.begin(), '/');
  return out;
}

std::string percent_encode_component(std::string_view s) { return encode(s, false); }

std::string range_value(uint64_t offset, uint64_t len) {
  return "bytes=" + std::to_string(offset) + "-" + std::to_string(offset + len - 1);
}

std::string serialize_request(const HttpRequest& r) {
  if (r.method.empty() || !std::all_of(r.method.begin(), r.method.end(), is_token_char))
    throw Error(Code::kInvalidArgument, "HTTP request method '" + r.method + "' is not a token");
  if (r.target.empty() || r.target.front() != '/' || r.target.find(' ') != std::string::npos)
    throw Error(Code::kInvalidArgument, "HTTP request target '" + r.target + "' is not an origin-form path");
  check_field(r.target, "target");
  check_field(r.host, "Host");
  std::string out = r.method + " " + r.target + " HTTP/1.1\r\nHost: " + r.host + "\r\n";
  for (const auto& [name, value] : r.headers) {
    if (name.empty() || !std::all_of(name.begin(), name.end(), is_token_char))
      throw Error(Code::kInvalidArgument, "HTTP header name '" + name + "' is not a token");
    check_field(value, "header value");
    out += name + ": " + value + "\r\n";
  }
  if (r.content_length) out += "Content-Length: " + std::to_string(*r.content_length) + "\r\n";
  out += r.keep_alive ? "Connection: keep-alive\r\n\r\n" : "Connection: close\r\n\r\n";
  return out;
}

std::optional<ContentRange> parse_content_range(std::string_view v) {
  v = trim(v);
  if (v.substr(0, 6) != "bytes ") return std::nullopt;
  v.remove_prefix(6);
  const size_t dash = v.find('-'), slash = v.find('/');
  if (dash == std::string_view::npos || slash == std::string_view::npos || dash > slash) return std::nullopt;
  const auto first = parse_decimal(v.substr(0, dash));
  const auto last = parse_decimal(v.substr(dash + 1, slash - dash - 1));
  if (!first || !last || *first > *last) return std::nullopt;
  ContentRange r{*first, *last, std::nullopt};
  const std::string_view total = v.substr(slash + 1);
  if (total != "*") {
    r.total = parse_decimal(total);
    if (!r.total || *last >= *r.total) return std::nullopt;
  }
  return r;
}

ResponseParser::ResponseParser(uint64_t body_cap, bool head_request, size_t error_body_cap)
    : body_cap_(body_cap), head_request_(head_request), error_body_cap_(error_body_cap) {}

std::optional<std::string_view> ResponseParser::header(std::string_view name) const {
  for (const auto& [n, v] : headers_)
    if (iequals(n, name)) return std::string_view(v);
  return std::nullopt;
}

void ResponseParser::parse_status_line(std::string_view line) {
  // HTTP/1.x SP 3DIGIT [SP reason]
  if (line.size() < 12 || line.substr(0, 7) != "HTTP/1." || line[7] < '0' || line[7] > '9' || line[8] != ' ')
    malformed("bad status line '" + std::string(line.substr(0, 80)) + "'");
  minor_version_ = line[7] - '0';
  int code = 0;
  for (size_t i = 9; i < 12; ++i) {
    if (line[i] < '0' || line[i] > '9') malformed("bad status code in '" + std::string(line.substr(0, 80)) + "'");
    code = code * 10 + (line[i] - '0');
  }
  if (code < 100 || (line.size() > 12 && line[12] != ' ')) malformed("bad status code");
  for (char c : line)
    if ((static_cast<unsigned char>(c) < 0x20 && c != '\t') || c == 0x7f) malformed("control character in status line");
  status_ = code;
  reason_ = line.size() > 13 ? std::string(line.substr(13)) : std::string();
  status_line_ = std::string(line);
}

void ResponseParser::parse_head(std::string_view head) {
  headers_.clear();
  content_length_.reset();
  chunked_ = false;
  size_t pos = head.find("\r\n");
  parse_status_line(head.substr(0, pos));
  bool have_te = false;
  while (pos != std::string_view::npos && pos + 2 < head.size()) {
    const size_t start = pos + 2;
    pos = head.find("\r\n", start);
    const std::string_view line = head.substr(start, pos == std::string_view::npos ? head.npos : pos - start);
    if (line.empty()) break;
    if (line.front() == ' ' || line.front() == '\t') malformed("folded header line");
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos || colon == 0) malformed("header line without a name");
    const std::string_view name = line.substr(0, colon);
    if (!std::all_of(name.begin(), name.end(), is_token_char))
      malformed("bad header name '" + std::string(name.substr(0, 80)) + "'");
    const std::string_view value = trim(line.substr(colon + 1));
    for (char c : value)
      if ((static_cast<unsigned char>(c) < 0x20 && c != '\t') || c == 0x7f)
        malformed("control character in header '" + std::string(name) + "'");
    if (iequals(name, "Content-Length")) {
      const auto v = parse_decimal(value);
      if (!v) malformed("bad Content-Length '" + std::string(value.substr(0, 40)) + "'");
      if (content_length_ && *content_length_ != *v) malformed("conflicting Content-Length headers");
      content_length_ = v;
    } else if (iequals(name, "Transfer-Encoding")) {
      if (have_te || !iequals(value, "chunked"))
        malformed("unsupported Transfer-Encoding '" + std::string(value.substr(0, 40)) + "'");
      have_te = chunked_ = true;
    }
    headers_.emplace_back(std::string(name), std::string(value));
  }
  if (chunked_ && content_length_) malformed("both Content-Length and Transfer-Encoding");
  const auto connection = header("Connection");
  keep_alive_ = minor_version_ >= 1 ? !(connection && has_token(*connection, "close"))
                                    : (connection && has_token(*connection, "keep-alive"));
}

void ResponseParser::start_body() {
  if (head_request_ || status_ == 204 || status_ == 304) {
    state_ = State::kDone;
  } else if (chunked_) {
    state_ = State::kChunkSize;
  } else if (content_length_) {
    if (status_ >= 200 && status_ < 300 && *content_length_ > body_cap_)
      throw Error(Code::kResourceExhausted, "HTTP response body of " + std::to_string(*content_length_) +
                                                " bytes is over the cap of " + std::to_string(body_cap_));
    remaining_ = *content_length_;
    state_ = remaining_ == 0 ? State::kDone : State::kBody;
  } else {
    keep_alive_ = false;  // the close delimits the body
    state_ = State::kUntilClose;
  }
}

void ResponseParser::add_body(const char* data, size_t n) {
  body_seen_ += n;
  if (status_ >= 200 && status_ < 300) {
    if (success_bytes_ + n > body_cap_)
      throw Error(Code::kResourceExhausted,
                  "HTTP response body is over the cap of " + std::to_string(body_cap_) + " bytes");
    success_bytes_ += n;
    if (sink_) {
      if (n > 0) sink_(data, n);
    } else {
      body_.append(data, n);
    }
  } else if (body_.size() < error_body_cap_) {
    body_.append(data, std::min(n, error_body_cap_ - body_.size()));
  }
}

// Accumulates one CRLF-terminated line into `line` (without the CRLF); sets complete when it ends.
size_t ResponseParser::feed_line(const char* data, size_t n, std::string& line, size_t cap, bool& complete) {
  complete = false;
  for (size_t i = 0; i < n; ++i) {
    const char c = data[i];
    if (c == '\n') {
      if (line.empty() || line.back() != '\r') malformed("bare LF in chunked framing");
      line.pop_back();
      complete = true;
      return i + 1;
    }
    if (!line.empty() && line.back() == '\r') malformed("bare CR in chunked framing");
    line += c;
    if (line.size() > cap) malformed("chunk-size or trailer line too long");
  }
  return n;
}

size_t ResponseParser::feed(const char* data, size_t n) {
  size_t used = 0;
  while (used < n && state_ != State::kDone) {
    switch (state_) {
      case State::kHead: {
        const size_t old = head_.size();
        const size_t take = std::min(n - used, kMaxHeaderBytes - old);
        if (take == 0)
          throw Error(Code::kResourceExhausted, "HTTP response header block is over " +
                                                    std::to_string(kMaxHeaderBytes) + " bytes");
        head_.append(data + used, take);
        const size_t end = head_.find("\r\n\r\n", old >= 3 ? old - 3 : 0);
        if (end == std::string::npos) {
          if (old == 0 && head_.size() >= 5 && head_.compare(0, 5, "HTTP/") != 0)
            malformed("does not start with HTTP/");
          used += take;
          break;
        }
        used += end + 4 - old;
        head_.resize(end + 2);
        parse_head(head_);
        head_.clear();
        if (status_ == 101) malformed("unexpected 101 Switching Protocols");
        if (status_ < 200) break;  // an interim response (100 Continue): the real one follows
        start_body();
        break;
      }
      case State::kBody:
      case State::kChunkData: {
        const size_t take = static_cast<size_t>(std::min<uint64_t>(remaining_, n - used));
        add_body(data + used, take);
        used += take;
        remaining_ -= take;
        if (remaining_ == 0) state_ = state_ == State::kBody ? State::kDone : State::kChunkDataEnd;
        break;
      }
      case State::kUntilClose:
        add_body(data + used, n - used);
        used = n;
        break;
      case State::kChunkSize: {
        bool complete = false;
        used += feed_line(data + used, n - used, line_, 256, complete);
        if (!complete) break;
        std::string_view size = std::string_view(line_).substr(0, line_.find(';'));
        size = trim(size);
        if (size.empty() || size.size() > 15) malformed("bad chunk size '" + line_.substr(0, 40) + "'");
        uint64_t v = 0;
        for (char c : size) {
          const int d = (c >= '0' && c <= '9') ? c - '0' : (lower(c) >= 'a' && lower(c) <= 'f') ? lower(c) - 'a' + 10 : -1;
          if (d < 0) malformed("bad chunk size '" + line_.substr(0, 40) + "'");
          v = v * 16 + static_cast<uint64_t>(d);
        }
        line_.clear();
        if (status_ >= 200 && status_ < 300 && success_bytes_ + v > body_cap_)
          throw Error(Code::kResourceExhausted,
                      "HTTP response body is over the cap of " + std::to_string(body_cap_) + " bytes");
        remaining_ = v;
        state_ = v == 0 ? State::kTrailers : State::kChunkData;
        break;
      }
      case State::kChunkDataEnd: {
        bool complete = false;
        used += feed_line(data + used, n - used, line_, 2, complete);
        if (!complete) break;
        if (!line_.empty()) malformed("chunk data longer than its size");
        state_ = State::kChunkSize;
        break;
      }
      case State::kTrailers: {
        bool complete = false;
        const size_t took = feed_line(data + used, n - used, line_, kMaxHeaderBytes, complete);
        used += took;
        trailer_bytes_ += took;
        if (trailer_bytes_ > kMaxHeaderBytes)
          throw Error(Code::kResourceExhausted, "HTTP response trailers are over " +
                                                    std::to_string(kMaxHeaderBytes) + " bytes");
        if (!complete) break;
        if (line_.empty()) state_ = State::kDone;
        line_.clear();
        break;
      }
      case State::kDone:
        break;
    }
  }
  return used;
}

void ResponseParser::finish_at_eof() {
  if (state_ == State::kUntilClose) state_ = State::kDone;
  if (state_ == State::kDone) return;
  if (state_ == State::kHead)
    throw Error(Code::kUnavailable, head_.empty() ? "connection closed before a response"
                                                  : "connection closed in the response headers");
  std::string what = "connection closed after " + std::to_string(body_seen_) + " body bytes";
  if (content_length_) what += " of " + std::to_string(*content_length_);
  throw Error(Code::kUnavailable, what + " (truncated response)");
}

}  // namespace sandlet::store
