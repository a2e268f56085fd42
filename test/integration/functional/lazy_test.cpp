// Lazy layers end to end: a layer pushed to a directory store by one root, pulled lazily by another, read in
// sandboxes through the node's loader (fanotify pre-content events on the cache files), against the eager
// copy. Tagged [lazy]; SKIPs (saying why) on kernels without pre-content events.
#include "integration/functional/lazy_support.hpp"

using namespace lazy_support;

TEST_CASE("lazy pull: metadata only, reads byte-identical to the source, counted by the loader", "[lazy]") {
  if (!precontent_missing().empty()) {
    WARN("SANDLET-SKIP: " << precontent_missing());
    return;
  }
  LazyFixture fx;
  std::string tree = fx.tmp + "/tree";
  make_tree(tree, 40, 300 * 1024);
  std::string digest = fx.publish(tree, "lazy-tree");
  std::string expect = host_sh(std::string("cd ") + tree + "/data && sha256sum * | sha256sum");

  auto pulled = parse(fx.node.layer_pull("lazy-tree", fx.store, /*lazy=*/true));
  CHECK(pulled.at("lazy").as_bool());
  CHECK(std::string(pulled.at("digest").as_string()) == digest);
  uint64_t image = u64(pulled.at("image_bytes"));
  CHECK(u64(pulled.at("bytes_fetched")) < image / 4);  // metadata and chunk indexes only

  {
    auto sb = fx.node.create(sandlet::Spec().layer(digest));
    CHECK(run_out(sb, kSums) == expect);
    // A second sandbox reads from the cache (hits, no new fetches).
    auto before = fx.layer_status(digest);
    auto sb2 = fx.node.create(sandlet::Spec().layer(digest));
    CHECK(run_out(sb2, "cat /data/f1 | wc -c") == std::to_string(3000 + 977) + "\n");
    auto after = fx.layer_status(digest);
    REQUIRE(!after.empty());
    CHECK(u64(after.at("fetched_bytes")) == u64(before.at("fetched_bytes")));
    CHECK(u64(after.at("misses")) > 0);
    CHECK(u64(after.at("fetched_bytes")) <= image + image / 10);
  }
  auto st = fx.status();
  CHECK(st.at("running").as_bool());
}

namespace {

// Four sandboxes read every file of a fresh lazy layer while `kill_one(round)` kills a loader process three
// times; every reader must get the right bytes (never zeros, never EIO).
void read_storm(const std::function<bool(LazyFixture&, int)>& kill_one) {
  LazyFixture fx;
  std::string tree = fx.tmp + "/tree";
  make_tree(tree, 120, 1024 * 1024);
  std::string digest = fx.publish(tree, "storm");
  std::string expect = host_sh(std::string("cd ") + tree + "/data && sha256sum * | sha256sum");
  fx.node.layer_pull(digest, fx.store, true);
  std::vector<sandlet::Sandbox> boxes;
  for (int i = 0; i < 4; ++i) boxes.push_back(fx.node.create(sandlet::Spec().layer(digest)));
  std::vector<std::future<std::string>> readers;
  for (auto& sb : boxes) {
    sandlet::Sandbox* p = &sb;
    readers.push_back(std::async(std::launch::async, [p] {
      auto r = p->exec({"sh", "-c", kSums});
      return r.stdout_data + r.stderr_data;  // (an error names the file it could not read)
    }));
  }
  int killed = 0;
  for (int round = 0; round < 3; ++round) {
    std::this_thread::sleep_for(std::chrono::milliseconds(60));
    if (kill_one(fx, round)) ++killed;
  }
  CHECK(killed > 0);
  std::vector<std::string> got;
  for (auto& r : readers) got.push_back(r.get());
  INFO("loader log:\n" << fx.loader_log());
  for (auto& g : got) CHECK(g == expect);
  CHECK(fx.status().at("running").as_bool());
}

// Kills the process the loader's status names under `field` (pid, fetcher_pid); true if one was killed.
bool kill_named(LazyFixture& fx, const char* field) {
  auto st = fx.status();
  if (!st.at("running").as_bool()) return false;
  auto pid = st.at(field).to_number<int64_t>();
  return pid > 0 && ::kill(static_cast<pid_t>(pid), SIGKILL) == 0;
}

}  // namespace

