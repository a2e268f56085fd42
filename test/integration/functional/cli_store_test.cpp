// The CLI's remote-store commands (`sandlet layer push`, `layer pull`, `loader status`) as a user drives
// them. Cases tagged [store-impl] need push, pull and the loader's status built (runtime/store_ops.cpp
// answers UNIMPLEMENTED until then): the default `integration` run leaves them out and the ctest entry
// `integration-store-impl` (disabled until then) runs them. The others hold against the stubs too.
#include "integration/functional/cli_support.hpp"

using cli_test::cli;
using cli_test::contains;
using cli_test::Input;

namespace {

// Runs the CLI with $SANDLET_STORE set to `store` ("" counts as unset). The test process's own variable is
// removed first (no_inherited_store), as the child's getenv would find an inherited entry before this one.
cli_test::CliResult cli_store(Harness& h, const std::vector<std::string>& args, const std::string& store = {}) {
  Input in;
  in.env.push_back("SANDLET_STORE=" + store);
  return cli(h, args, in);
}

// Called before a Harness (and its threads) exists: unsetenv must not race a getenv.
void no_inherited_store() { ::unsetenv("SANDLET_STORE"); }

}  // namespace

TEST_CASE("cli: layer push/pull and loader usage errors exit 2 and say what is wrong", "[cli][store]") {
  no_inherited_store();
  Harness h;
  for (const char* sub : {"push", "pull"}) {
    INFO("layer " << sub);
    auto r = cli_store(h, {"layer", sub, "--store", "/srv/store"});
    CHECK(r.status == 2);
    CHECK(contains(r.err, "requires a layer REF"));
    CHECK(contains(r.err, "See 'sandlet layer " + std::string(sub) + " --help'"));
    r = cli_store(h, {"layer", sub, "a", "b", "--store", "/srv/store"});
    CHECK(r.status == 2);
    CHECK(contains(r.err, "unexpected argument 'b'"));
    r = cli_store(h, {"layer", sub, "some-layer", "--frob"});
    CHECK(r.status == 2);
    CHECK(contains(r.err, "unknown option '--frob'"));
    r = cli_store(h, {"layer", sub, "some-layer", "--store"});
    CHECK(r.status == 2);
    CHECK(contains(r.err, "requires a value"));
    // --store given empty, and no store at all: said in the CLI's words.
    r = cli_store(h, {"layer", sub, "some-layer", "--store="});
    CHECK(r.status == 2);
    CHECK(contains(r.err, "--store requires a URL"));
    r = cli_store(h, {"layer", sub, "some-layer"});
    CHECK(r.status == 2);
    CHECK(contains(r.err, "no store: pass --store URL or set SANDLET_STORE"));
    CHECK(r.out.empty());
    // A SCHEME:// reference it does not take is said to be one, before (and whether or not) a store is given.
    for (const std::string store : {"", "/srv/store"}) {
      r = cli_store(h, {"layer", sub, "oci://example/busybox:latest"}, store);
      CHECK(r.status == 2);
      CHECK(contains(r.err, "'oci://example/busybox:latest' is not a layer REF"));
      CHECK(contains(r.err, "takes no oci:// reference"));
      CHECK(!contains(r.err, "no store"));
    }
    r = cli_store(h, {"layer", sub, "--help"});
    CHECK(r.status == 0);
    CHECK(contains(r.out, "--store URL"));
    CHECK(contains(r.out, "$SANDLET_STORE"));
  }
  CHECK(contains(cli_store(h, {"layer", "pull", "--help"}).out, "--lazy"));
  auto r = cli_store(h, {"layer", "push", "some-layer", "--lazy", "--store", "/srv/store"});  // pull's flag only
  CHECK(r.status == 2);
  CHECK(contains(r.err, "unknown option '--lazy'"));

  r = cli_store(h, {"loader"});
  CHECK(r.status == 2);
  CHECK(contains(r.err, "status"));
  r = cli_store(h, {"loader", "frob"});
  CHECK(r.status == 2);
  CHECK(contains(r.err, "unknown command 'frob'"));
  r = cli_store(h, {"loader", "status", "extra"});
  CHECK(r.status == 2);
  CHECK(contains(r.err, "unexpected argument 'extra'"));
  r = cli_store(h, {"loader", "status", "--frob"});
  CHECK(r.status == 2);
  CHECK(cli_store(h, {"loader", "status", "--help"}).status == 0);

  // The usage texts name the commands and the variable.
  r = cli_store(h, {"--help"});
  CHECK(contains(r.out, "loader"));
  CHECK(contains(r.out, "SANDLET_STORE"));
  r = cli_store(h, {"layer", "--help"});
  CHECK(contains(r.out, "push"));
  CHECK(contains(r.out, "pull"));
  CHECK(contains(r.out, "$SANDLET_STORE"));
  h.check_no_leaks();
}

TEST_CASE("cli: $SANDLET_STORE is the default store", "[cli][store]") {
  no_inherited_store();
  Harness h;
  // With the variable set the CLI goes on to the library (whatever it then answers, it is not "no store").
  auto r = cli_store(h, {"layer", "pull", "some-layer"}, "file:///nonexistent-sandlet-store");
  CHECK_FALSE(contains(r.err, "no store"));
  CHECK(r.status != 0);  // nothing is there to pull
  h.check_no_leaks();
}

