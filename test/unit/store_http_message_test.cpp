// The blob stores' HTTP/1.1 layer (src/remote_store/http_message): the serializer, and the incremental parser fed
// whole, byte by byte and split at every offset, with hostile inputs.
#include <catch2/catch.hpp>

#include <string>

#include "remote_store/http_message.hpp"
#include "unit_helpers.hpp"

using sandlet::Code;
using sandlet::store::ContentRange;
using sandlet::store::HttpRequest;
using sandlet::store::ResponseParser;

namespace {

// Feeds `wire` split at `cut` (two pieces), then EOF if the parser is not done; returns the parser.
ResponseParser parse_split(const std::string& wire, size_t cut, uint64_t cap = 1 << 20, bool head = false) {
  ResponseParser p(cap, head);
  size_t used = p.feed(wire.data(), cut);
  if (!p.done()) used += p.feed(wire.data() + cut, wire.size() - cut);
  if (!p.done()) p.finish_at_eof();
  CHECK(p.done());
  return p;
}

ResponseParser parse_bytewise(const std::string& wire, uint64_t cap = 1 << 20) {
  ResponseParser p(cap);
  for (size_t i = 0; i < wire.size() && !p.done(); ++i) REQUIRE(p.feed(&wire[i], 1) == 1);
  if (!p.done()) p.finish_at_eof();
  return p;
}

Code parse_error(const std::string& wire, uint64_t cap = 1 << 20) {
  return unit::expect_error([&] {
           ResponseParser p(cap);
           p.feed(wire);
           if (!p.done()) p.finish_at_eof();
         }).code();
}

}  // namespace

TEST_CASE("store http: a request head with Host, Range, Content-Length and keep-alive", "[store]") {
  HttpRequest r;
  r.method = "PUT";
  r.target = sandlet::store::percent_encode_path("/pre fix/blobs/a+b~c");
  r.host = "127.0.0.1:8080";
  r.headers = {{"Range", sandlet::store::range_value(10, 5)}};
  r.content_length = 42;
  CHECK(r.target == "/pre%20fix/blobs/a%2Bb~c");
  CHECK(sandlet::store::serialize_request(r) ==
        "PUT /pre%20fix/blobs/a%2Bb~c HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nRange: bytes=10-14\r\n"
        "Content-Length: 42\r\nConnection: keep-alive\r\n\r\n");
  r.headers = {{"X-Evil", "a\r\nInjected: 1"}};
  CHECK(unit::expect_error([&] { sandlet::store::serialize_request(r); }).code() == Code::kInvalidArgument);
  r.headers = {{"Bad Name", "v"}};
  CHECK(unit::expect_error([&] { sandlet::store::serialize_request(r); }).code() == Code::kInvalidArgument);
  CHECK(sandlet::store::percent_encode_component("a/b=c&d") == "a%2Fb%3Dc%26d");
}

TEST_CASE("store http: a Content-Length response parses the same at every split", "[store]") {
  const std::string body = "hello, world";
  const std::string wire = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\ncontent-length: 12\r\nETag: \"x\"\r\n\r\n" + body;
  for (size_t cut = 0; cut <= wire.size(); ++cut) {
    INFO("cut at " << cut);
    ResponseParser p = parse_split(wire, cut);
    CHECK(p.status() == 200);
    CHECK(p.reason() == "OK");
    CHECK(p.body() == body);
    CHECK(p.header("CONTENT-TYPE").value_or("") == "text/plain");
    CHECK(p.keep_alive());
  }
  CHECK(parse_bytewise(wire).body() == body);
}

TEST_CASE("store http: chunked bodies with extensions and trailers, at every split", "[store]") {
  const std::string wire =
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
      "5;ext=1\r\nhello\r\n1\r\n,\r\nA\r\n 012345678\r\n0\r\nX-Trailer: t\r\n\r\n";
  for (size_t cut = 0; cut <= wire.size(); ++cut) {
    INFO("cut at " << cut);
    ResponseParser p = parse_split(wire, cut);
    CHECK(p.body() == "hello, 012345678");
    CHECK(p.chunked());
  }
  ResponseParser p = parse_bytewise(wire);
  CHECK(p.body() == "hello, 012345678");
}

TEST_CASE("store http: what follows a complete response is left for the next one", "[store]") {
  const std::string one = "HTTP/1.1 204 No Content\r\n\r\n";
  const std::string two = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi";
  ResponseParser p(100);
  CHECK(p.feed(one + two) == one.size());
  CHECK(p.done());
  ResponseParser q(100);
  CHECK(q.feed(two + "junk") == two.size());
  CHECK(q.body() == "hi");
}

TEST_CASE("store http: HEAD, 100 Continue, HTTP/1.0 and bodies delimited by close", "[store]") {
  ResponseParser head(0, true);
  head.feed("HTTP/1.1 200 OK\r\nContent-Length: 123456\r\n\r\n");
  CHECK(head.done());
  CHECK(head.content_length() == 123456u);
  ResponseParser cont(100);
  cont.feed("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n");
  CHECK(cont.done());
  CHECK(cont.status() == 201);
  ResponseParser old(100);
  old.feed("HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\nx");
  CHECK(old.done());
  CHECK_FALSE(old.keep_alive());
  ResponseParser until_close(100);
  until_close.feed("HTTP/1.1 200 OK\r\n\r\nabc");
  CHECK_FALSE(until_close.done());
  until_close.finish_at_eof();
  CHECK(until_close.body() == "abc");
  CHECK_FALSE(until_close.keep_alive());
  ResponseParser closing(100);
  closing.feed("HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n");
  CHECK_FALSE(closing.keep_alive());
}

