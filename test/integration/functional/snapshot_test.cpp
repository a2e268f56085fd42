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
              "echo junk > /work/cache/x && echo keep > /work/keep && echo tmp > /tmp/residue; "
              "sleep 0.1");  // older than a clock tick: an unchanged file is not packed again
  sandlet::SnapshotOptions so;
  so.exclude = {"/work/cache"};
  auto first = parse(sb.snapshot(so));
  CHECK(first.at("bytes").as_int64() >= 8 << 20);
  run_out(sb, "echo small > /work/small; sleep 0.1");
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

TEST_CASE("64 forks of one sandbox at once all start from its state", "[snapshot][fork]") {
  Harness h;
  const std::string base = import_busybox(h.rt());
  sandlet::Sandbox parent = restore(h.rt(), base);
  run_out(parent, "echo k > /state");
  sandlet::ForkOptions fo;
  fo.n = 64;
  sandlet::ForkResult forked = parent.fork(fo);
  REQUIRE(forked.children.size() == 64);
  for (size_t i = 0; i < 64; ++i) {
    INFO(i << ": " << forked.errors[i]);
    REQUIRE(forked.children[i].valid());
    CHECK(run_out(forked.children[i], "cat /state") == "k\n");
  }
  for (auto& c : forked.children) c.destroy();
  parent.destroy();
  h.check_no_leaks();
}

TEST_CASE("a snapshot taken while processes write is consistent: no torn record", "[snapshot][fork]") {
  Harness h;
  const std::string base = import_busybox(h.rt());
  sandlet::Sandbox parent = restore(h.rt(), base);
  // Two writers append records "<n> <md5 of n>" (one write(2) each) to two files as fast as they can.
  sandlet::ExecOptions bg({"sh", "-c",
                           "for f in a b; do (i=0; while :; do i=$((i+1)); echo \"$i $(echo $i | md5sum | cut -c1-32)\" >> /log.$f; done) & done"});
  bg.keep_background = true;
  REQUIRE(parent.exec(bg).exit_code == 0);
  REQUIRE(wait_until([&] { return std::stoi(run_out(parent, "cat /log.a /log.b 2>/dev/null | wc -l")) > 10; }, 10));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  sandlet::ForkOptions fo;
  fo.n = 3;
  sandlet::ForkResult forked = parent.fork(fo);
  const char* verify =
      "for f in /log.a /log.b; do n=0; while read -r i sum; do n=$((n+1)); "
      "[ \"$i\" = \"$n\" ] || { echo \"$f: record $n says $i\"; exit 1; }; "
      "[ \"$(echo $i | md5sum | cut -c1-32)\" = \"$sum\" ] || { echo \"$f: torn record $n\"; exit 1; }; "
      "done < $f; [ $n -gt 0 ] || { echo \"$f: empty\"; exit 1; }; done; echo ok";
  for (size_t i = 0; i < 3; ++i) {
    INFO(forked.errors[i]);
    REQUIRE(forked.children[i].valid());
    CHECK(run_out(forked.children[i], verify) == "ok\n");
    // Files are forked, processes are not: the writers run only in the parent (the child's logs stay still).
    CHECK(run_out(forked.children[i], "a=$(cat /log.a | wc -l); sleep 0.3; b=$(cat /log.a | wc -l); [ $a = $b ] && echo still") ==
          "still\n");
  }
  for (auto& c : forked.children) c.destroy();
  parent.destroy();
  h.check_no_leaks();
}

TEST_CASE("chains past max_depth are flattened; a paused sandbox stays paused", "[snapshot]") {
  Harness h;
  const std::string base = import_busybox(h.rt());
  sandlet::Sandbox sb = restore(h.rt(), base);
  sandlet::SnapshotOptions so;
  so.max_depth = 3;
  bool flattened = false;
  std::string last;
  for (int i = 0; i < 6; ++i) {
    run_out(sb, "echo " + std::to_string(i) + " > /f" + std::to_string(i) + (i == 2 ? " && rm /f0" : ""));
    auto r = parse(sb.snapshot(so));
    flattened = flattened || r.at("flattened").as_bool();
    CHECK(r.at("layer").as_object().at("stack").as_array().size() <= 3);  // base + at most two snapshots
    last = std::string(r.at("layer").as_object().at("digest").as_string());
  }
  CHECK(flattened);
  sandlet::Sandbox child = restore(h.rt(), last);
  CHECK(run_out(child, "ls / | grep '^f' | tr '\\n' ' '") == "f1 f2 f3 f4 f5 ");

  sb.pause();
  parse(sb.snapshot());
  auto info = parse(sb.info_json());
  CHECK(info.at("state").as_string() == "paused");
  sb.resume();
  child.destroy();
  sb.destroy();
  h.check_no_leaks();
}

