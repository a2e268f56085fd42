// `sandlet build` through the C ABI (C++ wrapper): a recipe FROM the busybox layer builds an environment
// whose sandboxes show its files, env, workdir and user; the second build is all cache hits and makes no
// sandbox; a failing RUN names its step and line and leaves nothing; bad input fails before any sandbox.
#include <fcntl.h>
#include <sys/stat.h>

#include <boost/json.hpp>
#include <condition_variable>
#include <mutex>

#include "integration/harness.hpp"

namespace {

namespace json = boost::json;

void write(const std::string& path, const std::string& data, mode_t mode = 0644) {
  fs::create_directories(fs::path(path).parent_path());
  { std::ofstream(path) << data; }
  ::chmod(path.c_str(), mode);
}

// A fresh runtime root with the busybox layer imported as "busybox" and a context directory.
struct BuildFixture {
  Harness h;
  std::string ctx = h.root() + "/ctx";
  BuildFixture() {
    sandlet::LayerImportOptions o;
    o.name = "busybox";
    h.rt().layer_import(SANDLET_TEST_ROOTFS, o);
    fs::create_directories(ctx);
  }
  std::string recipe(const std::string& text) {
    write(ctx + "/Dockerfile", text);
    return ctx + "/Dockerfile";
  }
  size_t layers() { return json::parse(h.rt().layer_list()).as_array().size(); }
  size_t cache_entries() {
    size_t n = 0;
    std::error_code ec;
    for (auto& e : fs::directory_iterator(h.root() + "/layers/build-cache", ec)) n += e.path().extension() == ".json";
    return n;
  }
  // Build events, recorded (the callback runs on the building thread).
  struct Events {
    std::mutex m;
    std::vector<std::string> begun;  // "TEXT" or "TEXT (cached)"
    std::string output;
  };
  sandlet::BuildOptions options(Events& ev) {
    sandlet::BuildOptions o;
    o.progress = [&ev](const sandlet::BuildEvent& e) {
      std::lock_guard lock(ev.m);
      if (e.stream == 0) ev.begun.push_back(std::string(e.text) + (e.cached ? " (cached)" : ""));
      else ev.output.append(e.data);
    };
    return o;
  }
};

std::string sh(sandlet::Sandbox& sb, const std::string& cmd) {
  auto r = sb.exec({"sh", "-c", cmd});
  INFO(r.stderr_data);
  return r.stdout_data;
}

const char* kRecipe =
    "# a recipe using every instruction of the subset\n"
    "FROM busybox\n"
    "ARG GREETING=hello\n"
    "ENV APP_HOME=/opt/app MSG=$GREETING\n"
    "WORKDIR $APP_HOME\n"
    "COPY files/ ./files/\n"
    "COPY --chown=1000:1000 run.sh /usr/local/bin/\n"
    "RUN echo \"$GREETING from \\\n"
    "    build\" > built.txt && mkdir -p /tmp/residue && echo x > /tmp/residue/y\n"
    "USER 1000:1000\n"
    "LABEL purpose=test\n"
    "CMD [\"sh\"]\n";

void write_context(const std::string& ctx) {
  write(ctx + "/files/a.txt", "alpha\n");
  write(ctx + "/files/sub/b.txt", "beta\n", 0600);
  ::symlink("a.txt", (ctx + "/files/link").c_str());
  write(ctx + "/run.sh", "#!/bin/sh\necho run\n", 0755);
}

}  // namespace

