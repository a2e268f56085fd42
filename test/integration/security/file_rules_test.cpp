// The spec's file rules, the masked kernel files and the protected toolkit, against root inside
// (docs/POLICY.md): each attack runs as root in the sandbox and must fail, and the host's files stay as
// they were.
#include <boost/json.hpp>

#include "integration/mounts_support.hpp"

namespace {

// Runs `script` inside; returns its exit code, stdout+stderr in *output.
int attempt(sandlet::Sandbox& sb, const std::string& script, std::string* output = nullptr) {
  auto r = sb.exec({"sh", "-c", "(" + script + ") 2>&1"});
  if (output) *output = r.stdout_data;
  return r.exit_code;
}

std::string spec_json(const std::string& extra, const std::string& more_layers = "") {
  return R"({"layers": [")" + std::string(SANDLET_TEST_ROOTFS) + "\"" + more_layers + "]" +
         (extra.empty() ? "" : ", " + extra) + "}";
}

void install_probe(sandlet::Sandbox& sb) {
  const std::string probe = slurp(SANDLET_FS_PROBE);
  REQUIRE_FALSE(probe.empty());
  sb.write_file("/tmp/.sandlet-fs-probe-inside", "");
  sb.write_file("/tmp/fs-probe", probe, 0755);
}

// A write to a hidden or masked file fails, or, where the stand-in is a read-only bind of /dev/null
// (docs/POLICY.md: kernels that cannot clone a detached mount), lands in /dev/null. Either way the file
// still reads nothing afterwards. (It writes "h": sysrq's help, harmless were a write ever to get through.)
void check_write_goes_nowhere(sandlet::Sandbox& sb, const std::string& path) {
  INFO(path);
  std::string out;
  if (attempt(sb, "echo h > " + path, &out) == 0) {
    INFO("the write succeeded: only the /dev/null stand-in may take it");
    CHECK(run_out(sb, "stat -c %t:%T " + path) == "1:3\n");
  }
  CHECK(run_out(sb, "cat " + path + " 2>/dev/null | wc -c") == "0\n");
}

// A layer of its own for the rules to act on (the test root filesystem stays as it is).
struct RulesLayer : HostDir {
  RulesLayer() {
    for (const char* d : {"data", "data/sub", "data/scratch", "secret", "etc"}) fs::create_directory(*this / d);
    write("data/f", "original\n");
    write("data/sub/g", "below\n");
    write("secret/answer", "42\n");
    write("etc/hidden-file", "s3cret\n");
  }
};

const char* kRules = R"("policy": {"files": [
    {"path": "/data", "access": "read-only"},
    {"path": "/data/scratch", "access": "writable"},
    {"path": "/secret", "access": "hidden"},
    {"path": "/etc/hidden-file", "access": "hidden"}]})";

}  // namespace

