// Snapshots, restore and fork through the public API: what a child sees is exactly the parent's files at the
// snapshot, field by field; children diverge independently; incremental snapshots carry only the change.
#include <boost/json.hpp>
#include <set>

#include "integration/harness.hpp"

namespace {

boost::json::object parse(const std::string& s) { return boost::json::parse(s).as_object(); }

std::string layer_digest_of(const std::string& snapshot_json) {
  return std::string(parse(snapshot_json).at("layer").as_object().at("digest").as_string());
}

// Imports the busybox test root as a store layer (restores then stack store layers only).
std::string import_busybox(sandlet::Runtime& rt) {
  char* out = nullptr;
  sandlet::detail::check(sandlet_layer_import(rt.get(), SANDLET_TEST_ROOTFS, nullptr, &out));
  std::string json = sandlet::detail::take_string(out);
  auto layers = boost::json::parse(json).as_object().at("layers").as_array();
  return std::string(layers.at(0).as_object().at("digest").as_string());
}

sandlet::Sandbox restore(sandlet::Runtime& rt, const std::string& digest) {
  return rt.create(sandlet::Spec().layer(digest));
}

// A listing of every entry below /data with its type, mode, owner, and for non-directories size, link count,
// mtime (a snapshot keeps them), target or content hash; names sorted. (A directory's size and link count are
// the filesystem's own: they differ between a tmpfs upper and a stacked layer.)
const char* kListing =
    "cd /data && find . | sort | while read -r p; do "
    "  if [ -d \"$p\" ]; then s=$(stat -c '%F %a %u:%g' \"$p\"); else s=$(stat -c '%F %a %u:%g %s %h %Y' \"$p\"); fi; "
    "  if [ -L \"$p\" ]; then t=$(readlink \"$p\"); elif [ -f \"$p\" ]; then t=$(md5sum < \"$p\"); else t=-; fi; "
    "  echo \"$p|$s|$t\"; done";

}  // namespace

TEST_CASE("a restored snapshot shows the parent's files field by field", "[snapshot]") {
  Harness h;
  const std::string base = import_busybox(h.rt());
  sandlet::Sandbox parent = restore(h.rt(), base);

  // Deletions, renames, modes, owners, hard links, symlinks, a sparse file, a fifo, an opaque directory.
  run_out(parent,
          "mkdir -p /data/a/b /data/gone /data/keep && echo one > /data/a/b/f && echo two > /data/gone/g && "
          "echo k > /data/keep/k && chmod 640 /data/a/b/f && chown 1234:5678 /data/a/b/f && "
          "ln /data/a/b/f /data/hard && ln -s a/b/f /data/sym && mkfifo /data/fifo && "
          "dd if=/dev/zero of=/data/sparse bs=1 count=1 seek=10000000 2>/dev/null && "
          "printf 'x%.0s' $(seq 1 5000) > /data/big && chmod 4755 /data/big && touch -d @1000000000 /data/big");
  std::string first = parent.snapshot();
  INFO(first);
  // Changes after a snapshot: deletions of what it holds, a directory removed and made again, a rename.
  run_out(parent,
          "rm /etc/hostname 2>/dev/null; rm -rf /data/gone && mkdir /data/gone && echo new > /data/gone/n && "
          "mv /data/keep /data/kept && rm /data/sym && echo changed >> /data/a/b/f && rm /bin/true");
  std::string second = parent.snapshot();
  INFO(second);
  auto snap = parse(second);
  CHECK(snap.at("frozen_ns").as_int64() > 0);
  const std::string digest = layer_digest_of(second);
  auto layer = snap.at("layer").as_object();
  CHECK(layer.at("role").as_string() == "diff");
  // Incremental: stacked on the first snapshot, which is stacked on the base.
  auto stack = layer.at("stack").as_array();
  REQUIRE(stack.size() == 2);
  CHECK(stack[0].as_string() == base);
  CHECK(stack[1].as_string() == layer_digest_of(first));

  sandlet::Sandbox child = restore(h.rt(), digest);
  CHECK(run_out(child, kListing) == run_out(parent, kListing));
  CHECK(run_out(child, "ls /bin/true 2>&1 || echo absent").find("absent") != std::string::npos);
  CHECK(run_out(child, "cat /data/gone/n; ls /data/gone") == "new\nn\n");
  CHECK(run_out(child, "stat -c %u:%g:%a /data/a/b/f; cat /data/hard") == "1234:5678:640\none\nchanged\n");
  CHECK(run_out(child, "stat -c %h /data/hard /data/a/b/f") == "2\n2\n");
  // The 10 MB sparse file took a few KiB of the store, not its size.
  CHECK(parse(first).at("layer").as_object().at("stored_bytes").as_int64() < (1 << 20));
  CHECK(run_out(child, "stat -c %a:%Y /data/big") == "4755:1000000000\n");
  CHECK(run_out(child, "[ -p /data/fifo ] && echo fifo") == "fifo\n");
  parent.destroy();
  child.destroy();
  h.check_no_leaks();
}

