// The spec's `mounts`: host directories in a sandbox, read-only or read-write, through the public API
// (the security side, what root inside cannot do with them: security/mounts_security_test.cpp).
#include <sys/mount.h>

#include "integration/mounts_support.hpp"

namespace {

// What `script` prints in a sandbox of `spec`; the sandbox is destroyed afterwards.
std::string in_sandbox(Harness& h, const sandlet::Spec& spec, const std::string& script) {
  auto sb = h.rt().create(spec);
  std::string out = run_out(sb, script);
  sb.destroy();
  return out;
}

}  // namespace

TEST_CASE("mounts: a read-only mount shows the host's files with the host's owners", "[mounts]") {
  Harness h;
  HostDir data;
  data.write("root-file", "from the host\n", 0, 0600);
  data.write("user-file", "user\n", 1000, 0644);
  data.write("far-file", "far\n", 200000, 0644);  // an id the sandbox does not map
  auto sb = h.rt().create(Harness::spec().mount(data.path, "/data"));
  CHECK(run_out(sb, "cat /data/root-file") == "from the host\n");  // host root's 0600 file: root inside reads it
  CHECK(run_out(sb, "stat -c '%u:%g %a' /data/root-file /data/user-file /data/far-file") ==
        "0:0 600\n1000:1000 644\n65534:65534 644\n");
  // Read-only, nosuid, nodev, as /proc/self/mountinfo inside says.
  const std::string line = run_out(sb, "grep ' /data ' /proc/self/mountinfo");
  CHECK(contains_all(line, {" ro,", "nosuid", "nodev"}));
  sb.destroy();
  CHECK(mounts_mentioning(data.path) == 0);  // never attached on the host
  h.check_no_leaks();
}

TEST_CASE("mounts: a read-write mount takes writes, stored under the sandbox's own uid range", "[mounts]") {
  Harness h;
  HostDir out(0777);
  auto sb = h.rt().create(Harness::spec().mount(out.path, "/out", false));
  const uint32_t base = uid_base_of(sb);
  REQUIRE(base != 0);
  run_out(sb, "echo written > /out/f && mkdir /out/d && echo 1 > /out/d/g && chown 1000:1000 /out/d/g");
  CHECK(slurp(out / "f") == "written\n");
  CHECK(host_stat(out / "f").st_uid == base);
  CHECK(host_stat(out / "f").st_gid == base);
  CHECK(host_stat(out / "d").st_uid == base);
  CHECK(host_stat(out / "d/g").st_uid == base + 1000);
  // The host's own entries show as the overflow id (unmapped), the sandbox's as its own.
  out.write("host-file", "h\n", 0, 0644);
  CHECK(run_out(sb, "stat -c %u /out/host-file /out/f") == "65534\n0\n");
  // A host change is visible inside at once (the same directory, not a copy).
  CHECK(run_out(sb, "cat /out/host-file") == "h\n");
  sb.destroy();
  h.check_no_leaks();
}

TEST_CASE("mounts: the short form, nested images paths made on the way, more than one source", "[mounts]") {
  Harness h;
  HostDir a, b;
  a.write("x", "a\n");
  b.write("x", "b\n");
  const auto spec = sandlet::Spec::from_json(R"({"layers": [")" + std::string(SANDLET_TEST_ROOTFS) +
                                             R"("], "mounts": [")" + a.path + R"(:/deep/er/a", ")" + b.path +
                                             R"(:/deep/b:rw"]})");
  CHECK(in_sandbox(h, spec, "cat /deep/er/a/x /deep/b/x; grep -c ' /deep/' /proc/self/mountinfo") == "a\nb\n2\n");
  h.check_no_leaks();
}

TEST_CASE("mounts: a missing source is INVALID_ARGUMENT naming it and its errno; nothing is left", "[mounts]") {
  Harness h;
  HostDir ok;
  const std::string missing = ok.path + "/not-there";
  try {
    h.rt().create(Harness::spec().mount(missing, "/data"));
    FAIL("created");
  } catch (const sandlet::Error& e) {
    CHECK(e.code() == SANDLET_INVALID_ARGUMENT);
    CHECK(e.err_no() == ENOENT);
    CHECK_THAT(e.what(), Catch::Contains("'mounts[0].source'") && Catch::Contains(missing) &&
                             Catch::Contains("No such file or directory"));
  }
  // A regular file is not a directory.
  ok.write("file", "");
  try {
    h.rt().create(Harness::spec().mount(ok.path, "/a").mount(ok / "file", "/b"));
    FAIL("created");
  } catch (const sandlet::Error& e) {
    CHECK(e.code() == SANDLET_INVALID_ARGUMENT);
    CHECK(e.err_no() == ENOTDIR);
    CHECK_THAT(e.what(), Catch::Contains("'mounts[1].source'"));
  }
  CHECK(h.sandbox_dirs().empty());
  CHECK(mounts_mentioning(ok.path) == 0);
  h.check_no_leaks();
}