TEST_CASE("lazy: kill -9 of the fetcher during a read storm: every reader completes with the right bytes", "[lazy]") {
  if (!precontent_missing().empty()) {
    WARN("SANDLET-SKIP: " << precontent_missing());
    return;
  }
  read_storm([](LazyFixture& fx, int) { return kill_named(fx, "fetcher_pid"); });
}

TEST_CASE("lazy: kill -9 of the holder (twice, and the fetcher between) during a read storm: a successor takes "
          "over, every reader completes with the right bytes", "[lazy]") {
  if (!precontent_missing().empty()) {
    WARN("SANDLET-SKIP: " << precontent_missing());
    return;
  }
  std::vector<int64_t> holders;
  // Each kill once the loader has recovered from the previous one (a holder and a fetcher dead at the same
  // time leave no process holding the group: see docs/LAZY.md).
  read_storm([&](LazyFixture& fx, int round) {
    auto st = fx.status();
    const char* field = round == 1 ? "fetcher_pid" : "pid";
    int64_t victim = st.at(field).to_number<int64_t>();
    if (round != 1) holders.push_back(victim);
    bool ok = kill_named(fx, field);
    // Back under a new pid, with a fetcher (the status call reconnects to a successor).
    CHECK(wait_until([&] {
      auto now = fx.status();
      return now.at("running").as_bool() && now.at(field).to_number<int64_t>() != victim &&
             now.at("fetcher_pid").to_number<int64_t>() > 0;
    }, 10));
    return ok;
  });
  CHECK(holders.size() == 2);
}

TEST_CASE("lazy: both loader processes killed while a layer stays mounted: the next create starts a loader that "
          "watches it again", "[lazy]") {
  if (!precontent_missing().empty()) {
    WARN("SANDLET-SKIP: " << precontent_missing());
    return;
  }
  LazyFixture fx;
  std::string tree = fx.tmp + "/tree";
  make_tree(tree, 24, 512 * 1024);
  std::string digest = fx.publish(tree, "both");
  std::string expect = host_sh(std::string("cd ") + tree + "/data && sha256sum * | sha256sum");
  fx.node.layer_pull(digest, fx.store, true);
  auto keeper = fx.node.create(sandlet::Spec().layer(digest));  // keeps the layer mounted
  auto st = fx.status();
  pid_t holder = static_cast<pid_t>(st.at("pid").to_number<int64_t>());
  pid_t fetcher = static_cast<pid_t>(st.at("fetcher_pid").to_number<int64_t>());
  // Stopped first, so neither can react to the other's death.
  REQUIRE(::kill(holder, SIGSTOP) == 0);
  REQUIRE(::kill(fetcher, SIGSTOP) == 0);
  ::kill(fetcher, SIGKILL);
  ::kill(holder, SIGKILL);
  // Gone for good: a process whose memory is gone (no cmdline) may still hold its sockets a moment.
  REQUIRE(wait_until([&] { return exited(holder) && exited(fetcher); }, 5));
  auto sb = fx.node.create(sandlet::Spec().layer(digest));
  INFO("loader log:\n" << fx.loader_log());
  CHECK(loader_running(fx.node_root));
  CHECK(run_out(sb, kSums) == expect);
  auto now = fx.status();
  CHECK(now.at("pid").to_number<int64_t>() != holder);
}