TEST_CASE("fork children see the parent's step and then diverge independently", "[snapshot][fork]") {
  Harness h;
  const std::string base = import_busybox(h.rt());
  sandlet::Spec spec = sandlet::Spec().layer(base).label("task", "t1").hostname("agent");
  sandlet::Sandbox parent = h.rt().create(spec);
  run_out(parent, "mkdir /work && echo step-k > /work/state && echo 42 > /work/seed-file");

  sandlet::ForkOptions fo;
  fo.n = 4;
  fo.labels = {{"branch", "b"}};
  sandlet::ForkResult forked = parent.fork(fo);
  REQUIRE(forked.children.size() == 4);
  const std::string digest = layer_digest_of(forked.snapshot_json);
  std::set<std::string> seeds, ids, machine_ids;
  for (size_t i = 0; i < 4; ++i) {
    INFO(forked.errors[i]);
    REQUIRE(forked.children[i].valid());
    sandlet::Sandbox& c = forked.children[i];
    CHECK(run_out(c, "cat /work/state") == "step-k\n");
    CHECK(run_out(c, "hostname") == "agent-" + std::to_string(i) + "\n");
    seeds.insert(run_out(c, "echo $SANDLET_SEED"));
    machine_ids.insert(run_out(c, "cat /etc/machine-id"));
    auto info = parse(c.info_json());
    ids.insert(std::string(info.at("id").as_string()));
    auto labels = info.at("spec").as_object().at("labels").as_object();
    CHECK(labels.at("task").as_string() == "t1");
    CHECK(labels.at("branch").as_string() == "b");
    CHECK(labels.at("sandlet.parent").as_string() == parent.id());
    CHECK(labels.at("sandlet.snapshot").as_string() == digest);
    CHECK(labels.at("sandlet.fork_index").as_string() == std::to_string(i));
  }
  CHECK(seeds.size() == 4);
  CHECK(machine_ids.size() == 4);
  CHECK(ids.size() == 4);
  // Each child writes, deletes and renames; nobody else sees it.
  for (size_t i = 0; i < 4; ++i)
    run_out(forked.children[i], "echo " + std::to_string(i) + " > /work/mine && rm /work/seed-file && mv /work/state /work/s" +
                                    std::to_string(i));
  run_out(parent, "echo parent > /work/after");
  for (size_t i = 0; i < 4; ++i) {
    CHECK(run_out(forked.children[i], "cat /work/mine; ls /work") ==
          std::to_string(i) + "\nmine\ns" + std::to_string(i) + "\n");
  }
  CHECK(run_out(parent, "ls /work") == "after\nseed-file\nstate\n");
  for (auto& c : forked.children) c.destroy();
  parent.destroy();
  h.check_no_leaks();
}

TEST_CASE("incremental snapshots are proportional to the change; excluded paths are absent", "[snapshot]") {
  Harness h;
  const std::string base = import_busybox(h.rt());
  sandlet::Sandbox sb = restore(h.rt(), base);
  run_out(sb, "mkdir /big && dd if=/dev/urandom of=/big/blob bs=1M count=8 2>/dev/null && mkdir -p /work/cache && "
              "echo junk > /work/cache/x && echo keep > /work/keep && echo tmp > /tmp/residue");
  sandlet::SnapshotOptions so;
  so.exclude = {"/work/cache"};
  auto first = parse(sb.snapshot(so));
  CHECK(first.at("bytes").as_int64() >= 8 << 20);
  run_out(sb, "echo small > /work/small");
  auto second = parse(sb.snapshot(so));
  CHECK(second.at("bytes").as_int64() < 4096);  // the 8 MiB blob is not packed again
  sandlet::Sandbox child = restore(h.rt(), std::string(second.at("layer").as_object().at("digest").as_string()));
  CHECK(run_out(child, "cat /work/keep /work/small; md5sum < /big/blob") ==
        "keep\nsmall\n" + run_out(sb, "md5sum < /big/blob"));
  CHECK(run_out(child, "ls /work/cache 2>&1 || echo absent").find("absent") != std::string::npos);
  CHECK(run_out(child, "ls /tmp/residue 2>&1 || echo absent").find("absent") != std::string::npos);  // default exclude
  sb.destroy();
  child.destroy();
  h.check_no_leaks();
}