TEST_CASE("build: a recipe makes an environment with its files, env, workdir and user", "[build]") {
  BuildFixture f;
  write_context(f.ctx);
  BuildFixture::Events ev;
  sandlet::BuildOptions o = f.options(ev);
  o.tag = "app";
  const json::value r = json::parse(f.h.rt().build(f.recipe(kRecipe), f.ctx, o));
  INFO(json::serialize(r));
  CHECK(r.at("environment").as_string() == "app@1");
  CHECK(r.at("sandboxes").as_int64() == 4);  // WORKDIR, two COPYs, RUN
  CHECK(r.at("cached_steps").as_int64() == 0);
  CHECK(r.at("layers").as_array().size() == 5);
  CHECK(r.at("labels").at("purpose").as_string() == "test");
  CHECK(r.at("workdir").as_string() == "/opt/app");
  CHECK(r.at("user").as_string() == "1000:1000");
  REQUIRE(r.at("notes").as_array().size() == 1);
  CHECK(std::string(r.at("notes").as_array()[0].as_string()).find(":12: CMD ignored") != std::string::npos);
  CHECK(ev.begun.size() == 10);  // every instruction, FROM to CMD
  CHECK(ev.begun[0] == "FROM busybox");
  CHECK(ev.begun[6] == "RUN echo \"$GREETING from     build\" > built.txt && mkdir -p /tmp/residue && echo x > /tmp/residue/y");

  sandlet::Sandbox sb = f.h.rt().create(sandlet::Spec().environment("app"));
  CHECK(sh(sb, "pwd; id -u; echo $MSG $APP_HOME") == "/opt/app\n1000\nhello /opt/app\n");
  CHECK(sh(sb, "cat built.txt") == "hello from     build\n");
  CHECK(sh(sb, "cat files/a.txt; readlink files/link") == "alpha\na.txt\n");
  // b.txt is root's and 0600: the environment's user (1000) cannot read it.
  CHECK(sh(sb, "cat files/sub/b.txt 2>/dev/null || echo denied") == "denied\n");
  CHECK(sh(sb, "stat -c '%a %u' files/a.txt files/sub/b.txt /usr/local/bin/run.sh") == "644 0\n600 0\n755 1000\n");
  CHECK(sh(sb, "run.sh") == "run\n");
  CHECK(sh(sb, "test -e /tmp/residue && echo kept || echo excluded") == "excluded\n");
  sb.destroy();
  f.h.check_no_leaks();
}

TEST_CASE("build: the second build is all cache hits and makes no sandbox", "[build]") {
  BuildFixture f;
  write_context(f.ctx);
  const std::string recipe = f.recipe(kRecipe);
  sandlet::BuildOptions first;
  first.tag = "app";
  const json::value r1 = json::parse(f.h.rt().build(recipe, f.ctx, first));
  const size_t layers = f.layers();

  BuildFixture::Events ev;
  sandlet::BuildOptions o = f.options(ev);
  o.tag = "app";
  const json::value r2 = json::parse(f.h.rt().build(recipe, f.ctx, o));
  INFO(json::serialize(r2));
  CHECK(r2.at("sandboxes").as_int64() == 0);
  CHECK(r2.at("cached_steps").as_int64() == 4);
  CHECK(r2.at("layers") == r1.at("layers"));
  CHECK(r2.at("environment").as_string() == "app@2");
  CHECK(f.layers() == layers);
  size_t cached = 0;
  for (const auto& b : ev.begun) cached += b.size() > 9 && b.compare(b.size() - 9, 9, " (cached)") == 0;
  CHECK(cached == 4);
  CHECK(ev.output.empty());  // nothing ran

  // A changed context file: the COPY of it and everything after run again; what comes before is cached.
  write(f.ctx + "/run.sh", "#!/bin/sh\necho changed\n", 0755);
  const json::value r3 = json::parse(f.h.rt().build(recipe, f.ctx, sandlet::BuildOptions()));
  CHECK(r3.at("cached_steps").as_int64() == 2);
  CHECK(r3.at("sandboxes").as_int64() == 2);
  CHECK(r3.at("environment").as_string() == "");

  // --no-cache runs every step.
  sandlet::BuildOptions nc;
  nc.no_cache = true;
  const json::value r4 = json::parse(f.h.rt().build(recipe, f.ctx, nc));
  CHECK(r4.at("cached_steps").as_int64() == 0);
  CHECK(r4.at("sandboxes").as_int64() == 4);
  f.h.check_no_leaks();
}

