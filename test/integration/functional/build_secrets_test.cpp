// Build secrets and identities (issue 18, docs/BUILD.md "Secrets and identities"), with real builds FROM the
// busybox layer: a secret is a read-only file in the RUN step that mounts it and nowhere else — not in a
// step without the mount, not in a concurrent sandbox, not in any layer, the build cache, the audit log, the
// progress output or the result; and a build step's user namespace maps other host ids than a sandbox made
// from the built environment.
#include <fcntl.h>
#include <linux/mount.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <iostream>
#include <condition_variable>
#include <mutex>
#include <random>

#include "integration/harness.hpp"

namespace {

namespace json = boost::json;

struct SecretFixture {
  Harness h;
  std::string ctx = h.root() + "/ctx";
  // The secret's file lives outside the runtime root, so that a scan of the root finds only copies.
  std::string secret_dir;
  std::string value;
  SecretFixture() {
    sandlet::LayerImportOptions o;
    o.name = "busybox";
    h.rt().layer_import(SANDLET_TEST_ROOTFS, o);
    fs::create_directories(ctx);
    char tmpl[] = "/tmp/sandlet-secret-test-XXXXXX";
    REQUIRE(::mkdtemp(tmpl) != nullptr);
    secret_dir = tmpl;
    std::random_device rd;
    value = "sandlet-test-secret-" + std::to_string(rd()) + "-" + std::to_string(rd());
    { std::ofstream(secret_dir + "/token") << value; }
    ::chmod((secret_dir + "/token").c_str(), 0600);
  }
  ~SecretFixture() {
    std::error_code ec;
    fs::remove_all(secret_dir, ec);
  }
  std::string source() const { return "id=tok,src=" + secret_dir + "/token"; }
  std::string recipe(const std::string& text) {
    { std::ofstream(ctx + "/Dockerfile") << text; }
    return ctx + "/Dockerfile";
  }
  // Every regular file under the runtime root holding `value` (layers, build cache, audit log, records).
  std::vector<std::string> files_with_value() {
    std::vector<std::string> hits;
    std::error_code ec;
    for (auto it = fs::recursive_directory_iterator(h.root(), fs::directory_options::skip_permission_denied, ec);
         it != fs::recursive_directory_iterator(); it.increment(ec)) {
      if (ec) break;
      if (!it->is_regular_file(ec) || it->is_symlink(ec)) continue;
      if (slurp(it->path().string()).find(value) != std::string::npos) hits.push_back(it->path().string());
    }
    return hits;
  }
};

std::string sh(sandlet::Sandbox& sb, const std::string& cmd) {
  auto r = sb.exec({"sh", "-c", cmd});
  INFO(r.stderr_data);
  return r.stdout_data;
}

// The host's sha256sum of `s` (through a file: the value never goes into an argv, which audit logs keep).
std::string sha256_hex(const std::string& s) {
  char tmpl[] = "/tmp/sandlet-secret-hash-XXXXXX";
  const int fd = ::mkstemp(tmpl);
  REQUIRE(fd >= 0);
  REQUIRE(::write(fd, s.data(), s.size()) == static_cast<ssize_t>(s.size()));
  ::close(fd);
  std::string out = host_sh(std::string("sha256sum ") + tmpl + " | cut -d' ' -f1");
  ::unlink(tmpl);
  while (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

const char* kSecretRecipe =
    "FROM busybox\n"
    "RUN --mount=type=secret,id=tok sha256sum /run/secrets/tok | cut -d' ' -f1 > /tok.sha && "
    "stat -c '%a %u %g' /run/secrets/tok > /tok.stat && "
    "(echo x > /run/secrets/tok && echo writable || echo read-only) > /tok.ro 2>/dev/null && "
    "cat /proc/self/uid_map > /build.uidmap\n"
    "RUN --mount=type=secret,id=tok,target=/etc/app/key,mode=0440,uid=1000,gid=1000 "
    "stat -c '%a %u %g' /etc/app/key > /key.stat && mkdir -m 0777 /out\n"
    "USER 1000:1000\n"
    "RUN --mount=type=secret,id=tok,uid=1000 sha256sum /run/secrets/tok | cut -d' ' -f1 > /out/as-1000\n"
    "RUN --mount=type=secret,id=tok (cat /run/secrets/tok > /dev/null 2>&1 && echo readable || echo denied) > /out/root-0400\n"
    "RUN (test -e /run/secrets/tok && echo visible || echo absent) > /out/no-mount\n";

// A secret reaches its step as a copy of a detached tmpfs (open_tree of an fsmount), which 6.1 and 6.12
// refuse (EINVAL): the build then fails with a message saying so, and these tests have nothing to check.
bool secret_mounts_here() {
  static const bool ok = [] {
    const int fs = static_cast<int>(::syscall(SYS_fsopen, "tmpfs", FSOPEN_CLOEXEC));
    if (fs < 0) return false;
    bool copied = false;
    if (::syscall(SYS_fsconfig, fs, FSCONFIG_CMD_CREATE, nullptr, nullptr, 0) == 0) {
      const int mnt = static_cast<int>(::syscall(SYS_fsmount, fs, FSMOUNT_CLOEXEC, 0));
      if (mnt >= 0) {
        const int copy = static_cast<int>(
            ::syscall(SYS_open_tree, mnt, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH));
        copied = copy >= 0;
        if (copy >= 0) ::close(copy);
        ::close(mnt);
      }
    }
    ::close(fs);
    return copied;
  }();
  if (!ok) std::cout << "SANDLET-SKIP: this kernel cannot copy a detached mount (secret mounts need it)" << std::endl;
  return ok;
}

}  // namespace

TEST_CASE("build: a secret is a read-only file in the steps that mount it, and in no layer, cache entry or log",
          "[build][secrets]") {
  if (!secret_mounts_here()) return;
  SecretFixture f;
  std::mutex m;
  std::string output;
  sandlet::BuildOptions o;
  o.tag = "app";
  o.secrets = {f.source()};
  o.progress = [&](const sandlet::BuildEvent& e) {
    std::lock_guard lock(m);
    output.append(e.text).append(e.data);
  };
  const std::string result = f.h.rt().build(f.recipe(kSecretRecipe), f.ctx, o);
  INFO(result);
  CHECK(result.find(f.value) == std::string::npos);
  CHECK(output.find(f.value) == std::string::npos);

  sandlet::Sandbox sb = f.h.rt().create(sandlet::Spec().environment("app"));
  // What the steps saw, from the layers they made.
  CHECK(sh(sb, "cat /tok.sha") == sha256_hex(f.value) + "\n");
  CHECK(sh(sb, "cat /tok.stat /tok.ro") == "400 0 0\nread-only\n");
  CHECK(sh(sb, "cat /key.stat") == "440 1000 1000\n");
  CHECK(sh(sb, "cat /out/as-1000") == sha256_hex(f.value) + "\n");
  CHECK(sh(sb, "cat /out/root-0400 /out/no-mount") == "denied\nabsent\n");
  // The mount points stay out of the layers.
  CHECK(sh(sb, "test -e /run/secrets && echo present || echo none; test -e /etc/app && echo present || echo none") ==
        "none\nnone\n");

  // Identities: the step's user namespace maps another host range than this sandbox's.
  const std::string build_map = sh(sb, "cat /build.uidmap");
  const std::string run_map = sh(sb, "cat /proc/self/uid_map");
  INFO(build_map << " / " << run_map);
  REQUIRE(!build_map.empty());
  REQUIRE(!run_map.empty());
  CHECK(build_map != run_map);

  // No copy under the root: layers, build cache, audit log, sandbox records. (Before anything below puts the
  // value into an argv, which the audit log records.)
  REQUIRE(fs::exists(f.h.root() + "/audit/audit.jsonl"));
  REQUIRE(!fs::is_empty(f.h.root() + "/layers/build-cache"));
  CHECK(f.files_with_value().empty());
  CHECK(slurp(f.h.root() + "/audit/audit.jsonl").find("/run/secrets/tok") != std::string::npos);  // it is the log

  // Nor anywhere in the built environment's files (the layers as a sandbox reads them, decompressed).
  CHECK(sh(sb, "find / -xdev -type f -exec grep -l -F '" + f.value + "' {} + 2>/dev/null; echo done") == "done\n");
  sb.destroy();
  f.h.check_no_leaks();
}

TEST_CASE("build: a concurrent sandbox does not see a running step's secret", "[build][secrets]") {
  if (!secret_mounts_here()) return;
  SecretFixture f;
  struct Done {
    std::mutex m;
    std::condition_variable cv;
    bool done = false, started = false;
    int code = -1;
  } d;
  sandlet::BuildOptions o;
  o.secrets = {f.source()};
  o.progress = [&d](const sandlet::BuildEvent& e) {
    std::lock_guard lock(d.m);
    if (e.stream == SANDLET_STDOUT) d.started = true;
    d.cv.notify_all();
  };
  // The step holds its secret mounted until the test has looked and cancels it.
  const std::string recipe = f.recipe(
      "FROM busybox\nRUN --mount=type=secret,id=tok cat /run/secrets/tok > /dev/null && echo holding && sleep 60\n");
  int p[2];
  REQUIRE(::pipe2(p, O_CLOEXEC) == 0);
  o.cancel_fd = p[0];
  f.h.rt().build_async(recipe, f.ctx, o, [&d](const sandlet::Error* e, std::string) {
    std::lock_guard lock(d.m);
    d.done = true;
    d.code = e ? e->code() : 0;
    d.cv.notify_all();
  });
  {
    std::unique_lock lock(d.m);
    REQUIRE(d.cv.wait_for(lock, std::chrono::seconds(60), [&] { return d.started || d.done; }));
    REQUIRE(!d.done);
  }
  // The step is running with its secret mounted: another sandbox on the same layers has no such file and no
  // copy of the value anywhere in its filesystem.
  sandlet::Sandbox other = f.h.rt().create(sandlet::Spec().layer("busybox"));
  CHECK(sh(other, "test -e /run/secrets/tok && echo visible || echo absent") == "absent\n");
  CHECK(sh(other, "grep -c /run/secrets /proc/self/mountinfo") == "0\n");
  CHECK(sh(other, "find / -xdev -type f -exec grep -l -F '" + f.value + "' {} + 2>/dev/null; echo done") == "done\n");
  other.destroy();
  REQUIRE(::write(p[1], "x", 1) == 1);  // cancel: the step ends, its sandbox and the staged secret go
  {
    std::unique_lock lock(d.m);
    REQUIRE(d.cv.wait_for(lock, std::chrono::seconds(60), [&] { return d.done; }));
  }
  CHECK(d.code == SANDLET_CANCELLED);
  ::close(p[0]);
  ::close(p[1]);
  f.h.check_no_leaks();
}

TEST_CASE("build: a required secret missing fails before any sandbox; an optional one is left out", "[build][secrets]") {
  if (!secret_mounts_here()) return;
  SecretFixture f;
  const size_t layers = json::parse(f.h.rt().layer_list()).as_array().size();
  try {
    f.h.rt().build(f.recipe("FROM busybox\nRUN --mount=type=secret,id=tok,required=true true\n"), f.ctx, {});
    FAIL("built without its required secret");
  } catch (const sandlet::Error& e) {
    CHECK(e.code() == SANDLET_INVALID_ARGUMENT);
    CHECK(std::string(e.what()).find("Dockerfile:2: RUN needs secret tok (required=true)") != std::string::npos);
  }
  CHECK(json::parse(f.h.rt().layer_list()).as_array().size() == layers);

  // Refused --mount types and bad --secret sources: INVALID_ARGUMENT naming them, nothing made.
  try {
    f.h.rt().build(f.recipe("FROM busybox\nRUN --mount=type=cache,target=/c true\n"), f.ctx, {});
    FAIL("built with a cache mount");
  } catch (const sandlet::Error& e) {
    CHECK(e.code() == SANDLET_INVALID_ARGUMENT);
    CHECK(std::string(e.what()).find(":2: RUN --mount=type=cache,target=/c: type=cache is not supported") != std::string::npos);
  }
  sandlet::BuildOptions bad;
  bad.secrets = {"id=tok,src=" + f.secret_dir + "/missing"};
  try {
    f.h.rt().build(f.recipe("FROM busybox\nRUN true\n"), f.ctx, bad);
    FAIL("built with an unreadable secret");
  } catch (const sandlet::Error& e) {
    CHECK(e.code() == SANDLET_INVALID_ARGUMENT);
    CHECK(std::string(e.what()).find("invalid build field 'secrets[0]': secret tok: ") == 0);
  }

  // Optional and not given: the step runs without the file. Given later: not the same step (no cache hit).
  const std::string recipe = f.recipe(
      "FROM busybox\nRUN --mount=type=secret,id=tok (cat /run/secrets/tok 2>/dev/null | sha256sum || true) > /seen\n");
  const json::value r1 = json::parse(f.h.rt().build(recipe, f.ctx, {}));
  CHECK(r1.at("sandboxes").as_int64() == 1);
  sandlet::BuildOptions with;
  with.secrets = {f.source()};
  with.tag = "with";
  const json::value r2 = json::parse(f.h.rt().build(recipe, f.ctx, with));
  CHECK(r2.at("cached_steps").as_int64() == 0);
  // A changed value is the same step (values are not in the key, as in Docker): --no-cache runs it again.
  { std::ofstream(f.secret_dir + "/token") << f.value << "-rotated"; }
  const json::value r3 = json::parse(f.h.rt().build(recipe, f.ctx, with));
  CHECK(r3.at("cached_steps").as_int64() == 1);
  sandlet::Sandbox sb = f.h.rt().create(sandlet::Spec().environment("with"));
  CHECK(sh(sb, "cut -d' ' -f1 /seen") == sha256_hex(f.value) + "\n");
  sb.destroy();
  f.h.check_no_leaks();
}

TEST_CASE("build: build args are not secret: a RUN sees them and may keep them, the cache record does not",
          "[build][secrets]") {
  SecretFixture f;
  sandlet::BuildOptions o;
  o.build_args = {"TOKEN=" + f.value};
  o.tag = "args";
  f.h.rt().build(f.recipe("FROM busybox\nARG TOKEN\nRUN echo \"$TOKEN\" | sha256sum > /arg.sha\n"), f.ctx, o);
  sandlet::Sandbox sb = f.h.rt().create(sandlet::Spec().environment("args"));
  CHECK(sh(sb, "cut -d' ' -f1 /arg.sha") == sha256_hex(f.value + "\n") + "\n");
  CHECK(sh(sb, "echo \"[$TOKEN]\"") == "[]\n");  // an ARG is not the environment's ENV
  sb.destroy();
  // The cache records the instruction as written ($TOKEN, not its value); the audit log has the RUN's argv
  // (unsubstituted) but not its environment. The value is nowhere under the root.
  CHECK(f.files_with_value().empty());
  f.h.check_no_leaks();
}

TEST_CASE("cli: sandlet build --secret", "[build][secrets][cli]") {
  if (!secret_mounts_here()) return;
  SecretFixture f;
  f.recipe("FROM busybox\nRUN --mount=type=secret,id=tok,required sha256sum /run/secrets/tok | cut -d' ' -f1 > /s\n");
  f.h.rt().close();  // the CLI opens the root itself
  const std::string cli = std::string(SANDLET_CLI) + " --root " + f.h.root() + " build ";
  int st = -1;
  std::string out = host_sh(cli + "-t s --secret " + f.source() + " " + f.ctx + " 2>" + f.h.root() + "/err", &st);
  std::string err = slurp(f.h.root() + "/err");
  INFO(err);
  CHECK(st == 0);
  CHECK(out == "s@1\n");
  CHECK(err.find(f.value) == std::string::npos);
  host_sh(cli + f.ctx + " --secret id=tok 2>" + f.h.root() + "/err", &st);
  CHECK(st == 2);
  CHECK(slurp(f.h.root() + "/err").find("secret tok needs exactly one of src=FILE and env=VAR") != std::string::npos);
  host_sh(cli + "--no-cache " + f.ctx + " 2>" + f.h.root() + "/err", &st);
  CHECK(st == 2);
  CHECK(slurp(f.h.root() + "/err").find("RUN needs secret tok (required=true)") != std::string::npos);
  fs::remove(f.h.root() + "/err");
  CHECK(f.files_with_value().empty());
}
