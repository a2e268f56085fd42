// Image references, registry settings and environment names for registry images (src/registry, image envs).
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "common/error.hpp"
#include "image/layer_store.hpp"
#include "image/oci.hpp"
#include "registry/image_ref.hpp"
#include "registry/registry_client.hpp"
#include "registry/registry_config.hpp"

using namespace sandlet;
using registry::parse_image_ref;

TEST_CASE("image references normalize as docker pull reads them", "[registry]") {
  auto r = parse_image_ref("debian:bookworm");
  CHECK(r.registry == "docker.io");
  CHECK(r.repository == "library/debian");
  CHECK(r.tag == "bookworm");
  CHECK(r.canonical() == "docker.io/library/debian:bookworm");
  CHECK(parse_image_ref("docker://ubuntu").canonical() == "docker.io/library/ubuntu:latest");
  CHECK(parse_image_ref("org/app").canonical() == "docker.io/org/app:latest");
  r = parse_image_ref("ghcr.io/org/python-3-13:20250101");
  CHECK(r.registry == "ghcr.io");
  CHECK(r.repository == "org/python-3-13");
  r = parse_image_ref("127.0.0.1:5000/a/b@sha256:" + std::string(64, 'a'));
  CHECK(r.registry == "127.0.0.1:5000");
  CHECK(r.tag.empty());
  CHECK(r.reference() == "sha256:" + std::string(64, 'a'));
  CHECK(r.canonical() == "127.0.0.1:5000/a/b@sha256:" + std::string(64, 'a'));
  CHECK(parse_image_ref("localhost/x:1").registry == "localhost");
  // A tag and a digest: the digest is what is fetched.
  r = parse_image_ref("x.io/a:v1@sha256:" + std::string(64, 'b'));
  CHECK(r.tag == "v1");
  CHECK(r.reference() == "sha256:" + std::string(64, 'b'));
}

TEST_CASE("bad image references name what is wrong", "[registry]") {
  CHECK_THROWS_WITH(parse_image_ref("Debian:12"), Catch::Contains("lowercase"));
  CHECK_THROWS_WITH(parse_image_ref("a@sha256:12"), Catch::Contains("64 lowercase hex"));
  CHECK_THROWS_WITH(parse_image_ref("a:-x"), Catch::Contains("a tag is"));
  CHECK_THROWS_WITH(parse_image_ref("docker://"), Catch::Contains("no image name"));
  CHECK_THROWS_WITH(parse_image_ref("x.io/a//b"), Catch::Contains("repository components"));
  CHECK_THROWS_WITH(parse_image_ref("x.io:99999/a"), Catch::Contains("registry host[:port]"));
  CHECK_THROWS_WITH(parse_image_ref("x.io:/a"), Catch::Contains("registry host[:port]"));
  CHECK(parse_image_ref("[::1]:5000/a").registry == "[::1]:5000");
  CHECK_FALSE(registry::looks_like_image_ref("my env"));
  CHECK(registry::looks_like_image_ref("swe:v1"));
}

TEST_CASE("registry settings parse and refuse unknown keys", "[registry]") {
  auto c = registry::parse_registry_config(
      R"({"mirrors": {"docker.io": ["127.0.0.1:5001"]}, "insecure": ["127.0.0.1:5001"], "pull": "never",
          "platform": "linux/arm64", "retries": 2, "timeout_s": 5})");
  CHECK(c.mirrors.at("docker.io").at(0) == "127.0.0.1:5001");
  CHECK(registry::is_insecure(c, "127.0.0.1:5001"));
  CHECK(c.pull == registry::PullPolicy::kNever);
  CHECK(c.platform == "linux/arm64");
  CHECK_THROWS_WITH(registry::parse_registry_config(R"({"mirror": []})"), Catch::Contains("registries.mirror"));
  CHECK_THROWS_WITH(registry::parse_registry_config(R"({"pull": "sometimes"})"), Catch::Contains("missing, never, always"));
  CHECK_THROWS_WITH(registry::parse_registry_config(R"({"platform": "amd64"})"), Catch::Contains("os/arch"));
  CHECK(registry::host_platform().rfind("linux/", 0) == 0);
}

