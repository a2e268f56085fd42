#include <sys/stat.h>

#include "integration/harness.hpp"

TEST_CASE("pid 1 is sandlet's init; root inside is an unprivileged host user", "[isolation]") {
  Harness h;
  auto sb = h.rt().create(Harness::spec().hostname("box1"));
  CHECK(run_out(sb, "tr '\\0' ' ' < /proc/1/cmdline").find("sandlet-init") == 0);
  CHECK(run_out(sb, "id -u") == "0\n");
  std::string map = run_out(sb, "cat /proc/self/uid_map");
  unsigned inside = 99, outside = 0, count = 0;
  REQUIRE(sscanf(map.c_str(), "%u %u %u", &inside, &outside, &count) == 3);
  CHECK(inside == 0);
  CHECK(outside >= (1u << 28));
  CHECK(count == 65536);
  CHECK(run_out(sb, "hostname") == "box1\n");
  h.check_no_leaks();
}

TEST_CASE("only loopback networking", "[isolation][net]") {
  Harness h;
  auto sb = h.rt().create(Harness::spec());
  std::string dev = run_out(sb, "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '");
  CHECK(dev == "lo\n");
  CHECK(run_out(sb, "cat /sys/class/net/lo/operstate 2>/dev/null || echo nosys") == "nosys\n");
  h.check_no_leaks();
}

TEST_CASE("host processes and files are invisible; writes never reach the layers", "[isolation][fs]") {
  Harness h;
  auto sb = h.rt().create(Harness::spec());
  int procs = std::stoi(run_out(sb, "ls /proc | grep -c '^[0-9]'"));
  CHECK(procs <= 4);  // init, sh, ls, grep
  CHECK(sb.exec({"sh", "-c", "test -e /work/main || test -e /root/.bashrc || test -e /usr/lib"}).exit_code == 1);
  run_out(sb, "echo changed > /etc/passwd; echo new > /newfile; rm /bin/ls");
  CHECK(slurp(std::string(SANDLET_TEST_ROOTFS) + "/etc/passwd").find("changed") == std::string::npos);
  CHECK_FALSE(fs::exists(std::string(SANDLET_TEST_ROOTFS) + "/newfile"));
  CHECK(fs::exists(std::string(SANDLET_TEST_ROOTFS) + "/bin/ls"));
  h.check_no_leaks();
}

TEST_CASE("a minimal /dev: working nodes, the sandbox's own, no new devices", "[isolation][fs]") {
  Harness h;
  auto a = h.rt().create(Harness::spec());
  auto b = h.rt().create(Harness::spec());
  CHECK(run_out(a, "ls /dev | tr '\\n' ' '") ==
        "fd full null ptmx pts random shm stderr stdin stdout tty urandom zero ");
  CHECK(run_out(a, "echo x > /dev/null && head -c 3 /dev/zero | od -An -tx1 && head -c 16 /dev/urandom | wc -c") ==
        " 00 00 00\n16\n");
  CHECK(a.exec({"sh", "-c", "echo x > /dev/full"}).exit_code != 0);  // ENOSPC: it is the real full device
  // devpts and shm are this sandbox's own mounts.
  CHECK(run_out(a, "grep -c ' /dev/pts devpts \\| /dev/shm tmpfs ' /proc/self/mounts") == "2\n");
  // /dev belongs to the sandbox (a file it adds stays its own); root inside cannot make device nodes.
  run_out(a, "echo mine > /dev/note && echo shared > /dev/shm/note");
  CHECK(b.exec({"sh", "-c", "test -e /dev/note || test -e /dev/shm/note"}).exit_code == 1);
  CHECK(a.exec({"mknod", "/dev/disk", "b", "8", "0"}).exit_code != 0);
  CHECK(a.exec({"mknod", "/tmp/null2", "c", "1", "3"}).exit_code != 0);
  h.check_no_leaks();
}

TEST_CASE("two sandboxes cannot see each other", "[isolation]") {
  Harness h;
  auto a = h.rt().create(Harness::spec());
  auto b = h.rt().create(Harness::spec());
  a.write_file("/tmp/secret", "a's secret");
  sandlet::ExecOptions bg({"sh", "-c", "sleep 30"});
  bg.timeout_s = 5;
  std::atomic<bool> done{false};
  a.exec_async(bg, [&](const sandlet::Error*, sandlet::ExecResult) { done = true; });
  CHECK(b.exec({"test", "-e", "/tmp/secret"}).exit_code == 1);
  CHECK(wait_until([&] { return count_procs(a, "sleep") == 1; }, 5));
  CHECK(count_procs(b, "sleep") == 0);
  a.destroy();
  CHECK(wait_until([&] { return done.load(); }, 10));
  h.check_no_leaks();
}