TEST_CASE("lazy: a corrupted chunk in the store is refused with EIO; other files and sandboxes keep working", "[lazy]") {
  if (!precontent_missing().empty()) {
    WARN("SANDLET-SKIP: " << precontent_missing());
    return;
  }
  LazyFixture fx(/*fill_timeout_ms=*/20000);
  // The busybox files go into a base layer's blob first; the tree's own blob then holds only its data files
  // (the import deduplicates the rest against the base), and only that blob is damaged below.
  fx.publish(SANDLET_TEST_ROOTFS, "corrupt-base");
  std::string tree = fx.tmp + "/tree";
  make_tree(tree, 8, 2 * 1024 * 1024);
  std::string digest = fx.publish(tree, "corrupt");
  fx.node.layer_pull(digest, fx.store, true);
  // Flip bytes all through the tree's own blob (blobs[0]: the data files).
  auto manifest = parse(slurp(fx.store + "/layers/" + digest + ".json"));
  std::string blob(manifest.at("blobs").as_array().at(0).as_string());
  std::string path = fx.store + "/blobs/" + blob;
  ::chmod(path.c_str(), 0644);
  uint64_t size = fs::file_size(path);
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    for (uint64_t off = 0; off < size; off += 512 * 1024) {
      f.seekg(static_cast<std::streamoff>(off));
      char c = 0;
      f.read(&c, 1);
      c = static_cast<char>(c ^ 0x5a);
      f.seekp(static_cast<std::streamoff>(off));
      f.write(&c, 1);
    }
  }
  auto sb = fx.node.create(sandlet::Spec().layer(digest));
  auto bad = sb.exec({"sh", "-c", "cat /data/f0 > /dev/null"});
  CHECK(bad.exit_code != 0);
  INFO("stderr: " << bad.stderr_data);
  CHECK((bad.stderr_data.find("I/O error") != std::string::npos ||
         bad.stderr_data.find("Input/output error") != std::string::npos));
  // Inline-sized and other files still read; the sandbox still runs commands.
  CHECK(run_out(sb, "echo alive") == "alive\n");
  CHECK(run_out(sb, "ls /data | wc -l") == "8\n");
  auto st = fx.layer_status(digest);
  CHECK(u64(st.at("fetch_errors")) > 0);
}

TEST_CASE("lazy: two layers sharing chunks fetch them once", "[lazy]") {
  if (!precontent_missing().empty()) {
    WARN("SANDLET-SKIP: " << precontent_missing());
    return;
  }
  LazyFixture fx;
  std::string a = fx.tmp + "/a", b = fx.tmp + "/b";
  make_tree(a, 12, 512 * 1024);
  make_tree(b, 12, 512 * 1024);
  { std::ofstream(b + "/extra") << "only in b\n"; }
  std::string da = fx.publish(a, "share-a");
  std::string db = fx.publish(b, "share-b");
  REQUIRE(da != db);
  fx.node.layer_pull(da, fx.store, true);
  fx.node.layer_pull(db, fx.store, true);
  auto sa = fx.node.create(sandlet::Spec().layer(da));
  std::string sum_a = run_out(sa, kSums);
  auto sbx = fx.node.create(sandlet::Spec().layer(db));
  CHECK(run_out(sbx, kSums) == sum_a);
  CHECK(run_out(sbx, "cat /extra") == "only in b\n");
  // b's data chunks are a's (the import deduplicated them): reading them fetched nothing new.
  auto la = fx.layer_status(da), lb = fx.layer_status(db);
  CHECK(u64(lb.at("fetched_bytes")) == u64(la.at("fetched_bytes")));
}

TEST_CASE("lazy: a bad store URL or a store without the layer fails at pull time", "[lazy]") {
  LazyFixture fx;
  CHECK_THROWS_AS(fx.node.layer_pull("nothing", "ftp://example/x", true), sandlet::Error);
  try {
    fx.node.layer_pull("nothing", fx.tmp + "/no-such-store", true);
    FAIL("pull from a missing store succeeded");
  } catch (const sandlet::Error& e) {
    CHECK((e.code() == SANDLET_NOT_FOUND || e.code() == SANDLET_UNAVAILABLE));
  }
  fs::create_directories(fx.store);
  try {
    fx.node.layer_pull("absent-name", fx.store, true);
    FAIL("pull of an absent name succeeded");
  } catch (const sandlet::Error& e) {
    CHECK(e.code() == SANDLET_NOT_FOUND);
    CHECK(std::string(e.what()).find("absent-name") != std::string::npos);
  }
}