TEST_CASE("credentials come from a docker config.json", "[registry]") {
  const auto dir = std::filesystem::temp_directory_path() / ("sandlet-auth-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string file = (dir / "config.json").string();
  {
    std::ofstream f(file);
    // "alice:s3cret" in base64.
    f << R"({"auths": {"127.0.0.1:5000": {"auth": "YWxpY2U6czNjcmV0"}, "https://x.io/v1/": {"username": "u", "password": "p"}}})";
  }
  registry::RegistryConfig c;
  c.auth_file = file;
  auto creds = registry::find_credentials(c, "127.0.0.1:5000");
  REQUIRE(creds);
  CHECK(creds->username == "alice");
  CHECK(creds->password == "s3cret");
  creds = registry::find_credentials(c, "x.io");
  REQUIRE(creds);
  CHECK(creds->username == "u");
  CHECK_FALSE(registry::find_credentials(c, "other.io"));
  {
    std::ofstream f(file);
    f << R"({"auths": {"a.io": {"auth": "bm8tY29sb24="}}})";  // "no-colon"
  }
  CHECK_THROWS_WITH(registry::find_credentials(c, "a.io"), Catch::Contains("not base64 of user:password"));
  std::filesystem::remove_all(dir);
}

TEST_CASE("URLs of realms and redirects", "[registry]") {
  auto u = registry::parse_url("https://auth.example:8443/token?x=1");
  REQUIRE(u);
  CHECK(u->tls);
  CHECK(u->host == "auth.example");
  CHECK(u->port == 8443);
  CHECK(u->target == "/token?x=1");
  u = registry::parse_url("http://[::1]/v2/");
  REQUIRE(u);
  CHECK(u->host == "::1");
  CHECK(u->port == 80);
  CHECK_FALSE(registry::parse_url("ftp://x/"));
  CHECK_FALSE(registry::parse_url("https://user@x/"));
  CHECK_FALSE(registry::parse_url("https://x:99999/"));
}

TEST_CASE("environment names may be registry references", "[registry]") {
  image::check_env_name("ghcr.io/org/python-3-13:tag", "name");
  image::check_env_name("127.0.0.1:5000/a/b@sha256:" + std::string(64, 'c'), "name");
  image::check_env_name("plain", "name");
  CHECK_THROWS_WITH(image::check_env_name("a/../b", "name"), Catch::Contains("bad component"));
  CHECK_THROWS_WITH(image::check_env_name("/abs", "name"), Catch::Contains("name component"));
  CHECK_THROWS_WITH(image::check_env_name("a@sha256:xyz", "name"), Catch::Contains("64 hex"));
  CHECK_THROWS_WITH(image::check_env_name("Team/Env", "name"), Catch::Contains("image reference"));
  CHECK(image::env_file_name("x.io/a/b@sha256:00") == "x.io%2Fa%2Fb%40sha256:00");
  CHECK(image::split_env_version("name@3") == std::make_pair(std::string("name"), 3L));
  const std::string d = "a.io/b@sha256:" + std::string(64, 'e');
  CHECK(image::split_env_version(d) == std::make_pair(d, -1L));
  CHECK(image::split_env_version(d + "@2") == std::make_pair(d, 2L));
}

TEST_CASE("an index gives the entry of the platform asked for", "[registry]") {
  const std::string d1 = "sha256:" + std::string(64, '1'), d2 = "sha256:" + std::string(64, '2');
  const std::string index = R"({"schemaVersion": 2, "manifests": [
      {"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": ")" + d1 + R"(", "size": 10,
       "platform": {"os": "linux", "architecture": "amd64"}},
      {"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": ")" + d2 + R"(", "size": 11,
       "platform": {"os": "linux", "architecture": "arm64", "variant": "v8"}}]})";
  CHECK(image::pick_platform(index, "linux/amd64", "idx").digest == d1);
  CHECK(image::pick_platform(index, "linux/arm64", "idx").digest == d2);
  CHECK(image::pick_platform(index, "linux/arm64/v8", "idx").digest == d2);
  CHECK_THROWS_WITH(image::pick_platform(index, "linux/s390x", "idx"),
                    Catch::Contains("linux/amd64, linux/arm64/v8"));
}
