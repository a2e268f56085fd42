// The working directory a spec or an environment names is made at create where the image lacks it, as
// `docker run -w` does: the sandbox's root's, mode 0755, in the writable layer, and resolved inside the
// sandbox's root only (a symlink of the image never makes it elsewhere).
#include <unistd.h>

#include "integration/mounts_support.hpp"

namespace {

// Creating `spec` fails with `code`; the message names the workdir and says `why`.
void expect_refused(Harness& h, const sandlet::Spec& spec, sandlet_code_t code, const std::string& why) {
  try {
    auto sb = h.rt().create(spec);
    FAIL("created");
  } catch (const sandlet::Error& e) {
    INFO(e.what());
    CHECK(e.code() == code);
    CHECK_THAT(e.what(), Catch::Contains("workdir") && Catch::Contains(why));
  }
}

}  // namespace

TEST_CASE("workdir: a missing one is made, root's and 0755, whoever the user is", "[workdir]") {
  Harness h;
  auto sb = h.rt().create(Harness::spec().workdir("/app/sub").user("1000:1000"));
  CHECK(run_out(sb, "pwd; id -u") == "/app/sub\n1000\n");
  CHECK(run_out(sb, "stat -c '%n %u:%g %a' /app /app/sub") == "/app 0:0 755\n/app/sub 0:0 755\n");
  // Made in the writable layer: the user (not its owner) cannot write there, root can.
  CHECK(sb.exec({"sh", "-c", "touch /app/sub/f"}).exit_code != 0);
  sandlet::ExecOptions as_root({"sh", "-c", "touch /app/sub/f"});
  as_root.user = "0";
  CHECK(sb.exec(as_root).exit_code == 0);
  sb.destroy();
  CHECK(!fs::exists(std::string(SANDLET_TEST_ROOTFS) + "/app"));  // the image is untouched
  h.check_no_leaks();
}

TEST_CASE("workdir: an existing one is left as it is; the environment's own is made too", "[workdir]") {
  Harness h;
  {
    auto sb = h.rt().create(Harness::spec().workdir("/tmp"));
    CHECK(run_out(sb, "pwd; stat -c '%u:%g %a' /tmp") == "/tmp\n0:0 1777\n");
    sb.destroy();
  }
  sandlet::LayerImportOptions named;
  named.name = "wd-base";
  h.rt().layer_import(SANDLET_TEST_ROOTFS, named);
  h.rt().env_create("wd-env", {"wd-base"}, R"({"workdir":"/srv/work/deep"})");
  auto sb = h.rt().create(sandlet::Spec().environment("wd-env"));
  CHECK(run_out(sb, "pwd; stat -c '%u:%g %a' /srv/work/deep") == "/srv/work/deep\n0:0 755\n");
  sb.destroy();
  h.check_no_leaks();
}

TEST_CASE("workdir: symlinks of the image resolve inside the sandbox's root, never on the host", "[workdir]") {
  Harness h;
  HostDir layer;
  // Both climb above the root: inside, ".." of / is / (so they name the sandbox's /tmp), on the host they
  // would name the host's /tmp.
  REQUIRE(::symlink("/../../../../tmp", (layer / "app").c_str()) == 0);
  REQUIRE(::symlink("../../../../../tmp", (layer / "rel").c_str()) == 0);
  const std::string name = "sandlet-wd-escape-" + std::to_string(::getpid());
  const std::string host_path = "/tmp/" + name;
  fs::remove_all(host_path);
  for (const std::string link : {"app", "rel"}) {
    INFO(link);
    auto sb = h.rt().create(Harness::spec().layer(layer.path).workdir("/" + link + "/" + name + "/sub"));
    CHECK(run_out(sb, "readlink -f .; ls -d /tmp/" + name + "/sub") == "/tmp/" + name + "/sub\n/tmp/" + name + "/sub\n");
    CHECK(!fs::exists(host_path));
    sb.destroy();
  }
  CHECK(!fs::exists(host_path));
  CHECK(std::distance(fs::directory_iterator(layer.path), fs::directory_iterator()) == 2);  // nothing made in it
  h.check_no_leaks();
}

TEST_CASE("workdir: a path through a file, a dangling link or a read-only mount is refused, named", "[workdir]") {
  Harness h;
  HostDir layer;
  REQUIRE(::symlink("/nowhere/at/all", (layer / "dangling").c_str()) == 0);
  HostDir data;
  expect_refused(h, Harness::spec().workdir("/bin/busybox"), SANDLET_INVALID_ARGUMENT, "/bin/busybox is not a directory");
  expect_refused(h, Harness::spec().workdir("/bin/busybox/sub"), SANDLET_INVALID_ARGUMENT,
                 "/bin/busybox is not a directory");
  expect_refused(h, Harness::spec().layer(layer.path).workdir("/dangling/x"), SANDLET_INVALID_ARGUMENT,
                 "/dangling is a symlink to a missing path");
  expect_refused(h, Harness::spec().mount(data.path, "/data").workdir("/data/sub"), SANDLET_FAILED_PRECONDITION,
                 "read-only");
  CHECK(fs::is_empty(data.path));
  h.check_no_leaks();
}