TEST_CASE("lazy: an environment pushed by name and pulled lazily on another root: its layers lazy, its "
          "defaults kept, its sandboxes read the right bytes", "[lazy]") {
  if (!precontent_missing().empty()) {
    WARN("SANDLET-SKIP: " << precontent_missing());
    return;
  }
  LazyFixture fx;
  std::string base = fx.tmp + "/base", task = fx.tmp + "/task";
  make_tree(base, 8, 200 * 1024);
  fs::create_directories(task + "/work");
  { std::ofstream(task + "/work/answer.txt") << "forty-two\n"; }
  sandlet::LayerImportOptions io;
  io.name = "env-base";
  auto b = parse(fx.src.layer_import(base, io));
  std::string base_digest(b.at("layers").as_array().back().as_object().at("digest").as_string());
  auto t = parse(fx.src.layer_import(task, sandlet::LayerImportOptions()));
  std::string task_digest(t.at("layers").as_array().back().as_object().at("digest").as_string());
  fx.src.env_create("task-env", {base_digest, task_digest}, R"({"env":{"TASK":"t1"},"workdir":"/work"})");

  auto pushed = parse(fx.src.layer_push("task-env", fx.store));
  REQUIRE(pushed.contains("environment"));
  CHECK(pushed.at("environment").as_object().at("name").as_string() == "task-env");
  CHECK(pushed.at("layers").as_array().size() == 2);

  auto pulled = parse(fx.node.layer_pull("task-env", fx.store, /*lazy=*/true));
  CHECK(pulled.at("lazy").as_bool());
  CHECK(pulled.at("environment").as_object().at("version").to_number<int64_t>() == 1);
  // Pulled again: the same version, no new one.
  auto again = parse(fx.node.layer_pull("task-env", fx.store, true));
  CHECK(again.at("environment").as_object().at("version").to_number<int64_t>() == 1);

  auto sb = fx.node.create(sandlet::Spec().environment("task-env"));
  std::string expect = host_sh(std::string("cd ") + base + "/data && sha256sum * | sha256sum");
  CHECK(run_out(sb, kSums) == expect);
  CHECK(run_out(sb, "pwd; echo $TASK; cat answer.txt") == "/work\nt1\nforty-two\n");

  // A record that is not an environment's is refused, naming the field; nothing is created.
  { std::ofstream(fx.store + "/envs/bad-env.json") << R"({"name":"bad-env","layers":["../../etc"]})"; }
  try {
    fx.node.layer_pull("bad-env", fx.store, true);
    FAIL("a bad record was accepted");
  } catch (const sandlet::Error& e) {
    CHECK(e.code() == SANDLET_DATA_LOSS);
    CHECK(std::string(e.what()).find("layers") != std::string::npos);
  }
  CHECK(fx.node.env_list().find("bad-env") == std::string::npos);
}

TEST_CASE("lazy: metadata that is not the digest's is refused at pull, nothing committed", "[lazy]") {
  LazyFixture fx;
  std::string tree = fx.tmp + "/tree";
  make_tree(tree, 4, 100 * 1024);
  std::string digest = fx.publish(tree, "tampered");
  // Change one chunk digest in the store's chunk index: the metadata no longer verifies.
  auto manifest = parse(slurp(fx.store + "/layers/" + digest + ".json"));
  std::string blob(manifest.at("blobs").as_array().at(0).as_string());
  std::string idx = fx.store + "/blobs/" + blob + ".chunks";
  ::chmod(idx.c_str(), 0644);
  {
    std::fstream f(idx, std::ios::in | std::ios::out | std::ios::binary);
    char c = 0;
    f.read(&c, 1);
    c = static_cast<char>(c ^ 1);
    f.seekp(0);
    f.write(&c, 1);
  }
  try {
    fx.node.layer_pull(digest, fx.store, true);
    FAIL("a tampered chunk index was accepted");
  } catch (const sandlet::Error& e) {
    CHECK(e.code() == SANDLET_DATA_LOSS);
  }
  CHECK_THROWS(fx.node.layer_inspect(digest));
  CHECK(!fs::exists(fx.node_root + "/layers/meta/" + digest + ".erofs"));
}