TEST_CASE("build: a failing RUN names its step and line and leaves no layer, sandbox or mount", "[build]") {
  BuildFixture f;
  const size_t layers = f.layers();
  const std::string recipe = f.recipe(
      "FROM busybox\n"
      "RUN echo made > /a\n"
      "\n"
      "RUN echo boom >&2; \\\n"
      "    exit 3\n"
      "RUN echo never\n");
  BuildFixture::Events ev;
  try {
    f.h.rt().build(recipe, f.ctx, f.options(ev));
    FAIL("the build succeeded");
  } catch (const sandlet::Error& e) {
    CHECK(e.code() == SANDLET_ABORTED);
    std::string msg = e.what();
    INFO(msg);
    CHECK(msg.find("step 3/4 (" + recipe + ":4 RUN echo boom >&2;     exit 3): exit status 3\nboom\n") == 0);
    CHECK(msg.find("network") != std::string::npos);
  }
  CHECK(ev.output == "boom\n");
  CHECK(f.layers() == layers);  // step 2's layer is gone too
  CHECK(f.cache_entries() == 0);
  // (The warm pool's prepared sandboxes are not sandboxes yet; check_no_leaks sees them go with the runtime.)
  CHECK(wait_until([&] { return f.h.rt().list().empty(); }, 10));
  CHECK(json::parse(f.h.rt().env_list()).as_array().empty());
  f.h.check_no_leaks();
}

TEST_CASE("build: bad input fails before any sandbox and leaves nothing", "[build]") {
  BuildFixture f;
  const size_t layers = f.layers();
  write(f.ctx + "/data.bin", std::string("\x1f\x8b\x08\x00", 4) + "not really gzip");
  // A file outside the context that exists on every host (a VM guest may have no /etc/passwd).
  const std::string outside = f.h.root() + "/outside-secret";
  write(outside, "secret\n", 0644);
  ::symlink(outside.c_str(), (f.ctx + "/passwd").c_str());
  fs::create_directories(f.ctx + "/dir");
  ::symlink("/etc", (f.ctx + "/dir/etc").c_str());
  struct Case {
    std::string recipe, context, want;
  };
  const std::string R = f.ctx + "/Dockerfile";
  std::vector<Case> cases = {
      {"", f.ctx, "build recipe " + f.ctx + "/missing: "},
      {"FROM busybox\n", f.ctx + "/nope", "build context '" + f.ctx + "/nope'"},
      {"FROM nosuch\nRUN true\n", f.ctx, R + ":1: FROM nosuch: no environment or store layer of that name or digest"},
      {"FROM busybox\nRUN true\nEXPOSE 80\n", f.ctx, R + ":3: EXPOSE is not supported ("},
      {"FROM busybox\nRUN true\nCOPY missing.txt /x\n", f.ctx, R + ":3: COPY missing.txt: no such file or directory in the context"},
      {"FROM busybox\nCOPY ../escape /x\n", f.ctx, R + ":2: COPY ../escape: the source is outside the context"},
      {"FROM busybox\nCOPY /etc/passwd /x\n", f.ctx, R + ":2: COPY /etc/passwd: the source must be relative"},
      {"FROM busybox\nCOPY passwd /x\n", f.ctx, R + ":2: COPY passwd: it is a symlink to " + outside + ", outside the context"},
      {"FROM busybox\nCOPY dir /x/\n", f.ctx, R + ":2: the symlink " + f.ctx + "/dir/etc -> /etc points outside the context"},
      {"FROM busybox\nADD data.bin /x\n", f.ctx, R + ":2: ADD would unpack the archive data.bin"},
  };
  for (const auto& c : cases) {
    std::string path = c.recipe.empty() ? f.ctx + "/missing" : f.recipe(c.recipe);
    INFO(c.recipe);
    try {
      f.h.rt().build(path, c.context, sandlet::BuildOptions());
      FAIL("the build succeeded");
    } catch (const sandlet::Error& e) {
      CHECK(e.code() == SANDLET_INVALID_ARGUMENT);
      CHECK(std::string(e.what()).find(c.want) == 0);
      INFO(e.what());
    }
    CHECK(f.h.sandbox_dirs().empty());
    CHECK(f.layers() == layers);
  }
  CHECK(f.cache_entries() == 0);
  f.h.check_no_leaks();
}