TEST_CASE("file rules: a read-only path holds for root inside", "[security][file-rules]") {
  Harness h;
  RulesLayer layer;
  auto sb = h.rt().create(sandlet::Spec::from_json(spec_json(kRules, ",\"" + layer.path + "\"")));
  REQUIRE(run_out(sb, "id -u") == "0\n");
  install_probe(sb);
  for (const char* op : {"setxattr /data/f", "setxattr-trusted /data/f", "link /data/f /data/l",
                         "link /data/f /tmp/l", "link /data/f /data/scratch/l", "rename /data/f /data/f2",
                         "rename /data/f /tmp/f2", "rename /data/f /data/scratch/f", "rename /data /data2",
                         "rename /data/sub /tmp/sub", "truncate /data/f", "otrunc /data/f", "owrite /data/f",
                         "chmod /data/f", "chown /data/f", "chmod /data", "unlink /data/f", "rmdir /data",
                         "rmdir /data/scratch", "symlink-over /data/f /tmp/evil", "utimes /data/f",
                         "setxattr /data/sub/g", "unlink /data/sub/g"}) {
    INFO(op);
    std::string out;
    CHECK(attempt(sb, std::string("/tmp/fs-probe ") + op, &out) == 1);
    INFO(out);
    CHECK_THAT(out, Catch::StartsWith("errno"));
  }
  for (const char* cmd : {"echo changed > /data/f", "echo more >> /data/f", "touch /data/new", "mkdir /data/d",
                          "mv /data/f /tmp/", "cp /bin/busybox /data/sub/g", "mknod /data/p p",
                          "ln -s /etc/passwd /data/sl", "umount /data", "umount -l /data",
                          "mount -o remount,rw /data", "mount -o remount,rw,bind /data"}) {
    INFO(cmd);
    CHECK(attempt(sb, cmd) != 0);
  }
  CHECK(run_out(sb, "cat /data/f") == "original\n");
  CHECK(run_out(sb, "cat /data/sub/g") == "below\n");
  CHECK(run_out(sb, "echo $(ls /data)") == "f scratch sub\n");
  // Nested and most specific: writable below the read-only path.
  CHECK(run_out(sb, "echo w > /data/scratch/x && cat /data/scratch/x && mkdir /data/scratch/d && echo ok") ==
        "w\nok\n");
  // Everything without a rule stays writable.
  CHECK(run_out(sb, "echo t > /tmp/t && echo e > /etc/e && cat /tmp/t /etc/e") == "t\ne\n");
  // The agent's own file operations obey the rules too.
  CHECK_THROWS_AS(sb.write_file("/data/f", "agent\n"), sandlet::Error);
  CHECK_THROWS_AS(sb.write_file("/data/new", "agent\n"), sandlet::Error);
  sb.write_file("/data/scratch/agent", "fine\n");
  CHECK(sb.read_file("/data/scratch/agent") == "fine\n");
  CHECK(sb.read_file("/data/f") == "original\n");
  CHECK(slurp(layer / "data/f") == "original\n");
  sb.destroy();
  h.check_no_leaks();
}

TEST_CASE("file rules: a hidden path cannot be read or listed, even as root or by the agent",
          "[security][file-rules]") {
  Harness h;
  RulesLayer layer;
  auto sb = h.rt().create(sandlet::Spec::from_json(spec_json(kRules, ",\"" + layer.path + "\"")));
  std::string out;
  CHECK(attempt(sb, "cat /secret/answer", &out) != 0);
  CHECK(run_out(sb, "ls -A /secret | wc -l") == "0\n");
  CHECK(run_out(sb, "cat /etc/hidden-file 2>/dev/null; echo end") == "end\n");
  CHECK(attempt(sb, "grep -r 42 /secret") != 0);
  CHECK(run_out(sb, "grep -rl s3cret /etc 2>/dev/null; echo end") == "end\n");
  for (const char* cmd : {"umount /secret", "umount -l /secret", "umount /etc/hidden-file",
                          "touch /secret/x", "rm -f /etc/hidden-file",
                          "mv /secret /tmp/secret", "cat /proc/1/root/secret/answer",
                          "cat /proc/self/root/secret/answer"}) {
    INFO(cmd);
    CHECK(attempt(sb, cmd, &out) != 0);
  }
  check_write_goes_nowhere(sb, "/etc/hidden-file");
  CHECK(slurp(layer / "etc/hidden-file") == "s3cret\n");
  // Renaming the parent moves the stand-in with it: the content stays out of reach.
  attempt(sb, "mv /etc /etc2; cat /etc2/hidden-file /etc/hidden-file", &out);
  CHECK(out.find("s3cret") == std::string::npos);
  CHECK_THROWS_AS(sb.read_file("/secret/answer"), sandlet::Error);
  std::string via_agent;
  try {
    via_agent = sb.read_file("/etc2/hidden-file");
  } catch (const sandlet::Error&) {
  }
  CHECK(via_agent.find("s3cret") == std::string::npos);
  sb.destroy();
  h.check_no_leaks();
}

