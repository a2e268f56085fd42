// `sandlet build` with a network (docs/BUILD.md, "Network"), in the fake uplink of gateway_world.hpp: a RUN
// that connects to a server behind the uplink fails without a policy and succeeds with one that allows it;
// RUN --network=none in the same build cannot connect; a RUN's cache key holds its network; a sandbox of
// the result has no network and keeps the image's resolv.conf. Also the CLI's --allow / --dns / --network.
#include <boost/json.hpp>

#include "integration/functional/cli_support.hpp"
#include "integration/security/gateway_world.hpp"

using namespace gateway_world;

namespace {

namespace json = boost::json;

// The server behind the uplink (its routed, not its own, addresses: gateway_world.hpp).
constexpr const char* kAllow = R"({"allow": ["tcp:198.19.0.1:443"]})";
// The same reach plus a resolver: the init writes /etc/resolv.conf in the step.
constexpr const char* kAllowDns = R"({"allow": ["tcp:198.19.0.1:443"], "dns": ["198.19.0.1"]})";

const char* kRecipe =
    "FROM busybox\n"
    "COPY net-probe /usr/local/bin/net-probe\n"
    "RUN /usr/local/bin/net-probe tcp 198.19.0.1 443 > /reached && grep -q '^OK tcp-echo' /reached\n"
    "RUN --network=none /usr/local/bin/net-probe tcp 198.19.0.1 443 > /isolated && grep -q '^ERR' /isolated\n";

// The uplink first (the runtime reads $SANDLET_NET_UPLINK_NETNS when it opens), then a root with the
// busybox layer and a context holding the probe and the recipe.
struct NetBuild {
  FakeUplink up;
  UplinkEnv env{up};
  Harness h;
  std::string ctx = h.root() + "/ctx";
  std::string recipe = ctx + "/Dockerfile";
  NetBuild() {
    sandlet::LayerImportOptions o;
    o.name = "busybox";
    h.rt().layer_import(SANDLET_TEST_ROOTFS, o);
    fs::create_directories(ctx);
    fs::copy_file(SANDLET_NET_PROBE, ctx + "/net-probe");
    { std::ofstream(recipe) << kRecipe; }
  }
  json::value build(const std::string& network, const std::string& tag = "") {
    sandlet::BuildOptions o;
    o.network = network;
    o.tag = tag;
    return json::parse(h.rt().build(recipe, ctx, o));
  }
  size_t layers() { return json::parse(h.rt().layer_list()).as_array().size(); }
};

std::string sh(sandlet::Sandbox& sb, const std::string& cmd) {
  auto r = sb.exec({"sh", "-c", cmd});
  INFO(r.stderr_data);
  return r.stdout_data;
}

bool cached(const json::value& r, size_t i) { return r.at("steps").as_array().at(i).at("cached").as_bool(); }

}  // namespace

TEST_CASE("build network: a RUN reaches a server only when the build allows it", "[build][network][gateway]") {
  if (!have_tools()) return;
  NetBuild b;
  const size_t layers = b.layers();
  try {
    b.build("");
    FAIL("the build reached the server without a policy");
  } catch (const sandlet::Error& e) {
    const std::string msg = e.what();
    INFO(msg);
    CHECK(e.code() == SANDLET_ABORTED);
    CHECK(msg.find("step 3/4 (" + b.recipe + ":3 RUN /usr/local/bin/net-probe") == 0);
    CHECK(msg.find("the step ran with network \"none\": the build was given no network policy") != std::string::npos);
  }
  CHECK(b.layers() == layers);  // the COPY's layer went with the failed build

  const json::value r = b.build(kAllow, "fetched");
  INFO(json::serialize(r));
  CHECK(r.at("environment").as_string() == "fetched@1");
  CHECK(r.at("sandboxes").as_int64() == 3);
  {
    // The result holds what the steps saw; a sandbox of it has no network (the environment stores none).
    sandlet::Sandbox sb = b.h.rt().create(sandlet::Spec().environment("fetched"));
    CHECK(sh(sb, "cat /reached") == "OK tcp-echo\n");
    CHECK(sh(sb, "cut -d' ' -f1 /isolated") == "ERR\n");
    CHECK(sh(sb, "/usr/local/bin/net-probe tcp 198.19.0.1 443 | cut -d' ' -f1") == "ERR\n");
    sb.destroy();
  }
  expect_clean_end(b.h);
}

TEST_CASE("build network: a RUN's cache key holds the network it ran with", "[build][network][gateway]") {
  if (!have_tools()) return;
  NetBuild b;
  const json::value first = b.build(kAllow);
  CHECK(first.at("cached_steps").as_int64() == 0);
  // The same policy: every step is a hit, no sandbox.
  const json::value same = b.build(kAllow);
  CHECK(same.at("sandboxes").as_int64() == 0);
  CHECK(cached(same, 1));
  CHECK(cached(same, 2));
  CHECK(cached(same, 3));
  // Another policy: the COPY is a hit (no network in its key), the RUN that had the policy is a miss.
  const json::value other = b.build(kAllowDns, "other");
  INFO(json::serialize(other));
  CHECK(cached(other, 1));
  CHECK_FALSE(cached(other, 2));
  CHECK(other.at("sandboxes").as_int64() >= 1);
  {
    // The resolver the init wrote for the step's policy is not in the layer: the image's (empty) one is.
    sandlet::Sandbox sb = b.h.rt().create(sandlet::Spec().environment("other"));
    CHECK(sh(sb, "cat /reached") == "OK tcp-echo\n");
    CHECK(sh(sb, "wc -c < /etc/resolv.conf") == "0\n");
    sb.destroy();
  }
  // Without a policy the RUN that needs one is a miss too (and fails), not the first build's layer.
  CHECK_THROWS_AS(b.build(""), sandlet::Error);
  expect_clean_end(b.h);
}

TEST_CASE("build network: the CLI's --allow, --dns and --network", "[build][network][gateway][cli]") {
  if (!have_tools()) return;
  NetBuild b;
  using cli_test::cli;
  using cli_test::contains;
  const auto ok = cli(b.h, {"build", "-q", "-t", "viacli", "--allow", "tcp:198.19.0.1:443", b.ctx});
  INFO(ok.err);
  CHECK(ok.status == 0);
  CHECK(ok.out == "viacli@1\n");
  const auto none = cli(b.h, {"build", "-q", "--network", "none", "--no-cache", b.ctx});
  CHECK(none.status == 1);
  CHECK(contains(none.err, "the build was given no network policy"));
  const auto json_policy = cli(b.h, {"build", "-q", "--network", kAllow, b.ctx});
  CHECK(json_policy.status == 0);
  const auto bad = cli(b.h, {"build", "-q", "--allow", "tcp:10.0.0.1/33:443", b.ctx});
  CHECK(bad.status == 2);
  CHECK(contains(bad.err, "invalid spec field 'network.allow[0]'"));
  const auto byname = cli(b.h, {"build", "-q", "--allow", "tcp:pkgs.internal:443", b.ctx});
  CHECK(byname.status == 2);
  CHECK(contains(byname.err, "needs resolvers in \"network.dns\""));
  CHECK(cli(b.h, {"build", "--allow", "198.19.0.1", "--network", "none", b.ctx}).status == 2);
  CHECK(cli(b.h, {"build", "--dns", "198.19.0.1", b.ctx}).status == 2);
  CHECK(contains(cli(b.h, {"build", "--help"}).out, "--allow RULE"));
  expect_clean_end(b.h);
}
