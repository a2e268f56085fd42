// Store URLs and keys (src/remote_store/store_url).
#include <catch2/catch.hpp>

#include <cstdlib>

#include "remote_store/store_url.hpp"
#include "unit_helpers.hpp"

using sandlet::Code;
using sandlet::store::parse_store_url;
using sandlet::store::StoreConfig;

TEST_CASE("store url: directory, HTTP(S) and S3 forms", "[store]") {
  for (const char* u : {"/srv/store/", "file:///srv/store", "dir:///srv/store"}) {
    const StoreConfig c = parse_store_url(u);
    CHECK(c.kind == StoreConfig::Kind::kDir);
    CHECK(c.dir == "/srv/store");
  }
  StoreConfig h = parse_store_url("http://127.0.0.1:8080/a/b/");
  CHECK(h.kind == StoreConfig::Kind::kHttp);
  CHECK(h.host == "127.0.0.1");
  CHECK(h.port == 8080);
  CHECK(h.prefix == "a/b");
  CHECK_FALSE(h.tls);
  StoreConfig hs = parse_store_url("https://store.example");
  CHECK(hs.tls);
  CHECK(hs.port == 443);
  CHECK(hs.prefix.empty());
  CHECK(parse_store_url("http://[::1]:81/x").host == "::1");

  ::setenv("AWS_ACCESS_KEY_ID", "AK", 1);
  ::setenv("AWS_SECRET_ACCESS_KEY", "SK", 1);
  ::unsetenv("AWS_SESSION_TOKEN");
  StoreConfig s = parse_store_url("s3://my-bucket/layers/v1?endpoint=http://127.0.0.1:9000&region=eu-west-1");
  CHECK(s.kind == StoreConfig::Kind::kS3);
  CHECK(s.bucket == "my-bucket");
  CHECK(s.prefix == "layers/v1");
  CHECK(s.host == "127.0.0.1");
  CHECK(s.port == 9000);
  CHECK(s.region == "eu-west-1");
  CHECK_FALSE(s.virtual_host_style);
  CHECK(s.access_key == "AK");
  CHECK(s.secret_key == "SK");
  CHECK(sandlet::store::describe(s).find("SK") == std::string::npos);
  CHECK(parse_store_url("s3://my-bucket?endpoint=https://h&style=virtual").virtual_host_style);
  StoreConfig aws = parse_store_url("s3://my-bucket");
  CHECK(aws.tls);
  CHECK(aws.virtual_host_style);
  ::unsetenv("AWS_ACCESS_KEY_ID");
  ::unsetenv("AWS_SECRET_ACCESS_KEY");
}

TEST_CASE("store url: a wrong URL names the part that is wrong", "[store]") {
  const std::pair<const char*, const char*> bad[] = {
      {"", "URL"},
      {"relative/dir", "path"},
      {"ftp://h/x", "scheme"},
      {"http://", "host"},
      {"http://h:0/", "port"},
      {"http://h:99999/", "port"},
      {"http://h:/", "port"},
      {"http://user:pw@h/", "credentials"},
      {"http://h/a/../b", "path prefix"},
      {"http://h/x?y=1", "query"},
      {"http://h_1/", "host"},
      {"s3://ab", "bucket"},
      {"s3://Bucket", "bucket"},
      {"s3://bucket?endpoint=ftp://h", "endpoint"},
      {"s3://bucket?endpoint=http://h/path", "endpoint"},
      {"s3://bucket?style=sideways", "style"},
      {"s3://bucket?colour=red", "colour"},
      {"s3://bucket?region=", "region"},
  };
  for (const auto& [url, part] : bad) {
    INFO(url);
    const auto e = unit::expect_error([&] { parse_store_url(url); });
    CHECK(e.code() == Code::kInvalidArgument);
    CHECK_THAT(e.what(), Catch::Contains(part));
  }
}

TEST_CASE("store url: keys", "[store]") {
  for (const char* k : {"layers/abc.json", "blobs/0123", "names/my-env", "envs/x.json", "blobs/a.chunks"})
    CHECK_NOTHROW(sandlet::store::validate_key(k));
  for (std::string k : {std::string(), std::string("/abs"), std::string("a/../b"), std::string(".."),
                        std::string("a//b"), std::string("a/"), std::string("a b"), std::string("a\nb"),
                        std::string("caf\xc3\xa9"), std::string(513, 'a'), std::string("./a")}) {
    INFO(k);
    CHECK(unit::expect_error([&] { sandlet::store::validate_key(k); }).code() == Code::kInvalidArgument);
  }
  CHECK_NOTHROW(sandlet::store::validate_key(std::string(512, 'a')));
}