TEST_CASE("file rules: a path missing in the image is refused naming the rule", "[security][file-rules]") {
  Harness h;
  try {
    h.rt().create(sandlet::Spec::from_json(
        spec_json(R"("policy": {"files": [{"path": "/tmp", "access": "writable"},
                                          {"path": "/no/such/dir", "access": "read-only"}]})")));
    FAIL("created");
  } catch (const sandlet::Error& e) {
    CHECK(e.code() == SANDLET_INVALID_ARGUMENT);
    CHECK_THAT(e.what(), Catch::Contains("policy.files[1].path") && Catch::Contains("/no/such/dir"));
  }
  // A read-only root with a writable /tmp.
  auto sb = h.rt().create(sandlet::Spec::from_json(
      spec_json(R"("policy": {"files": [{"path": "/", "access": "read-only"}, {"path": "/tmp", "access": "writable"}]})")));
  CHECK(attempt(sb, "touch /etc/x") != 0);
  CHECK(attempt(sb, "rm /bin/sh") != 0);
  CHECK(run_out(sb, "touch /tmp/x && echo ok") == "ok\n");
  sb.destroy();
  h.check_no_leaks();
}

TEST_CASE("masked kernel files: each reads nothing, takes no write, and grep over /proc ends",
          "[security][kernel-files]") {
  Harness h;
  auto sb = h.rt().create(Harness::spec());
  const std::string masked = "/proc/kcore /proc/kpagecgroup /proc/kpageflags /proc/kpagecount /proc/sysrq-trigger "
                             "/proc/timer_list /proc/sched_debug /proc/keys /proc/key-users /proc/latency_stats /proc/kmsg";
  // Each masked file that this kernel has is a read-only mount of an empty file: it reads nothing.
  const std::string report = run_out(sb, "for f in " + masked + "; do [ -e $f ] || continue; "
                                             "n=$(cat $f 2>/dev/null | wc -c); echo \"$f $n\"; done");
  INFO(report);
  std::istringstream lines(report);
  int seen = 0;
  for (std::string path, bytes; lines >> path >> bytes; ++seen) {
    INFO(path);
    CHECK(bytes == "0");
    CHECK(run_out(sb, "grep -c ' " + path + " ' /proc/self/mountinfo") == "1\n");
  }
  CHECK(seen >= 5);
  for (const char* dir : {"/proc/acpi", "/proc/scsi"})
    CHECK(run_out(sb, std::string("if [ -d ") + dir + " ]; then ls -A " + dir + " | wc -l; else echo 0; fi") == "0\n");
  // Writes go nowhere: sysrq-trigger is a read-only stand-in, /proc/sys is read-only.
  check_write_goes_nowhere(sb, "/proc/sysrq-trigger");
  CHECK(attempt(sb, "echo 1 > /proc/sys/kernel/sysrq") != 0);
  CHECK(attempt(sb, "echo 100 > /proc/sys/user/max_user_namespaces") != 0);
  // Nor can root inside take the masks away or reach the files by another procfs path.
  for (const char* cmd : {"umount /proc/kcore", "umount -l /proc/timer_list", "umount /proc/sysrq-trigger",
                          "mkdir -p /tmp/p && mount -t proc proc /tmp/p", "umount -l /proc",
                          "cat /proc/1/root/proc/timer_list | grep -q .",
                          "cat /proc/self/root/proc/timer_list | grep -q .",
                          "cat /proc/thread-self/root/proc/timer_list | grep -q ."}) {
    INFO(cmd);
    CHECK(attempt(sb, cmd) != 0);
  }
  // Every top-level /proc file and /proc/sys, each bounded (the rest of the tree: the next test).
  sb.exec({"sh", "-c",
           "exec </dev/null >/tmp/grep.log 2>&1; P='no-such-string-zq'; "
           "timeout -s KILL 60 grep -s -e $P $(ls -d /proc/* | grep -v '^/proc/[0-9]' | grep -v self); b=$?; "
           "timeout -s KILL 60 grep -rs -e $P /proc/sys; echo rc=$b$? > /tmp/grep.rc"});
  // Each ran to its end (1: no match; 2: some files refuse reading), none was killed.
  const std::string rc = sb.read_file("/tmp/grep.rc");
  INFO(rc);
  CHECK((rc.size() == 6 && rc.compare(0, 3, "rc=") == 0 && (rc[3] == '1' || rc[3] == '2') &&
         (rc[4] == '1' || rc[4] == '2')));  // ran to the end: nothing matched, nothing crashed
  CHECK(run_out(sb, "echo alive") == "alive\n");
  sb.destroy();
  h.check_no_leaks();
}

