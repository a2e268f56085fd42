// A lazy store layer as a microVM's disk (docs/backends/microvm.md): tagged [microvm]; SKIPs where the
// microvm backend or fanotify pre-content events are missing.
#include "integration/functional/lazy_support.hpp"

using namespace lazy_support;

// A lazy layer as a microVM's disk: QEMU reads the loader's cache files (fetched on its first reads through
// the same pre-content events), the guest sees the source's bytes, and the layer is detached from the
// loader once no sandbox uses it. Skipped where the microvm backend or pre-content events are missing.
TEST_CASE("lazy: a lazy layer boots a microVM, whose reads fetch it, and is detached after", "[microvm][lazy-microvm]") {
  if (!precontent_missing().empty()) {
    WARN("SANDLET-SKIP: " << precontent_missing());
    return;
  }
  LazyFixture fx;
  bool microvm = false;
  for (auto& b : fx.node.backends())
    if (b.name == "microvm") microvm = b.available;
  if (!microvm) {
    WARN("SANDLET-SKIP: the microvm backend is unavailable here");
    return;
  }
  std::string tree = fx.tmp + "/tree";
  make_tree(tree, 24, 300 * 1024);
  std::string digest = fx.publish(tree, "lazy-vm-tree");
  std::string expect = host_sh(std::string("cd ") + tree + "/data && sha256sum * | sha256sum");
  auto pulled = parse(fx.node.layer_pull("lazy-vm-tree", fx.store, /*lazy=*/true));
  REQUIRE(pulled.at("lazy").as_bool());
  {
    auto sb = fx.node.create(sandlet::Spec().backend("microvm").layer(digest));
    CHECK(run_out(sb, kSums) == expect);
    const json::object layer = fx.layer_status(digest);
    REQUIRE(!layer.empty());
    CHECK(u64(layer.at("fetched_bytes")) > 0);
    CHECK(fs::exists(fx.node_root + "/layers/mounts/" + digest + ".images"));
    CHECK_FALSE(fs::exists(fx.node_root + "/layers/mounts/" + digest + "/bin"));  // nothing mounted on the host
    sb.destroy();
  }
  // Unused now (the runtime's pool key keeps its last layers until a gc, as for mounted ones): a gc detaches
  // it from the loader and drops the marker.
  fx.node.gc();
  CHECK(wait_until([&] {
    const json::object l = fx.layer_status(digest);
    return l.empty() || !l.contains("attached") || !l.at("attached").as_bool();
  }, 10));
  CHECK_FALSE(fs::exists(fx.node_root + "/layers/mounts/" + digest + ".images"));
}