TEST_CASE("build: the asynchronous form completes on its thread, is cancelled by its fd and by close", "[build]") {
  BuildFixture f;
  const std::string recipe = f.recipe("FROM busybox\nRUN echo started; sleep 60\n");
  int p[2];
  REQUIRE(::pipe2(p, O_CLOEXEC) == 0);
  struct Done {
    std::mutex m;
    std::condition_variable cv;
    bool done = false, started = false;
    int code = -1;
    std::string message;
  } d;
  sandlet::BuildOptions o;
  o.cancel_fd = p[0];
  o.progress = [&d](const sandlet::BuildEvent& e) {
    std::lock_guard lock(d.m);
    if (e.stream == SANDLET_STDOUT) d.started = true;
    d.cv.notify_all();
  };
  auto done = [&d](const sandlet::Error* e, std::string) {
    std::lock_guard lock(d.m);
    d.done = true;
    d.code = e ? e->code() : 0;
    d.message = e ? e->what() : "";
    d.cv.notify_all();
  };
  const auto t0 = std::chrono::steady_clock::now();
  f.h.rt().build_async(recipe, f.ctx, o, done);
  {
    std::unique_lock lock(d.m);
    REQUIRE(d.cv.wait_for(lock, std::chrono::seconds(30), [&] { return d.started; }));
  }
  REQUIRE(::write(p[1], "x", 1) == 1);
  {
    std::unique_lock lock(d.m);
    REQUIRE(d.cv.wait_for(lock, std::chrono::seconds(30), [&] { return d.done; }));
  }
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(30));
  CHECK(d.code == SANDLET_CANCELLED);
  CHECK(d.message.find("step 2/2 (") == 0);
  CHECK(f.layers() == 1);
  ::close(p[0]);
  ::close(p[1]);

  // Closing the runtime cancels a build in flight; its completion has run when close returns.
  d.done = d.started = false;
  f.h.rt().build_async(recipe, f.ctx, sandlet::BuildOptions(), done);
  f.h.rt().close();
  CHECK(d.done);
  CHECK(d.code == SANDLET_CANCELLED);
  f.h.check_no_leaks();
}

TEST_CASE("cli: sandlet build prints the steps, the cache hits and the environment", "[build][cli]") {
  BuildFixture f;
  write(f.ctx + "/hello.txt", "hi\n");
  f.recipe("FROM busybox\nCOPY hello.txt /\nRUN cat /hello.txt\n");
  f.h.rt().close();  // the CLI opens the root itself
  const std::string cli = std::string(SANDLET_CLI) + " --root " + f.h.root() + " build ";
  int st = -1;
  std::string out = host_sh(cli + "-t hello " + f.ctx + " 2>" + f.h.root() + "/err", &st);
  std::string err = slurp(f.h.root() + "/err");
  INFO(err);
  CHECK(st == 0);
  CHECK(out == "hello@1\n");
  CHECK(err.find("Step 1/3 : FROM busybox\nStep 2/3 : COPY hello.txt /\nStep 3/3 : RUN cat /hello.txt\nhi\n") == 0);
  out = host_sh(cli + "-f " + f.ctx + "/Dockerfile -t hello " + f.ctx + " 2>" + f.h.root() + "/err", &st);
  err = slurp(f.h.root() + "/err");
  CHECK(st == 0);
  CHECK(out == "hello@2\n");
  CHECK(err.find("Step 2/3 : COPY hello.txt / (cached)\nStep 3/3 : RUN cat /hello.txt (cached)\n") != std::string::npos);
  // A failing step: exit status 1, the step named; bad input: 2.
  write(f.ctx + "/Dockerfile", "FROM busybox\nRUN exit 7\n");
  host_sh(cli + f.ctx + " 2>" + f.h.root() + "/err", &st);
  CHECK(st == 1);
  CHECK(slurp(f.h.root() + "/err").find("sandlet: step 2/2 (" + f.ctx + "/Dockerfile:2 RUN exit 7): exit status 7") != std::string::npos);
  host_sh(cli + f.ctx + "/nosuchdir 2>/dev/null", &st);
  CHECK(st == 2);
  fs::remove(f.h.root() + "/err");
}