TEST_CASE("a memory bomb is killed inside the sandbox only", "[limits][memory]") {
  Harness h;
  auto sb = h.rt().create(Harness::spec().memory(64ull << 20));
  // `tail -n 1` buffers a whole line: 256 MiB without a newline against a 64 MiB limit.
  auto r = sb.exec({"sh", "-c", "head -c 268435456 /dev/zero | tail -n 1 >/dev/null; echo \"survived, tail: $?\""});
  INFO("stdout: " << r.stdout_data << " stderr: " << r.stderr_data);
  // The OOM killer ends tail (SIGKILL: the shell sees 137). Under cgroup v2 it was seen to take the shell
  // as well before tail's memory was reaped (a slow emulated VM): then the exec itself died by SIGKILL.
  CHECK((r.stdout_data == "survived, tail: 137\n" || (r.exit_code == -1 && r.signal == SIGKILL)));
  CHECK(run_out(sb, "cat /proc/self/cgroup >/dev/null; echo ok") == "ok\n");
  // The sandbox (its init and agent) survives.
  CHECK(run_out(sb, "echo still here") == "still here\n");
  h.check_no_leaks();
}

TEST_CASE("a fork bomb is bounded by the pids limit", "[limits][pids]") {
  Harness h;
  auto sb = h.rt().create(Harness::spec().pids(32));
  sandlet::ExecOptions o({"sh", "-c",
                          // ash gives up at the first failed fork: run the bomb in a subshell.
                          "(i=0; while [ $i -lt 100 ]; do sleep 30 & i=$((i+1)); done) 2>/dev/null; "
                          "set -- /proc/[0-9]*; echo $#"});  // a glob: counting must not need a fork
  o.timeout_s = 10;
  auto r = sb.exec(o);
  INFO(r.stderr_data);
  REQUIRE_FALSE(r.stdout_data.empty());
  CHECK(std::stoi(r.stdout_data) <= 32);
  h.check_no_leaks();
}

TEST_CASE("a sandbox's delegated cgroup is bounded in depth and count by files it cannot write", "[limits][cgroup]") {
  Harness h;
  auto sb = h.rt().create(Harness::spec());
  const std::string group = cgroup2_parent() + "/" + sb.id();
  CHECK(slurp(group + "/cgroup.max.depth") == "8\n");
  CHECK(slurp(group + "/cgroup.max.descendants") == "4096\n");
  struct stat st;
  REQUIRE(::stat((group + "/cgroup.max.depth").c_str(), &st) == 0);
  CHECK(st.st_uid == 0);  // the host's: root inside the sandbox is another uid
  REQUIRE(::stat(group.c_str(), &st) == 0);
  CHECK(st.st_uid != 0);  // while the group itself is delegated
  sb.destroy();
}

TEST_CASE("a CPU limit throttles the sandbox; its cgroups hide the host's layout", "[limits][cpu]") {
  Harness h;
  auto sb = h.rt().create(Harness::spec().cpus(0.1));
  // Every process is in the sandbox's groups from the start, and sees each of them as its root.
  std::string cgroups = run_out(sb, "cat /proc/self/cgroup");
  INFO(cgroups);
  CHECK(cgroups.find("sandlet") == std::string::npos);
  CHECK(cgroups.find("..") == std::string::npos);
  // The host's view: the quota is set on the sandbox's own group, and a busy loop gets throttled.
  const bool hybrid = fs::exists("/sys/fs/cgroup/unified");
  const std::string group =
      hybrid ? "/sys/fs/cgroup/cpu/sandlet/" + sb.id() : cgroup2_parent() + "/" + sb.id();
  CHECK(slurp(group + (hybrid ? "/cpu.cfs_quota_us" : "/cpu.max")).find("10000") == 0);
  for (const char* ctl : {"pids", "cpu"}) {
    if (!hybrid) break;  // (pure v2: CLONE_INTO_CGROUP placed it; nothing to join)
    std::string procs = slurp(std::string("/sys/fs/cgroup/") + ctl + "/sandlet/" + sb.id() + "/cgroup.procs");
    CHECK_FALSE(procs.empty());  // the init (and agent) joined every v1 group its limits need
  }
  // No memory limit, no v1 memory group (on hybrid hosts a create that is not pooled makes only those).
  if (hybrid) CHECK_FALSE(fs::exists("/sys/fs/cgroup/memory/sandlet/" + sb.id()));
  run_out(sb, "yes >/dev/null & sleep 0.5; kill $!");
  std::string stat = slurp(group + "/cpu.stat");
  INFO(stat);
  size_t at = stat.find("nr_throttled ");
  REQUIRE(at != std::string::npos);
  CHECK(std::stoul(stat.substr(at + 13)) > 0);
  h.check_no_leaks();
}