// The whole tree but /dev (endless devices) and /proc (above; its per-process directories hold pipes
// under /proc/*/fd that block a read). The VM guests leave this one out: busybox's grep reads its binary
// once per applet link, which takes minutes under emulation and tests nothing of the kernel there.
TEST_CASE("masked kernel files: grep -r over the rest of the tree ends", "[security][kernel-files][whole-tree]") {
  Harness h;
  auto sb = h.rt().create(Harness::spec());
  sb.exec({"sh", "-c",
           "exec </dev/null >/tmp/grep.log 2>&1; P='no-such-string-zq'; "
           "timeout -s KILL 60 grep -rs -e $P $(ls -d /* | grep -v '^/dev$' | grep -v '^/proc$'); "
           "echo rc=$? > /tmp/grep.rc"});
  CHECK(sb.read_file("/tmp/grep.rc") == "rc=1\n");  // ran to the end: nothing matched, nothing crashed
  CHECK(run_out(sb, "echo alive") == "alive\n");
  sb.destroy();
  h.check_no_leaks();
}

// The init masks while staging (ahead of time for the warm pool) when the spec asks for it: a spec without
// masks gets none, also from the pool (which then stages that choice), and a masked spec is not handed
// one of those.
TEST_CASE("masked kernel files: off when the spec says so", "[security][kernel-files]") {
  Harness h;
  const auto spec = sandlet::Spec::from_json(spec_json(R"("policy": {"mask_kernel_files": false})"));
  const auto unmasked = [](sandlet::Sandbox& sb) {
    return run_out(sb, "grep -cE ' /proc/(timer_list|kpageflags|keys|kallsyms|acpi|driver) ' /proc/self/mountinfo; true") ==
           "0\n";
  };
  const auto masked = [](sandlet::Sandbox& sb) {
    return run_out(sb, "for f in kpageflags timer_list kallsyms keys; do [ -e /proc/$f ] && "
                       "{ grep -q \" /proc/$f \" /proc/self/mountinfo || echo unmasked $f; }; done; echo checked") ==
           "checked\n";
  };
  const auto pool = [&] { return boost::json::parse(h.rt().stats_json()).as_object().at("warm_pool").as_object(); };
  for (int i = 0; i < 2; ++i) {
    auto sb = h.rt().create(spec);
    CHECK(unmasked(sb));
    sb.destroy();
  }
  // The pool runs from the second create on and stages for the spec it saw last.
  REQUIRE(wait_until([&] {
    const auto p = pool();
    return p.at("ready").to_number<uint64_t>() > 0 && p.at("staged").as_bool();
  }, 20));
  const uint64_t hits = pool().at("hits").to_number<uint64_t>();
  auto sb = h.rt().create(spec);
  CHECK(pool().at("hits").to_number<uint64_t>() == hits + 1);
  CHECK(unmasked(sb));
  sb.destroy();
  REQUIRE(wait_until([&] { return pool().at("ready").to_number<uint64_t>() > 0; }, 20));
  auto with_masks = h.rt().create(Harness::spec());  // the staged one without masks does not fit it
  CHECK(masked(with_masks));
  with_masks.destroy();
  h.check_no_leaks();
}