TEST_CASE("mounts: a target through a symlink of the image, or onto a file, fails the create", "[mounts]") {
  Harness h;
  HostDir data, layer;
  REQUIRE(::symlink("/etc", (layer / "link").c_str()) == 0);  // an image whose /link points elsewhere
  auto spec = [&](const std::string& target) {
    return Harness::spec().layer(layer.path).mount(data.path, target);
  };
  for (const char* target : {"/link", "/link/sub"}) {
    INFO(target);
    try {
      h.rt().create(spec(target));
      FAIL("created");
    } catch (const sandlet::Error& e) {
      CHECK(e.code() == SANDLET_INVALID_ARGUMENT);
      CHECK(e.err_no() == ELOOP);
      CHECK_THAT(e.what(), Catch::Contains("mounts[0].target " + std::string(target)) &&
                               Catch::Contains("/link is a symlink"));
    }
  }
  try {
    h.rt().create(spec("/etc/passwd"));
    FAIL("created");
  } catch (const sandlet::Error& e) {
    CHECK(e.code() == SANDLET_INVALID_ARGUMENT);
    CHECK_THAT(e.what(), Catch::Contains("mounts[0].target /etc/passwd") && Catch::Contains("not a directory"));
  }
  // Below a real directory of the image it works, and the image's files stay as they were around it.
  CHECK(in_sandbox(h, spec("/etc/extra"), "ls -d /etc/extra; test -L /link && echo link") == "/etc/extra\nlink\n");
  h.check_no_leaks();
}

TEST_CASE("mounts: 64 mounts in one sandbox", "[mounts]") {
  Harness h;
  HostDir data;
  data.write("marker", "m\n");
  auto spec = Harness::spec();
  for (int i = 0; i < 64; ++i) spec.mount(data.path, "/m/" + std::to_string(i), i % 2 == 0);
  auto sb = h.rt().create(spec);
  CHECK(run_out(sb, "grep -c ' /m/' /proc/self/mountinfo") == "64\n");
  CHECK(run_out(sb, "cat /m/0/marker /m/63/marker") == "m\nm\n");
  CHECK(run_out(sb, "grep ' /m/0 ' /proc/self/mountinfo | grep -c ' ro,'") == "1\n");
  CHECK(run_out(sb, "grep ' /m/1 ' /proc/self/mountinfo | grep -c ' rw,'") == "1\n");
  sb.destroy();
  h.check_no_leaks();
}

TEST_CASE("mounts: sandboxes from the warm pool get their own spec's mounts", "[mounts][pool]") {
  Harness h;
  HostDir a, b;
  a.write("who", "a\n");
  b.write("who", "b\n");
  // The pool starts at the second create and stages for the environment asked for last: every create
  // here after the second is handed a prepared sandbox, staged for the same layers, without mounts.
  for (int i = 0; i < 6; ++i) {
    INFO("create " << i);
    const bool use_a = i % 2 == 0;
    auto spec = Harness::spec();
    if (i != 3) spec.mount(use_a ? a.path : b.path, "/data");
    auto sb = h.rt().create(spec);
    if (i == 3) {
      CHECK(run_out(sb, "test -e /data && echo there || echo none") == "none\n");
    } else {
      CHECK(run_out(sb, "cat /data/who") == (use_a ? "a\n" : "b\n"));
    }
    sb.destroy();
  }
  const auto pool = boost::json::parse(h.rt().stats_json()).as_object().at("warm_pool").as_object();
  CHECK(pool.at("hits").to_number<uint64_t>() >= 1);
  h.check_no_leaks();
}

TEST_CASE("mounts: a one-shot run sees them", "[mounts][run]") {
  Harness h;
  HostDir in, out(0777);
  in.write("task", "the task\n");
  sandlet::RunOptions o({"sh", "-c", "cat /task/task > /result/answer"});
  auto r = h.rt().run(Harness::spec().mount(in.path, "/task").mount(out.path, "/result", false), o);
  CHECK(r.exit_code == 0);
  CHECK(slurp(out / "answer") == "the task\n");
  h.check_no_leaks();
}

TEST_CASE("mounts: a source whose filesystems cannot all be idmapped is mounted without an idmap", "[mounts]") {
  Harness h;
  HostDir data;
  data.write("file", "x\n", 0, 0644);
  // proc takes no idmap: with it below the source, the whole tree comes without one.
  REQUIRE(::mkdir((data / "proc").c_str(), 0755) == 0);
  REQUIRE(::mount("proc", (data / "proc").c_str(), "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) == 0);
  struct Unmount {
    std::string at;
    ~Unmount() { ::umount2(at.c_str(), MNT_DETACH); }
  } unmount{data / "proc"};
  auto sb = h.rt().create(Harness::spec().mount(data.path, "/data"));
  CHECK(run_out(sb, "stat -c %u /data/file; cat /data/file") == "65534\nx\n");  // readable as "other"
  CHECK(run_out(sb, "grep -c ' /data/proc ' /proc/self/mountinfo") == "1\n");  // submounts come along
  sb.destroy();
  h.check_no_leaks();
}