TEST_CASE("cli: a store URL the client cannot use is a usage error naming it", "[cli][store][store-impl]") {
  no_inherited_store();
  Harness h;
  for (const char* url : {"ftp://example.invalid/layers", "s3://", "http://"}) {
    for (const char* sub : {"push", "pull"}) {
      INFO(sub << " --store " << url);
      auto r = cli_store(h, {"layer", sub, "some-layer", "--store", url});
      CHECK(r.status == 2);  // INVALID_ARGUMENT
      CHECK(contains(r.err, "sandlet: "));
      CHECK(r.out.empty());
    }
  }
  auto r = cli_store(h, {"layer", "pull", "some-layer"}, "ftp://example.invalid/env");
  CHECK(r.status == 2);
  h.check_no_leaks();
}

TEST_CASE("cli: loader status --json parses and has the documented fields", "[cli][store][store-impl]") {
  Harness h;
  auto r = cli(h, {"loader", "status", "--json"});
  REQUIRE(r.status == 0);
  const boost::json::value v = cli_test::parse_json(r.out);
  REQUIRE(v.is_object());
  for (const char* key : {"running", "pid", "fetcher_pid", "started", "settings", "cache", "layers"})
    CHECK(v.as_object().contains(key));
  CHECK(v.at("running").is_bool());
  CHECK(v.at("layers").is_array());
  for (const char* key : {"dir", "bytes", "max_bytes", "blobs"}) CHECK(v.at("cache").as_object().contains(key));
  for (const char* key : {"cache_max_bytes", "fetch_unit", "fetch_concurrency", "fill_timeout_ms"})
    CHECK(v.at("settings").as_object().contains(key));
  // A fresh root: no loader runs (status starts none), no lazy layer.
  CHECK_FALSE(v.at("running").as_bool());
  CHECK(v.at("layers").as_array().empty());
  r = cli(h, {"loader", "status"});
  CHECK(r.status == 0);
  CHECK(contains(r.out, "loader: not running"));
  CHECK(contains(r.out, "cache: "));
  h.check_no_leaks();
}

TEST_CASE("cli: push to a directory store and pull back, eager and lazy", "[cli][store][store-impl]") {
  Harness h, other;
  const std::string store = h.root() + "/remote-store";
  auto r = cli(h, {"layer", "import", SANDLET_TEST_ROOTFS, "--name", "busybox"});
  REQUIRE(r.status == 0);
  const std::string digest = r.out.substr(0, r.out.find('\n'));
  r = cli(h, {"layer", "push", "busybox", "--store", store});
  REQUIRE(r.status == 0);
  CHECK(r.out.rfind(digest + "\n", 0) == 0);
  CHECK(contains(r.out, "pushed to "));
  r = cli(h, {"layer", "push", "busybox", "--store", store, "--json"});
  REQUIRE(r.status == 0);
  CHECK("sha256:" + cli_test::str(cli_test::parse_json(r.out), "digest") == digest);  // JSON: bare hex

  r = cli(other, {"layer", "pull", digest, "--store", "file://" + store});
  REQUIRE(r.status == 0);
  CHECK(r.out.rfind(digest + "\n", 0) == 0);
  CHECK(contains(r.out, "complete: fetched "));
  Harness lazy_root;
  r = cli(lazy_root, {"layer", "pull", "busybox", "--store", store, "--lazy", "--json"});
  REQUIRE(r.status == 0);
  const boost::json::value pulled = cli_test::parse_json(r.out);
  CHECK("sha256:" + cli_test::str(pulled, "digest") == digest);
  CHECK(pulled.at("lazy").is_bool());
  // The CLI that starts the loader (its create) exits; the sandbox reads through the loader all the same.
  r = cli(lazy_root, {"create", "--layer", "busybox"});
  REQUIRE(r.status == 0);
  const std::string id = r.out.substr(0, r.out.find('\n'));
  r = cli(lazy_root, {"exec", id, "--", "sh", "-c", "wc -c < /bin/busybox"});
  CHECK(r.out == std::to_string(fs::file_size(std::string(SANDLET_TEST_ROOTFS) + "/bin/busybox")) + "\n");
  CHECK(cli(lazy_root, {"rm", id}).status == 0);
  CHECK(cli(lazy_root, {"gc"}).status == 0);  // stops the loader: nothing uses it

  // An environment goes by its name, with its layers, and comes back as a version of it.
  REQUIRE(cli(h, {"env", "create", "bb-env", "--layer", "busybox", "--env", "FOO=bar"}).status == 0);
  r = cli(h, {"layer", "push", "bb-env", "--store", store});
  REQUIRE(r.status == 0);
  CHECK(contains(r.out, "environment bb-env version 1"));
  r = cli(other, {"layer", "pull", "bb-env", "--store", store});
  REQUIRE(r.status == 0);
  CHECK(contains(r.out, "environment bb-env version 1"));
  r = cli(other, {"run", "--environment", "bb-env", "--", "sh", "-c", "echo $FOO"});
  CHECK(r.out == "bar\n");
  r = cli(other, {"layer", "pull", "no-such-env", "--store", store});
  CHECK(r.status != 0);
  CHECK(contains(r.err, "no-such-env"));
  h.check_no_leaks();
}