namespace {

// A toolkit layer: a directory with a static busybox and relative links to it.
struct ToolkitDir : HostDir {
  ToolkitDir() {
    fs::create_directories(*this / "bin");
    fs::copy_file(SANDLET_TEST_ROOTFS "/bin/busybox", *this / "bin/busybox");
    REQUIRE(::chmod((*this / "bin/busybox").c_str(), 0755) == 0);
    for (const char* applet : {"sh", "echo", "cat", "env", "ls", "id"}) fs::create_symlink("busybox", *this / (std::string("bin/") + applet));
  }
};

sandlet::ExecResult toolkit_exec(sandlet::Sandbox& sb, std::vector<std::string> argv,
                                 std::vector<std::string> env = {}) {
  sandlet::ExecOptions o(std::move(argv));
  o.env = std::move(env);
  o.toolkit = true;
  return sb.exec(o);
}

// Root inside replaces the shells (and python3) with a script that leaves a marker.
void overwrite_interpreters(sandlet::Sandbox& sb) {
  auto r = sb.exec({"/bin/busybox", "sh", "-c",
                    "for f in /bin/sh /bin/bash /usr/bin/python3; do busybox rm -f $f; "
                    "busybox printf '#!/bin/busybox sh\\necho pwned > /tmp/marker\\necho pwned\\n' > $f; "
                    "busybox chmod 755 $f; done"});
  REQUIRE(r.exit_code == 0);
  // The attack works on commands that do not ask for the toolkit.
  REQUIRE(sb.exec({"sh", "-c", "echo ok"}).stdout_data == "pwned\n");
  sb.exec({"/bin/busybox", "rm", "-f", "/tmp/marker"});
}

bool marker_present(sandlet::Sandbox& sb) {
  return sb.exec({"/bin/busybox", "test", "-e", "/tmp/marker"}).exit_code == 0;
}

}  // namespace

TEST_CASE("toolkit: overwriting /bin/sh, /bin/bash and python3 cannot inject into toolkit commands",
          "[security][toolkit]") {
  Harness h;
  ToolkitDir tk;
  auto sb = h.rt().create(sandlet::Spec::from_json(spec_json("\"toolkit\": \"" + tk.path + "\"")));
  overwrite_interpreters(sb);
  auto r = toolkit_exec(sb, {"sh", "-c", "echo ok"});
  INFO(r.stderr_data);
  CHECK(r.exit_code == 0);
  CHECK(r.stdout_data == "ok\n");
  CHECK_FALSE(marker_present(sb));
  // Its children find their commands on the toolkit's PATH too.
  r = toolkit_exec(sb, {"sh", "-c", "sh -c 'echo nested'; env"}, {"LD_PRELOAD=/tmp/evil.so", "LD_LIBRARY_PATH=/tmp",
                                                              "BASH_ENV=/tmp/x", "KEEP=1"});
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.stdout_data, Catch::StartsWith("nested\n"));
  CHECK_THAT(r.stdout_data, Catch::Contains("PATH=/.sandlet/toolkit/bin:/.sandlet/toolkit/usr/bin"));
  CHECK_THAT(r.stdout_data, Catch::Contains("KEEP=1"));
  CHECK(r.stdout_data.find("LD_") == std::string::npos);
  CHECK(r.stdout_data.find("BASH_ENV") == std::string::npos);
  CHECK_FALSE(marker_present(sb));
  // An absolute argv[0] is the toolkit's own path, not the sandbox's.
  CHECK(toolkit_exec(sb, {"/bin/sh", "-c", "echo abs"}).stdout_data == "abs\n");
  CHECK_FALSE(marker_present(sb));
  // A command the toolkit does not have is not looked up in the sandbox.
  try {
    toolkit_exec(sb, {"python3", "-c", "1"});
    FAIL("python3 ran");
  } catch (const sandlet::Error& e) {
    CHECK(e.code() == SANDLET_NOT_FOUND);
  }
  CHECK_FALSE(marker_present(sb));
  sb.destroy();
  h.check_no_leaks();
}