TEST_CASE("the baseline seccomp filter denies kernel-level operations", "[security][seccomp]") {
  Harness h;
  auto sb = h.rt().create(Harness::spec());
  CHECK(sb.exec({"sh", "-c", "mount -t tmpfs none /mnt"}).exit_code != 0);
  CHECK(sb.exec({"unshare", "-U", "true"}).exit_code != 0);
  CHECK(sb.exec({"swapoff", "-a"}).exit_code != 0);
  // No namespace can be created by any means (clone3 included): the kernel's per-user-namespace counters
  // are 0, and root inside can neither raise them (/proc/sys is read-only) nor hold CAP_SYS_RESOURCE.
  CHECK(run_out(sb, "cat /proc/sys/user/max_user_namespaces /proc/sys/user/max_net_namespaces") == "0\n0\n");
  CHECK(sb.exec({"sh", "-c", "echo 100 > /proc/sys/user/max_user_namespaces"}).exit_code != 0);
  CHECK(run_out(sb, "grep CapBnd /proc/self/status").find("fef7ffff") != std::string::npos);
  // The workload still runs normally.
  CHECK(run_out(sb, "echo fine") == "fine\n");
  h.check_no_leaks();
}

TEST_CASE("network namespace: loopback works, low ports bind, root inside cannot reconfigure it", "[isolation][net]") {
  Harness h;
  auto a = h.rt().create(Harness::spec());
  auto b = h.rt().create(Harness::spec());
  sandlet::ExecOptions server({"sh", "-c", "echo from-a | nc -l -p 80"});
  server.keep_background = false;
  server.timeout_s = 10;
  std::atomic<bool> done{false};
  a.exec_async(server, [&](const sandlet::Error*, sandlet::ExecResult) { done = true; });
  // a's server answers on a's loopback only. busybox nc quits at the first end-of-file on either side: a
  // client whose stdin is already at EOF could quit before reading the reply and use up the one-shot
  // server (seen under CPU load). Its stdin stays open (a background sleep holds the pipe) until the
  // server has answered and closed.
  CHECK(wait_until([&] {
    return a.exec({"sh", "-c", "(sleep 5 &) | nc 127.0.0.1 80 | grep -q from-a"}).exit_code == 0;
  }, 5));
  CHECK(b.exec({"sh", "-c", "nc -w 1 127.0.0.1 80 </dev/null"}).exit_code != 0);
  CHECK(a.exec({"ip", "link", "set", "lo", "down"}).exit_code != 0);
  CHECK(a.exec({"ip", "link", "add", "x0", "type", "dummy"}).exit_code != 0);
  CHECK(wait_until([&] { return done.load(); }, 15));
  h.check_no_leaks();
}

TEST_CASE("runtimes with different roots hand out different host uid ranges", "[isolation][uid]") {
  Harness h1, h2;
  auto a = h1.rt().create(Harness::spec());
  auto b = h2.rt().create(Harness::spec());
  CHECK(run_out(a, "cat /proc/self/uid_map") != run_out(b, "cat /proc/self/uid_map"));
  h1.check_no_leaks();
  h2.check_no_leaks();
}

TEST_CASE("a sandbox's init has its own session: Ctrl-C to the creator's group does not reach it", "[lifecycle]") {
  Harness h;
  auto sb = h.rt().create(Harness::spec().lifetime("detached"));
  std::string json = sb.info_json();
  auto pos = json.find("\"init_pid\":");
  REQUIRE(pos != std::string::npos);
  pid_t init = std::atoi(json.c_str() + pos + 11);
  CHECK(::getsid(init) == init);
  CHECK(::getpgid(init) != ::getpgid(0));
  sb.destroy();
  h.check_no_leaks();
}