TEST_CASE("snapshot and fork refuse bad input and leave nothing behind", "[snapshot][fork]") {
  Harness h;
  const std::string base = import_busybox(h.rt());
  sandlet::Sandbox sb = restore(h.rt(), base);
  auto code_of = [](const std::function<void()>& f) {
    try {
      f();
    } catch (const sandlet::Error& e) {
      return e.code();
    }
    return SANDLET_OK;
  };
  sandlet::ForkOptions zero;
  zero.n = 0;
  CHECK(code_of([&] { sb.fork(zero); }) == SANDLET_INVALID_ARGUMENT);
  sandlet::ForkOptions many;
  many.n = 1025;
  CHECK(code_of([&] { sb.fork(many); }) == SANDLET_INVALID_ARGUMENT);
  sandlet::SnapshotOptions relative;
  relative.exclude = {"tmp"};
  CHECK(code_of([&] { sb.snapshot(relative); }) == SANDLET_INVALID_ARGUMENT);
  sandlet::ForkOptions one;
  CHECK(code_of([&] { h.rt().fork_snapshot(std::string(64, 'a'), nullptr, one); }) == SANDLET_NOT_FOUND);
  CHECK(code_of([&] { h.rt().fork_snapshot(base, nullptr, one); }) == SANDLET_INVALID_ARGUMENT);  // not a snapshot
  CHECK(h.rt().list().size() == 1);
  sb.destroy();
  h.check_no_leaks();
}

TEST_CASE("a snapshot exported and imported into another root restores the same files", "[snapshot][export]") {
  Harness h;
  const std::string base = import_busybox(h.rt());
  sandlet::Sandbox sb = restore(h.rt(), base);
  run_out(sb, "mkdir -p /proj && echo v1 > /proj/a && rm /bin/true");
  const std::string digest = layer_digest_of(sb.snapshot());
  const std::string file = h.root() + "/snap.tar";
  h.rt().layer_export(digest, file);
  sb.destroy();

  Harness other;
  import_busybox(other.rt());  // the layer it goes on (the same content: the same digest)
  auto imported = boost::json::parse(other.rt().layer_import(file)).as_object();
  CHECK(imported.at("layers").as_array().at(0).as_object().at("digest").as_string() == digest);
  sandlet::Sandbox child = restore(other.rt(), digest);
  CHECK(run_out(child, "cat /proj/a; ls /bin/true 2>/dev/null || echo gone") == "v1\ngone\n");
  child.destroy();
  other.check_no_leaks();
  h.check_no_leaks();
}

TEST_CASE("what an excluding snapshot skipped is still whited out by the next fork", "[snapshot][fork]") {
  Harness h;
  const std::string base = import_busybox(h.rt());
  sandlet::Sandbox sb = restore(h.rt(), base);
  run_out(sb, "echo held > /tmp/lock");
  sandlet::ForkOptions one;
  sandlet::ForkResult first = sb.fork(one);  // packs /tmp/lock (a fork excludes nothing)
  REQUIRE(first.children[0].valid());
  CHECK(run_out(first.children[0], "cat /tmp/lock") == "held\n");
  run_out(sb, "rm /tmp/lock");
  parse(sb.snapshot());  // default excludes: /tmp is left out here
  sandlet::ForkResult second = sb.fork(one);
  REQUIRE(second.children[0].valid());
  CHECK(run_out(second.children[0], "ls /tmp/lock 2>/dev/null || echo gone") == "gone\n");
  first.children[0].destroy();
  second.children[0].destroy();
  sb.destroy();
  h.check_no_leaks();
}

TEST_CASE("a huge sparse file is refused unless excluded; a snapshot must be the lowest layer", "[snapshot]") {
  Harness h;
  const std::string base = import_busybox(h.rt());
  sandlet::Sandbox sb = h.rt().create(sandlet::Spec().layer(base).disk(64 << 20));
  run_out(sb, "truncate -s 1T /huge 2>/dev/null || dd if=/dev/zero of=/huge bs=1 count=1 seek=1099511627775 2>/dev/null; ls -l /huge");
  try {
    sb.snapshot();
    FAIL("a 1 TiB sparse file was packed");
  } catch (const sandlet::Error& e) {
    CHECK(e.code() == SANDLET_FAILED_PRECONDITION);
    CHECK(std::string(e.what()).find("/huge") != std::string::npos);
  }
  sandlet::SnapshotOptions so;
  so.exclude = {"/huge"};
  const std::string digest = layer_digest_of(sb.snapshot(so));
  try {
    h.rt().create(sandlet::Spec().layer(base).layer(base).layer(digest));  // not on [base, base]
    FAIL("a snapshot on other layers was stacked");
  } catch (const sandlet::Error& e) {
    CHECK(e.code() == SANDLET_INVALID_ARGUMENT);
    CHECK(std::string(e.what()).find("layers[2]") != std::string::npos);
  }
  sandlet::Sandbox same = h.rt().create(sandlet::Spec().layer(base).layer(digest));  // on exactly its stack
  same.destroy();
  sb.destroy();
  h.check_no_leaks();
}