TEST_CASE("lazy: the cache cap evicts only blobs no attached layer needs; evicted data is fetched again", "[lazy]") {
  if (!precontent_missing().empty()) {
    WARN("SANDLET-SKIP: " << precontent_missing());
    return;
  }
  LazyFixture fx(60000, /*cache_max=*/512 * 1024);
  // busybox in a base layer's blob; a and b each add a blob of their own data (their own blob is blobs[0]).
  fx.publish(SANDLET_TEST_ROOTFS, "evict-base");
  std::string a = fx.tmp + "/a", b = fx.tmp + "/b";
  make_tree(a, 8, 600 * 1024);
  make_tree(b, 1, 0);
  {
    std::ofstream f(b + "/data/other");  // 3 MiB that no chunk of it repeats
    std::string data(3 * 1024 * 1024, '\0');
    for (size_t k = 0; k < data.size(); ++k) data[k] = static_cast<char>((k * 2654435761u) >> 13);
    f << data;
  }
  std::string da = fx.publish(a, "evict-a");
  std::string db = fx.publish(b, "evict-b");
  fx.node.layer_pull(da, fx.store, true);
  fx.node.layer_pull(db, fx.store, true);
  auto own_blob = [&](const std::string& d) {
    auto m = parse(slurp(fx.node_root + "/layers/manifests/" + d + ".json"));
    return std::string(m.at("blobs").as_array().at(0).as_string());
  };
  auto cached = [&](const std::string& blob) {
    struct stat st;
    return ::stat((fx.node_root + "/layers/cache/" + blob).c_str(), &st) == 0 ? uint64_t(st.st_blocks) * 512 : 0;
  };
  std::string blob_a = own_blob(da), blob_b = own_blob(db);
  std::string expect = host_sh(std::string("cd ") + a + "/data && sha256sum * | sha256sum");
  // (The runtime keeps the environment created last mounted: b's, created after a's.)
  std::optional<sandlet::Sandbox> sa(fx.node.create(sandlet::Spec().layer(da)));
  auto sb = fx.node.create(sandlet::Spec().layer(db));
  CHECK(run_out(*sa, kSums) == expect);
  uint64_t fetched_a = u64(fx.layer_status(da).at("fetched_bytes"));
  // While a is in use, b's reads push the cache over its cap: nothing of a may go.
  run_out(sb, "cat /data/other | wc -c");
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  CHECK(cached(blob_a) >= 600 * 1024);
  CHECK(cached(blob_b) >= 1024 * 1024);
  CHECK(run_out(*sa, kSums) == expect);
  CHECK(u64(fx.layer_status(da).at("fetched_bytes")) == fetched_a);
  sa.reset();
  // a's sandbox gone: its layer is released, and the next cap check empties a's own blob; b's stays (in use).
  CHECK(wait_until([&] { return cached(blob_a) == 0; }, 15));
  CHECK(cached(blob_b) >= 1024 * 1024);
  // Evicted data comes back on demand, byte-identical.
  auto again = fx.node.create(sandlet::Spec().layer(da));
  CHECK(run_out(again, kSums) == expect);
  CHECK(u64(fx.layer_status(da).at("fetched_bytes")) > fetched_a);
}

TEST_CASE("lazy over HTTP: the store down, then up: waiting reads resume and complete", "[lazy]") {
  if (!precontent_missing().empty()) {
    WARN("SANDLET-SKIP: " << precontent_missing());
    return;
  }
  test_support::NginxServer nginx;
  if (!nginx.skip_reason().empty()) {
    WARN("SANDLET-SKIP: " << nginx.skip_reason());
    return;
  }
  test_support::FaultProxy proxy(nginx.port());
  LazyFixture fx(/*fill_timeout_ms=*/30000);
  fx.store = nginx.data_dir();  // pushed as a directory, served by nginx
  std::string tree = fx.tmp + "/tree";
  make_tree(tree, 6, 400 * 1024);
  std::string digest = fx.publish(tree, "http-tree");
  std::string expect = host_sh(std::string("cd ") + tree + "/data && sha256sum * | sha256sum");
  std::string url = "http://127.0.0.1:" + std::to_string(proxy.port());
  auto pulled = parse(fx.node.layer_pull("http-tree", url, true));
  REQUIRE(pulled.at("lazy").as_bool());
  auto sb = fx.node.create(sandlet::Spec().layer(digest));
  proxy.command("down");
  auto reading = std::async(std::launch::async, [&] { return sb.exec({"sh", "-c", kSums}); });
  CHECK(reading.wait_for(std::chrono::milliseconds(1500)) == std::future_status::timeout);  // it waits
  proxy.command("up");
  auto r = reading.get();
  CHECK(r.exit_code == 0);
  CHECK(r.stdout_data == expect);
}

