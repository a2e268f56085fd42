// The blob store clients (src/remote_store) against real servers on loopback: a directory, nginx (HTTP and
// HTTPS, PUT through WebDAV), moto's S3 server with signature checking, and the fault proxy in front of
// them (503s, resets, refused connections, throttling, corruption). A server that cannot start SKIPs.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <random>
#include <thread>

#include "common/error.hpp"
#include "remote_store/blob_store.hpp"
#include "support/fault_proxy.hpp"
#include "support/store_servers.hpp"

using sandlet::Code;
using sandlet::store::BlobStore;
using sandlet::store::open_store;
using sandlet::store::parse_store_url;
using sandlet::store::StoreConfig;
using test_support::FaultProxy;
using test_support::NginxServer;
using test_support::S3Server;
using test_support::TempDir;

namespace {

#define SKIP_IF(reason)                                           \
  do {                                                            \
    if (!(reason).empty()) {                                      \
      std::cout << "SANDLET-SKIP: " << (reason) << std::endl;     \
      return;                                                     \
    }                                                             \
  } while (0)

sandlet::Error error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const sandlet::Error& e) {
    return e;
  }
  FAIL("did not throw a sandlet::Error");
  return sandlet::Error(Code::kOk, "");
}

std::string pattern(size_t n, uint32_t seed) {
  std::minstd_rand rng(seed);
  std::string s(n, '\0');
  for (auto& c : s) c = static_cast<char>(rng());
  return s;
}

std::string write_file(const TempDir& dir, const std::string& name, const std::string& data) {
  const std::string path = dir.path() + "/" + name;
  test_support::write_text(path, data);
  return path;
}

StoreConfig with_credentials(StoreConfig c, const S3Server& s3, const std::string& secret = "") {
  c.access_key = s3.access_key();
  c.secret_key = secret.empty() ? s3.secret_key() : secret;
  return c;
}

// Every operation of the interface, on one store; `big` is several MiB, read back by odd ranges.
void round_trip(BlobStore& store) {
  TempDir local("store-local");
  REQUIRE_NOTHROW(store.check());
  store.put("layers/abc.json", "{\"a\":1}");
  CHECK(store.get("layers/abc.json", 1024) == "{\"a\":1}");
  CHECK(store.head("layers/abc.json") == 7u);
  store.put("layers/abc.json", "{\"a\":2}");  // overwrite
  CHECK(store.get("layers/abc.json", 1024) == "{\"a\":2}");
  store.put("names/empty", "");
  CHECK(store.head("names/empty") == 0u);
  CHECK(store.get("names/empty", 10).empty());

  const std::string big = pattern(5 * 1024 * 1024 + 333, 17);
  store.put_file("blobs/big", write_file(local, "big", big));
  CHECK(store.head("blobs/big") == big.size());
  CHECK(store.get("blobs/big", big.size()) == big);
  for (const auto& [offset, len] : std::vector<std::pair<uint64_t, size_t>>{
           {0, 1}, {1, 4095}, {4097, 65537}, {1234567, 1000001}, {big.size() - 7, 7}, {0, big.size()}}) {
    INFO("range " << offset << "+" << len);
    std::string out(len, '\0');
    store.get_range("blobs/big", offset, len, out.data());
    CHECK(out == big.substr(offset, len));
  }
  std::string out(10, '\0');
  CHECK(error_of([&] { store.get_range("blobs/big", big.size() - 5, 10, out.data()); }).code() ==
        Code::kOutOfRange);
  CHECK(error_of([&] { store.get_range("blobs/big", big.size() + 100, 10, out.data()); }).code() ==
        Code::kOutOfRange);
  CHECK(error_of([&] { store.get("blobs/big", 1000); }).code() == Code::kResourceExhausted);
  // Absent keys.
  CHECK_FALSE(store.head("blobs/absent"));
  const auto missing = error_of([&] { store.get("blobs/absent", 100); });
  CHECK(missing.code() == Code::kNotFound);
  CHECK(error_of([&] { store.get_range("blobs/absent", 0, 10, out.data()); }).code() == Code::kNotFound);
  // Keys are checked before anything is sent.
  CHECK(error_of([&] { store.get("../etc/passwd", 100); }).code() == Code::kInvalidArgument);
  // The connection survives errors: a later request on the same object works.
  CHECK(store.get("layers/abc.json", 1024) == "{\"a\":2}");
}

}  // namespace