TEST_CASE("store http: truncated responses are UNAVAILABLE (retryable)", "[store]") {
  const std::string wire = "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n12345";
  const auto e = unit::expect_error([&] {
    ResponseParser p(100);
    p.feed(wire);
    p.finish_at_eof();
  });
  CHECK(e.code() == Code::kUnavailable);
  CHECK_THAT(e.what(), Catch::Contains("5 body bytes of 10"));
  CHECK(parse_error("HTTP/1.1 200 OK\r\nContent-") == Code::kUnavailable);
  CHECK(parse_error("") == Code::kUnavailable);
  CHECK(parse_error("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab") == Code::kUnavailable);
}

TEST_CASE("store http: caps on the header block and the body", "[store]") {
  std::string huge = "HTTP/1.1 200 OK\r\n";
  while (huge.size() < 70 * 1024) huge += "X-Filler: " + std::string(100, 'a') + "\r\n";
  CHECK(parse_error(huge) == Code::kResourceExhausted);
  CHECK(parse_error("HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\nhello world", 10) == Code::kResourceExhausted);
  CHECK(parse_error("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nb\r\nhello world\r\n0\r\n\r\n", 10) ==
        Code::kResourceExhausted);
  CHECK(parse_error("HTTP/1.1 200 OK\r\n\r\nhello world", 10) == Code::kResourceExhausted);
  // An error page over the cap is read and cut, not an error: the status is what matters.
  ResponseParser p(4);
  p.feed("HTTP/1.1 404 Not Found\r\nContent-Length: 9\r\n\r\nnot here!");
  CHECK(p.done());
  CHECK(p.status() == 404);
  std::string trailers = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n";
  while (trailers.size() < 70 * 1024) trailers += "T: " + std::string(100, 'b') + "\r\n";
  CHECK(parse_error(trailers) == Code::kResourceExhausted);
}

TEST_CASE("store http: hostile and malformed responses are rejected", "[store]") {
  const char* bad[] = {
      "HTTP/2 200 OK\r\n\r\n",
      "ICY 200 OK\r\n\r\n",
      "HTTP/1.1 2000 OK\r\n\r\n",
      "HTTP/1.1 20 OK\r\n\r\n",
      "HTTP/1.1 abc OK\r\n\r\n",
      "HTTP/1.1 200 OK\r\nNo colon here\r\n\r\n",
      "HTTP/1.1 200 OK\r\n: empty name\r\n\r\n",
      "HTTP/1.1 200 OK\r\nBad Name: x\r\n\r\n",
      "HTTP/1.1 200 OK\r\nName : x\r\n\r\n",
      "HTTP/1.1 200 OK\r\nA: b\r\n folded\r\n\r\n",
      "HTTP/1.1 200 OK\r\nA: b\nC: d\r\n\r\n",
      "HTTP/1.1 200 OK\r\nA: b\x01\r\n\r\n",
      "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
      "HTTP/1.1 200 OK\r\nContent-Length: 1x\r\n\r\n",
      "HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999\r\n\r\n",
      "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab",
      "HTTP/1.1 200 OK\r\nContent-Length: 1, 1\r\n\r\na",
      "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n",
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n-1\r\n",
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffffff\r\n",
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabc\r\n0\r\n\r\n",
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\nab\r\n0\r\n\r\n",
      "HTTP/1.1 101 Switching Protocols\r\n\r\n",
  };
  for (const char* wire : bad) {
    INFO(wire);
    const Code c = parse_error(wire);
    CHECK((c == Code::kUnavailable || c == Code::kResourceExhausted));
  }
}

TEST_CASE("store http: Content-Range values", "[store]") {
  auto r = sandlet::store::parse_content_range("bytes 10-19/100");
  REQUIRE(r);
  CHECK(r->first == 10);
  CHECK(r->last == 19);
  CHECK(r->total == 100u);
  auto star = sandlet::store::parse_content_range("bytes 0-0/*");
  REQUIRE(star);
  CHECK_FALSE(star->total);
  for (const char* bad : {"bytes 20-10/100", "bytes 0-100/100", "items 0-1/2", "bytes 0-1", "bytes -1/2",
                          "bytes 0-1/x", "bytes a-b/c", ""})
    CHECK_FALSE(sandlet::store::parse_content_range(bad));
}

TEST_CASE("store http: every single-byte mutation parses or fails cleanly", "[store]") {
  const std::string wire =
      "HTTP/1.1 206 Partial Content\r\nContent-Range: bytes 0-4/10\r\nTransfer-Encoding: chunked\r\n\r\n"
      "3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n";
  for (size_t i = 0; i < wire.size(); ++i) {
    for (int v : {0, 13, 10, 32, 58, 48, 102, 0x7f, 0xff}) {
      std::string m = wire;
      m[i] = static_cast<char>(v);
      ResponseParser p(8);
      try {
        for (size_t k = 0; k < m.size() && !p.done(); ++k) p.feed(&m[k], 1);
        if (!p.done()) p.finish_at_eof();
        CHECK(p.body().size() <= 8);
      } catch (const sandlet::Error& e) {
        CHECK((e.code() == Code::kUnavailable || e.code() == Code::kResourceExhausted));
      }
    }
  }
}