TEST_CASE("lazy over S3: signed range requests; rejected credentials fail at pull time", "[lazy]") {
  if (!precontent_missing().empty()) {
    WARN("SANDLET-SKIP: " << precontent_missing());
    return;
  }
  test_support::S3Server s3;
  if (!s3.skip_reason().empty()) {
    WARN("SANDLET-SKIP: " << s3.skip_reason());
    return;
  }
  LazyFixture fx;
  std::string tree = fx.tmp + "/tree";
  make_tree(tree, 6, 300 * 1024);
  std::string expect = host_sh(std::string("cd ") + tree + "/data && sha256sum * | sha256sum");
  ::setenv("AWS_ACCESS_KEY_ID", s3.access_key().c_str(), 1);
  ::setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret", 1);
  sandlet::LayerImportOptions io;
  io.name = "s3-tree";
  auto imported = parse(fx.src.layer_import(tree, io));
  std::string digest(imported.at("layers").as_array().back().as_object().at("digest").as_string());
  try {
    fx.src.layer_push(digest, s3.url());
    FAIL("a push with a wrong secret succeeded");
  } catch (const sandlet::Error& e) {
    CHECK(e.code() == SANDLET_PERMISSION_DENIED);
  }
  ::setenv("AWS_SECRET_ACCESS_KEY", s3.secret_key().c_str(), 1);
  fx.src.layer_push(digest, s3.url());
  ::setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret", 1);
  try {
    fx.node.layer_pull("s3-tree", s3.url(), true);
    FAIL("a pull with a wrong secret succeeded");
  } catch (const sandlet::Error& e) {
    CHECK(e.code() == SANDLET_PERMISSION_DENIED);
  }
  ::setenv("AWS_SECRET_ACCESS_KEY", s3.secret_key().c_str(), 1);
  auto pulled = parse(fx.node.layer_pull("s3-tree", s3.url(), true));
  CHECK(pulled.at("lazy").as_bool());
  auto sb = fx.node.create(sandlet::Spec().layer(digest));
  CHECK(run_out(sb, kSums) == expect);
  ::unsetenv("AWS_ACCESS_KEY_ID");
  ::unsetenv("AWS_SECRET_ACCESS_KEY");
}

TEST_CASE("lazy: every file of a real Debian image reads byte-identical to the eager layer", "[lazy]") {
  if (!precontent_missing().empty()) {
    WARN("SANDLET-SKIP: " << precontent_missing());
    return;
  }
  std::string debian = host_sh(std::string(SANDLET_SOURCE_DIR) + "/scripts/debian-base.sh --print-path 2>/dev/null");
  while (!debian.empty() && debian.back() == '\n') debian.pop_back();
  if (debian.empty() || !fs::exists(debian + "/usr/bin/python3")) {
    WARN("SANDLET-SKIP: no Debian base (scripts/debian-base.sh could not build it)");
    return;
  }
  LazyFixture fx;
  std::string digest = fx.publish(debian, "debian-lazy");
  fx.node.layer_pull(digest, fx.store, true);
  // Every regular file's digest, and every symlink's target, in path order: the whole tree's identity.
  // (Not the list itself: the shell makes it while find runs, and find may or may not see it.)
  const std::string walk =
      "cd / && find . -xdev \\( -type f -o -type l \\) ! -path './proc/*' ! -path './sys/*' ! -path './dev/*' "
      "! -path './etc/hostname' ! -path './etc/hosts' ! -path './etc/resolv.conf' ! -path ./tmp/list | LC_ALL=C sort > /tmp/list && "
      "while read -r p; do if [ -L \"$p\" ]; then echo \"L $p $(readlink \"$p\")\"; else sha256sum \"$p\"; fi; "
      "done < /tmp/list | sha256sum && wc -l < /tmp/list";
  auto eager = fx.src.create(sandlet::Spec().layer(digest));
  auto lazy = fx.node.create(sandlet::Spec().layer(digest));
  std::string want = run_out(eager, walk);
  std::string got = run_out(lazy, walk);
  CHECK(got == want);
  CHECK(std::stoul(want.substr(want.find('\n') + 1)) > 1000);
  auto st = fx.layer_status(digest);
  CHECK(u64(st.at("fetched_bytes")) > 0);
  CHECK(u64(st.at("fetch_errors")) == 0);
}