TEST_CASE("store: directory store round trip, atomic writes, errors", "[store]") {
  TempDir dir("dir-store");
  auto store = open_store(parse_store_url("file://" + dir.path() + "/root"));
  CHECK(error_of([&] { store->check(); }).code() == Code::kNotFound);  // not made yet
  store->put("names/first", "x");  // makes the root
  round_trip(*store);
  // Nothing but the objects is left (temp files were renamed away).
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir.path()))
    CHECK(e.path().filename().string().rfind(".tmp-", 0) != 0);
  CHECK(test_support::read_text(dir.path() + "/root/layers/abc.json") == "{\"a\":2}");
}

TEST_CASE("store: HTTP store on nginx (WebDAV PUT)", "[store]") {
  NginxServer nginx;
  SKIP_IF(nginx.skip_reason());
  auto store = open_store(parse_store_url(nginx.url("pre/fix")));
  round_trip(*store);
  CHECK(test_support::read_text(nginx.data_dir() + "/pre/fix/layers/abc.json") == "{\"a\":2}");
  // 404 carries the status line and names the store.
  const auto e = error_of([&] { store->get("blobs/absent", 100); });
  CHECK_THAT(e.what(), Catch::Contains("404") && Catch::Contains(nginx.url("pre/fix")));
}

TEST_CASE("store: HTTPS store on nginx with a self-signed certificate", "[store]") {
  NginxServer nginx(true);
  SKIP_IF(nginx.skip_reason());
  StoreConfig c = parse_store_url(nginx.url());
  c.ca_file = nginx.ca_file();
  auto store = open_store(c);
  round_trip(*store);
  // The IP address is in the certificate too.
  StoreConfig by_ip = parse_store_url("https://127.0.0.1:" + std::to_string(nginx.port()));
  by_ip.ca_file = nginx.ca_file();
  CHECK_NOTHROW(open_store(by_ip)->check());
  // Without its CA the certificate is refused, at once (no retries for that).
  StoreConfig untrusted = parse_store_url(nginx.url());
  untrusted.ca_file = "";
  const auto e = error_of([&] { open_store(untrusted)->check(); });
  CHECK(e.code() == Code::kFailedPrecondition);
  CHECK_THAT(e.what(), Catch::Contains("certificate"));
  // An address the certificate does not carry (nginx listens there too).
  StoreConfig wrong_name = parse_store_url("https://127.0.0.2:" + std::to_string(nginx.port()));
  wrong_name.ca_file = nginx.ca_file();
  wrong_name.retries = 0;
  const auto wrong = error_of([&] { open_store(wrong_name)->check(); });
  CHECK(wrong.code() == Code::kFailedPrecondition);
  CHECK_THAT(wrong.what(), Catch::Contains("certificate"));
}

TEST_CASE("store: S3 store on moto, with signature checking", "[store]") {
  S3Server s3;
  SKIP_IF(s3.skip_reason());
  auto store = open_store(with_credentials(parse_store_url(s3.url(0, "v1")), s3));
  round_trip(*store);
  // A wrong secret is rejected at check(), with the server's reason.
  auto bad = open_store(with_credentials(parse_store_url(s3.url()), s3, "not-the-secret"));
  const auto e = error_of([&] { bad->check(); });
  CHECK(e.code() == Code::kPermissionDenied);
  CHECK_THAT(e.what(), Catch::Contains("credentials rejected"));
  CHECK(error_of([&] { bad->get("v1/layers/abc.json", 100); }).code() == Code::kPermissionDenied);
  // An access key the server does not know.
  StoreConfig unknown = with_credentials(parse_store_url(s3.url()), s3);
  unknown.access_key = "AKIAUNKNOWNKEY000000";
  CHECK(error_of([&] { open_store(unknown)->check(); }).code() == Code::kPermissionDenied);
  // A bucket that does not exist.
  StoreConfig no_bucket = with_credentials(parse_store_url(s3.url()), s3);
  no_bucket.bucket = "no-such-bucket";
  CHECK(error_of([&] { open_store(no_bucket)->check(); }).code() == Code::kNotFound);
  // No credentials at all: refused before any request.
  StoreConfig none = parse_store_url(s3.url());
  none.access_key.clear();
  none.secret_key.clear();
  CHECK(error_of([&] { open_store(none); }).code() == Code::kInvalidArgument);
}

