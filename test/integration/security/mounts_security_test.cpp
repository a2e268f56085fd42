// What root inside a sandbox cannot do with the spec's host directories: write to or remount a read-only
// one, or make anything in a read-write one that the host would own as root (or run as root).
#include "integration/mounts_support.hpp"

namespace {

// Runs `script` inside; returns its exit code, stdout+stderr in *output.
int attempt(sandlet::Sandbox& sb, const std::string& script, std::string* output = nullptr) {
  auto r = sb.exec({"sh", "-c", "(" + script + ") 2>&1"});
  if (output) *output = r.stdout_data;
  return r.exit_code;
}

}  // namespace

TEST_CASE("mounts: root inside cannot write to, chmod, remount or re-bind a read-only mount", "[mounts][security]") {
  Harness h;
  HostDir data(0777);
  data.write("f", "original\n", 0, 0666);
  auto sb = h.rt().create(Harness::spec().mount(data.path, "/data"));
  REQUIRE(run_out(sb, "id -u") == "0\n");
  std::string out;
  CHECK(attempt(sb, "echo changed > /data/f", &out) != 0);
  CHECK_THAT(out, Catch::Contains("Read-only file system"));
  CHECK(attempt(sb, "touch /data/new", &out) != 0);
  CHECK_THAT(out, Catch::Contains("Read-only file system"));
  CHECK(attempt(sb, "chmod 777 /data/f") != 0);
  CHECK(attempt(sb, "rm -f /data/f") != 0);
  // The ways back to a writable view: each fails (mount calls are refused to everything inside).
  for (const char* trick : {"mount -o remount,rw /data", "mount -o remount,rw,bind /data",
                            "mkdir -p /tmp/b && mount --bind /data /tmp/b && touch /tmp/b/x",
                            "mkdir -p /tmp/r && mount -t tmpfs t /tmp/r && mount --move /data /tmp/r",
                            "umount /data && touch /data/x && test -e /data/f",
                            "umount -l /data && touch /data/x"}) {
    INFO(trick);
    CHECK(attempt(sb, trick, &out) != 0);
    INFO(out);
    CHECK(attempt(sb, "echo changed > /data/f") != 0);
  }
  CHECK(run_out(sb, "cat /data/f") == "original\n");
  CHECK(run_out(sb, "grep ' /data ' /proc/self/mountinfo | grep -c ' ro,'") == "1\n");
  CHECK(slurp(data / "f") == "original\n");
  CHECK_FALSE(fs::exists(data / "new"));
  CHECK_FALSE(fs::exists(data / "x"));
  sb.destroy();
  h.check_no_leaks();
}

TEST_CASE("mounts: nothing root inside makes in a read-write mount is host root's", "[mounts][security]") {
  Harness h;
  HostDir out(0777);
  auto sb = h.rt().create(Harness::spec().mount(out.path, "/out", false));
  const uint32_t base = uid_base_of(sb);
  REQUIRE(base != 0);
  // A setuid-root binary as root inside would make it; plus ownership changes to every id inside.
  run_out(sb, "cp /bin/busybox /out/suid && chown 0:0 /out/suid && chmod 6755 /out/suid && "
              "mkdir /out/dir && chmod 4777 /out/dir && touch /out/mine && chown 65535:65535 /out/mine");
  for (const char* name : {"suid", "dir", "mine"}) {
    INFO(name);
    const struct stat st = host_stat(out / name);
    CHECK(st.st_uid != 0);
    CHECK(st.st_gid != 0);
    CHECK(st.st_uid >= base);
    CHECK(st.st_uid < base + 65536);
  }
  const struct stat suid = host_stat(out / "suid");
  CHECK(suid.st_uid == base);  // setuid to the sandbox's root, which is nobody on the host
  // Ids outside the sandbox's range (host root's included) cannot be given away, nor device nodes made.
  std::string msg;
  CHECK(attempt(sb, "touch /out/x && chown 65536 /out/x") != 0);
  CHECK(attempt(sb, "mknod /out/null c 1 3", &msg) != 0);
  CHECK_FALSE(fs::exists(out / "null"));
  // The mount is nosuid inside too: the setuid bit raises nothing there.
  CHECK(run_out(sb, "grep ' /out ' /proc/self/mountinfo | grep -c nosuid") == "1\n");
  sb.destroy();
  h.check_no_leaks();
}

TEST_CASE("mounts: root inside writes a read-write host directory only where the host lets its range", "[mounts][security]") {
  Harness h;
  HostDir strict(0755);  // host root's, not writable by others
  strict.write("host-only", "h\n", 0, 0600);
  auto sb = h.rt().create(Harness::spec().mount(strict.path, "/strict", false));
  std::string out;
  CHECK(attempt(sb, "touch /strict/new", &out) != 0);
  CHECK_THAT(out, Catch::Contains("Permission denied"));
  CHECK(attempt(sb, "cat /strict/host-only", &out) != 0);  // 0600 of an id the sandbox does not map
  CHECK(attempt(sb, "chmod 777 /strict") != 0);
  CHECK_FALSE(fs::exists(strict / "new"));
  CHECK((host_stat(strict.path).st_mode & 07777) == 0755);
  sb.destroy();
  CHECK(mounts_mentioning(strict.path) == 0);
  h.check_no_leaks();
}