TEST_CASE("toolkit: renaming /.sandlet or faking one cannot substitute it, and it cannot be written",
          "[security][toolkit]") {
  Harness h;
  ToolkitDir tk;
  auto sb = h.rt().create(sandlet::Spec::from_json(spec_json("\"toolkit\": \"" + tk.path + "\"")));
  overwrite_interpreters(sb);
  for (const char* cmd : {"busybox touch /.sandlet/toolkit/x", "busybox rm /.sandlet/toolkit/bin/sh",
                          "busybox ln -sf /bin/sh /.sandlet/toolkit/bin/sh", "busybox touch /.sandlet/x",
                          "busybox rmdir /.sandlet/toolkit", "busybox chmod 777 /.sandlet/toolkit/bin/busybox",
                          "echo x >> /.sandlet/toolkit/bin/busybox", "busybox umount -l /.sandlet/toolkit",
                          "busybox umount -l /.sandlet", "busybox mount -o remount,rw /.sandlet/toolkit"}) {
    INFO(cmd);
    CHECK(sb.exec({"/bin/busybox", "sh", "-c", cmd}).exit_code != 0);
  }
  // Move /.sandlet away (refused: it is a mount point) and put a fake toolkit in its place either way.
  sb.exec({"/bin/busybox", "sh", "-c",
           "busybox mv /.sandlet /.sandlet-old; busybox mkdir -p /tmp/fake/toolkit/bin; "
           "busybox cp /bin/sh /tmp/fake/toolkit/bin/sh; busybox mv /tmp/fake /.sandlet; "
           "busybox mkdir -p /.sandlet/toolkit/bin && busybox cp /bin/sh /.sandlet/toolkit/bin/sh"});
  auto r = toolkit_exec(sb, {"sh", "-c", "echo ok"});
  INFO(r.stderr_data);
  CHECK(r.stdout_data == "ok\n");
  CHECK_FALSE(marker_present(sb));
  CHECK(fs::is_symlink(tk / "bin/sh"));
  CHECK(fs::file_size(tk / "bin/busybox") == fs::file_size(SANDLET_TEST_ROOTFS "/bin/busybox"));
  CHECK_FALSE(fs::exists(tk / "x"));
  sb.destroy();
  h.check_no_leaks();
}

TEST_CASE("toolkit: refused on a sandbox without one", "[security][toolkit]") {
  Harness h;
  auto sb = h.rt().create(Harness::spec());
  try {
    toolkit_exec(sb, {"sh", "-c", "echo ok"});
    FAIL("ran");
  } catch (const sandlet::Error& e) {
    CHECK(e.code() == SANDLET_FAILED_PRECONDITION);
    CHECK_THAT(e.what(), Catch::Contains("toolkit"));
  }
  sb.destroy();
  h.check_no_leaks();
}

TEST_CASE("toolkit: a dynamic binary runs through the toolkit's own loader and libraries", "[security][toolkit]") {
  // The host's env(1) and what it links, copied into a toolkit: the test root filesystem has no C library,
  // so only the toolkit's loader can run it.
  const std::string host_env = fs::exists("/usr/bin/env") ? "/usr/bin/env" : "/bin/env";
  const std::string libs = host_sh("ldd " + host_env + " 2>/dev/null | grep -o '/[^ ]*'");
  if (libs.empty()) {
    SUCCEED("SANDLET-SKIP: the host's env is not dynamically linked");
    return;
  }
  Harness h;
  ToolkitDir tk;
  fs::copy_file(host_env, tk / "bin/env-dyn");
  std::istringstream in(libs);
  for (std::string lib; in >> lib;) {
    fs::create_directories(fs::path(tk / lib.substr(1)).parent_path());
    fs::copy_file(fs::canonical(lib), tk / lib.substr(1), fs::copy_options::overwrite_existing);
  }
  auto sb = h.rt().create(sandlet::Spec::from_json(spec_json("\"toolkit\": \"" + tk.path + "\"")));
  // The sandbox's /etc/ld.so.preload is pinned empty and read-only (glibc's loader would read it).
  CHECK(sb.exec({"sh", "-c", "echo /tmp/evil.so > /etc/ld.so.preload"}).exit_code != 0);
  auto r = toolkit_exec(sb, {"env-dyn"}, {"LD_PRELOAD=/tmp/evil.so", "KEEP=2"});
  INFO(r.stderr_data);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.stdout_data, Catch::Contains("KEEP=2"));
  CHECK(r.stdout_data.find("LD_PRELOAD") == std::string::npos);
  // Without the toolkit it cannot run at all (no loader in the sandbox's root).
  sb.write_file("/tmp/env-dyn", slurp(host_env), 0755);
  CHECK(sb.exec({"sh", "-c", "/tmp/env-dyn >/dev/null 2>&1; echo rc=$?"}).stdout_data != "rc=0\n");
  sb.destroy();
  h.check_no_leaks();
}