TEST_CASE("store: an unreachable store is UNAVAILABLE quickly, after bounded retries", "[store]") {
  const auto start = std::chrono::steady_clock::now();
  StoreConfig c = parse_store_url("http://127.0.0.1:" + std::to_string(test_support::free_loopback_port()));
  const auto e = error_of([&] { open_store(c)->check(); });
  CHECK(e.code() == Code::kUnavailable);
  CHECK_THAT(e.what(), Catch::Contains("cannot connect") && Catch::Contains("after 5 attempts"));
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(10));
  // A server that accepts connections (the kernel's backlog does) but never answers: each read times out.
  const int silent = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  REQUIRE(::bind(silent, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  REQUIRE(::listen(silent, 16) == 0);
  ::getsockname(silent, reinterpret_cast<sockaddr*>(&a), &len);
  StoreConfig stalled = parse_store_url("http://127.0.0.1:" + std::to_string(ntohs(a.sin_port)));
  stalled.timeout_s = 0.3;
  stalled.retries = 1;
  const auto timed_out = error_of([&] { open_store(stalled)->get("a", 10); });
  ::close(silent);
  CHECK(timed_out.code() == Code::kUnavailable);
  CHECK_THAT(timed_out.what(), Catch::Contains("timed out"));
  StoreConfig unresolvable = parse_store_url("http://no-such-host.invalid:8080/x");
  unresolvable.retries = 1;
  CHECK(error_of([&] { open_store(unresolvable)->get("a", 10); }).code() == Code::kUnavailable);
}

TEST_CASE("store: retries through the fault proxy (503s, resets, a store down then up)", "[store]") {
  NginxServer nginx;
  SKIP_IF(nginx.skip_reason());
  FaultProxy proxy(nginx.port());
  StoreConfig c = parse_store_url("http://127.0.0.1:" + std::to_string(proxy.port()) + "/p");
  c.retries = 6;
  auto store = open_store(c);
  const std::string big = pattern(3 * 1024 * 1024 + 1, 5);
  store->put("blobs/big", big);
  store->put("names/a", "hello");
  for (int i = 0; i < 5; ++i) CHECK(store->get("names/a", 100) == "hello");
  CHECK(proxy.stat("connections") == 1);  // kept alive

  SECTION("the first K requests fail with 503: retried, then served") {
    CHECK(proxy.command("fail_next 3") == "ok");
    CHECK(store->get("names/a", 100) == "hello");
    CHECK(proxy.stat("failed") == 3);
    CHECK(proxy.command("fail_next 100") == "ok");
    c.retries = 2;
    const auto e = error_of([&] { open_store(c)->get("names/a", 100); });
    CHECK(e.code() == Code::kUnavailable);
    CHECK_THAT(e.what(), Catch::Contains("503") && Catch::Contains("after 3 attempts"));
  }
  SECTION("a response cut mid-body is retried") {
    CHECK(proxy.command("reset_next 2") == "ok");
    CHECK(store->get("blobs/big", big.size()) == big);
    std::string out(1 << 20, '\0');
    store->get_range("blobs/big", 777, out.size(), out.data());
    CHECK(out == big.substr(777, out.size()));
    CHECK(proxy.stat("resets") == 2);
  }
  SECTION("a store down, then up again: a later request succeeds") {
    CHECK(proxy.command("down") == "ok");
    StoreConfig quick = c;
    quick.retries = 1;
    CHECK(error_of([&] { open_store(quick)->get("names/a", 100); }).code() == Code::kUnavailable);
    std::thread up([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      proxy.command("up");
    });
    std::string got;
    CHECK_NOTHROW(got = store->get("names/a", 100));  // refused first, then retried until it is back
    up.join();
    CHECK(got == "hello");
  }
  SECTION("a throttled proxy slows transfers down, and they finish") {
    CHECK(proxy.command("throttle 4000000") == "ok");
    const long before = proxy.stat("bytes_down");
    CHECK(store->get("blobs/big", big.size()) == big);
    CHECK(proxy.stat("bytes_down") - before >= static_cast<long>(big.size()));
  }
  SECTION("corrupted bytes reach the caller, who verifies digests") {
    CHECK(proxy.command("corrupt blobs/big") == "ok");
    const std::string got = store->get("blobs/big", big.size());
    CHECK(got.size() == big.size());
    CHECK(got != big);
    CHECK(proxy.stat("corrupted") == 1);
  }
}

TEST_CASE("store: S3 requests are signed afresh on each retry", "[store]") {
  S3Server s3;
  SKIP_IF(s3.skip_reason());
  FaultProxy proxy(s3.port());
  StoreConfig c = with_credentials(parse_store_url(s3.url(proxy.port())), s3);
  auto store = open_store(c);
  store->put("blobs/x", "payload");
  CHECK(proxy.command("fail_next 2") == "ok");
  CHECK(store->get("blobs/x", 100) == "payload");
  CHECK(proxy.command("reset_next 1") == "ok");
  CHECK(store->get("blobs/x", 100) == "payload");
  CHECK(proxy.stat("failed") == 2);
  CHECK(proxy.stat("resets") == 1);
}
