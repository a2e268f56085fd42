// The default seccomp profile is installed in every sandbox and denies what docs/POLICY.md says, with EPERM,
// as root inside too; calls of other ABIs kill the process; relaxations and extra denials of the spec take
// effect. Fails when the filter is off: test/helper/seccomp_probe.c makes each denied call with arguments
// for which the kernel alone answers something else.
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <sstream>

#include <boost/json.hpp>

#include <csignal>
#include <iostream>

#include "integration/harness.hpp"

namespace {

// "Key:\tvalue" lines and "name errno" lines of the probe's output.
struct ProbeOutput {
  std::map<std::string, std::string> status;
  std::map<std::string, int> errnos;
};

ProbeOutput run_probe(sandlet::Sandbox& sb, const std::string& user, const std::string& mode = "") {
  sandlet::ExecOptions o({"/tmp/seccomp-probe"});
  if (!mode.empty()) o.argv.push_back(mode);
  o.user = user;
  auto r = sb.exec(o);
  INFO(r.stdout_data << r.stderr_data);
  REQUIRE(r.exit_code == 0);
  ProbeOutput out;
  std::istringstream lines(r.stdout_data);
  for (std::string line; std::getline(lines, line);) {
    const size_t colon = line.find(":\t");
    if (colon != std::string::npos) {
      out.status[line.substr(0, colon)] = line.substr(colon + 2);
      continue;
    }
    const size_t sp = line.find(' ');
    REQUIRE(sp != std::string::npos);
    out.errnos[line.substr(0, sp)] = std::stoi(line.substr(sp + 1));
  }
  return out;
}

// A sandbox of the test root filesystem with `policy` (JSON) and the probe copied in.
sandlet::Sandbox probed(Harness& h, const std::string& policy) {
  std::string spec = "{\"layers\": [\"" SANDLET_TEST_ROOTFS "\"]";
  if (!policy.empty()) spec += ", \"policy\": " + policy;
  auto sb = h.rt().create(sandlet::Spec::from_json(spec + "}"));
  const std::string probe = slurp(SANDLET_SECCOMP_PROBE);
  REQUIRE_FALSE(probe.empty());
  sb.write_file("/tmp/seccomp-probe", probe, 0755);
  return sb;
}

}  // namespace

TEST_CASE("the default seccomp profile is installed and denies its calls with EPERM", "[security][seccomp]") {
  Harness h;
  auto sb = h.rt().create(Harness::spec());
  const std::string probe = slurp(SANDLET_SECCOMP_PROBE);
  INFO("probe " << SANDLET_SECCOMP_PROBE);
  REQUIRE_FALSE(probe.empty());
  sb.write_file("/tmp/seccomp-probe", probe, 0755);
  for (const char* user : {"0", "sandbox"}) {
    INFO("as user " << user);
    ProbeOutput p = run_probe(sb, user);
    CHECK(p.status["Seccomp"] == "2");  // SECCOMP_MODE_FILTER
    REQUIRE_FALSE(p.status["Seccomp_filters"].empty());
    CHECK(std::stoi(p.status["Seccomp_filters"]) >= 1);
    CHECK(p.status["NoNewPrivs"] == "1");
    CHECK(p.errnos.size() == 58);  // every probe reported
    for (const auto& [name, err] : p.errnos) {
      INFO(name << " gave errno " << err << " (" << std::strerror(err) << ")");
      CHECK(err == (name.rfind("allowed_", 0) == 0 ? 0 : EPERM));
    }
  }
  // The init (the agent) runs under it too, so whatever it spawns does.
  CHECK(run_out(sb, "grep '^Seccomp:' /proc/1/status | tr -d '\\t'") == "Seccomp:2\n");
  h.check_no_leaks();
}

TEST_CASE("calls of other ABIs (x32, i386 through int 0x80) kill the process, as root too", "[security][seccomp]") {
  Harness h;
  auto sb = probed(h, "");
  for (const char* user : {"0", "sandbox"}) {
    for (const char* abi : {"x32", "int80"}) {
      INFO("as user " << user << ", " << abi);
      sandlet::ExecOptions o({"/tmp/seccomp-probe", abi});
      o.user = user;
      auto r = sb.exec(o);
      INFO(r.stdout_data << r.stderr_data);
      CHECK(r.signal == SIGSYS);
      CHECK(r.stdout_data.find("returned") == std::string::npos);
    }
  }
  h.check_no_leaks();
}

TEST_CASE("the ptrace relaxation allows tracing the sandbox's own processes, never the init", "[security][seccomp]") {
  Harness h;
  {
    auto sb = probed(h, "");
    ProbeOutput p = run_probe(sb, "0", "ptrace");
    CHECK(p.errnos["ptrace_attach_child"] == EPERM);
    CHECK(p.errnos["ptrace_attach_init"] == EPERM);
    CHECK(p.errnos["open_init_mem"] != 0);
  }
  {
    auto sb = probed(h, R"({"seccomp": {"allow": ["ptrace"]}})");
    ProbeOutput p = run_probe(sb, "0", "ptrace");
    CHECK(p.errnos["ptrace_attach_child"] == 0);
    CHECK(p.errnos["ptrace_peek_child"] == 0);
    CHECK(p.errnos["peeked_marker"] == 1);
    // The init is not dumpable and belongs to the host's user namespace's view: still refused.
    CHECK(p.errnos["ptrace_attach_init"] == EPERM);
    CHECK(p.errnos["open_init_mem"] != 0);
    // The rest of the profile stays.
    CHECK(run_probe(sb, "0", "io_uring").errnos["io_uring_setup"] == EPERM);
    const std::string info = sb.info_json();
    CHECK(info.find(R"("effective_policy":{"seccomp":{"profile":"default-v2","requested":"default")") !=
          std::string::npos);
    CHECK(info.find(R"("relaxations":[{"name":"ptrace")") != std::string::npos);
  }
  h.check_no_leaks();
}

TEST_CASE("the io_uring relaxation allows io_uring_setup", "[security][seccomp]") {
  Harness h;
  auto sb = probed(h, R"({"seccomp": {"allow": ["io_uring"]}})");
  const int err = run_probe(sb, "0", "io_uring").errnos["io_uring_setup"];
  if (err == ENOSYS || err == EPERM) {
    // io_uring disabled on the host (kernel.io_uring_disabled) answers the same: then there is nothing to see.
    const std::string disabled = slurp("/proc/sys/kernel/io_uring_disabled");
    if (!disabled.empty() && disabled[0] != '0') {
      std::cout << "SANDLET-SKIP: io_uring is disabled on this host (kernel.io_uring_disabled)" << std::endl;
      return;
    }
  }
  CHECK(err == 0);
  h.check_no_leaks();
}

TEST_CASE("deny makes the profile stricter", "[security][seccomp]") {
  Harness h;
  {
    auto sb = probed(h, "");
    CHECK(run_probe(sb, "0", "getcwd").errnos["getcwd"] == 0);
  }
  auto sb = probed(h, R"({"seccomp": {"profile": "default-v1", "deny": ["getcwd"]}})");
  CHECK(run_probe(sb, "0", "getcwd").errnos["getcwd"] == EPERM);
  CHECK(run_probe(sb, "sandbox", "getcwd").errnos["getcwd"] == EPERM);
  // The rest of the profile stays and the sandbox works.
  CHECK(run_probe(sb, "0", "ptrace").errnos["ptrace_attach_child"] == EPERM);
  CHECK(run_out(sb, "echo ok") == "ok\n");
  CHECK(sb.info_json().find(R"("extra_denied":["getcwd"])") != std::string::npos);
  h.check_no_leaks();
}

TEST_CASE("a spec with a bad policy is refused before anything is made", "[security][seccomp]") {
  Harness h;
  const std::string spec = R"({"layers": [")" SANDLET_TEST_ROOTFS R"("], "policy": {"seccomp": {"allow": ["mount"]}}})";
  try {
    sandlet::Spec::from_json(spec);
    FAIL("accepted");
  } catch (const sandlet::Error& e) {
    CHECK(std::string(e.what()).find("policy.seccomp.allow[0]") != std::string::npos);
  }
  h.check_no_leaks();
}

namespace {

uint64_t json_count(const boost::json::object& o, std::string_view key) {
  const boost::json::value* v = o.if_contains(key);
  return v ? v->to_number<uint64_t>() : 0;
}

}  // namespace

TEST_CASE("seccomp denials are counted, recorded and audited, and still fail with EPERM", "[security][seccomp]") {
  Harness h;
  {
    // Commands that make no denied call leave the counters at zero: the agent itself makes none.
    auto quiet = probed(h, "");
    CHECK(run_out(quiet, "echo ok; ls / > /dev/null; cat /proc/self/status > /dev/null; echo done") == "ok\ndone\n");
    const boost::json::object s = boost::json::parse(quiet.seccomp_stats_json()).as_object();
    INFO(boost::json::serialize(s));
    CHECK(s.at("counted").as_bool());
    CHECK(json_count(s, "denied") == 0);
    CHECK(s.at("records").as_array().empty());
  }
  auto sb = probed(h, "");
  ProbeOutput p = run_probe(sb, "0");
  size_t eperm = 0;
  for (const auto& [name, err] : p.errnos) eperm += err == EPERM;
  REQUIRE(eperm >= 40);
  const boost::json::object s = boost::json::parse(sb.seccomp_stats_json()).as_object();
  INFO(boost::json::serialize(s));
  CHECK(s.at("counted").as_bool());
  // Each denied probe is one denial (a few EPERMs of the probe come from the kernel, not the filter).
  CHECK(json_count(s, "denied") >= eperm - 4);
  CHECK(json_count(s, "denied") <= p.errnos.size());
  const boost::json::object& by = s.at("by_syscall").as_object();
  for (const char* name : {"mount", "unshare", "setns", "bpf", "keyctl", "userfaultfd", "ioctl", "personality"}) {
    INFO(name);
    CHECK(json_count(by, name) >= 1);
  }
  CHECK(json_count(by, "ioctl") >= 7);  // the extent-swapping and clone ioctls
  const boost::json::array& records = s.at("records").as_array();
  REQUIRE_FALSE(records.empty());
  CHECK(records.size() == std::min<uint64_t>(json_count(s, "denied"), 64));
  const boost::json::object& first = records.front().as_object();
  CHECK(first.at("seq").to_number<uint64_t>() >= 1);
  CHECK(first.at("pid").to_number<uint64_t>() > 1);  // the probe, not the init
  CHECK(first.at("time_ns").to_number<uint64_t>() > 1'600'000'000'000'000'000ull);
  const std::string id = sb.id();
  const uint64_t denied = json_count(s, "denied");
  sb.destroy();
  // The last denials reach the audit log when the sandbox ends, with the totals in its destroy record.
  auto reader = sandlet::AuditReader::open(h.rt().audit_path(), sandlet::AuditFilter{id});
  size_t audited = 0;
  bool totals = false;
  while (auto line = reader.next()) {
    if (line->find(R"("event":"denial")") != std::string::npos && line->find(R"("kind":"seccomp")") != std::string::npos)
      ++audited;
    if (line->find(R"("event":"destroy")") != std::string::npos &&
        line->find(R"("seccomp":{"counted":true,"denied":)" + std::to_string(denied)) != std::string::npos)
      totals = true;
  }
  CHECK(audited == std::min<uint64_t>(denied, 64));
  CHECK(totals);
  h.check_no_leaks();
}

// ---- socket families (default-v2) ----------------------------------------------------------------------

namespace {

bool listed_family(int family) { return family == 1 || family == 2 || family == 10 || family == 16; }

// What this kernel answers socket(AF_VSOCK, SOCK_STREAM) with, outside any filter (created and closed at
// once: never connected, which would reach the hypervisor of this machine).
int host_vsock_errno() {
  const int fd = ::socket(40 /* AF_VSOCK */, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return errno;
  ::close(fd);
  return 0;
}

}  // namespace

TEST_CASE("socket families outside the list fail with EAFNOSUPPORT, netlink protocols with EPROTONOSUPPORT",
          "[security][seccomp]") {
  Harness h;
  auto sb = probed(h, "");
  for (const char* user : {"0", "sandbox"}) {
    INFO("as user " << user);
    ProbeOutput p = run_probe(sb, user, "sockets");
    for (int f = 0; f < 48; ++f) {
      const std::string name = "socket_" + std::to_string(f);
      INFO(name << ": " << std::strerror(p.errnos.at(name)));
      if (listed_family(f)) CHECK(p.errnos.at(name) == 0);
      else CHECK(p.errnos.at(name) == EAFNOSUPPORT);  // the policy's answer, not EPERM, not the kernel's
    }
    for (int proto = 0; proto < 34; ++proto) {
      const std::string name = "netlink_" + std::to_string(proto);
      INFO(name << ": " << std::strerror(p.errnos.at(name)));
      CHECK(p.errnos.at(name) == (proto == 0 || proto == 4 ? 0 : EPROTONOSUPPORT));
    }
    // The upper half of the register set: refused, an allowed family's lower half included.
    for (const char* name : {"high_1", "high_2", "high_10", "high_16", "high_17", "high_40"}) {
      INFO(name);
      CHECK(p.errnos.at(name) == EAFNOSUPPORT);
    }
    CHECK(p.errnos.at("socketpair_1") == 0);
    CHECK(p.errnos.at("socketpair_40") == EAFNOSUPPORT);
    // What libc asks NETLINK_ROUTE still works.
    CHECK(p.errnos.at("getifaddrs") == 0);
    CHECK(p.errnos.at("if_nameindex") == 0);
  }
  // Ordinary tools: busybox's ip speaks NETLINK_ROUTE.
  CHECK(run_out(sb, "ip addr show lo | grep -c 'inet 127.0.0.1'") == "1\n");
  CHECK(run_out(sb, "ip link show lo >/dev/null && ip route show table all >/dev/null && echo ok") == "ok\n");

  // Each refusal is counted and recorded like any denial, with the family by name.
  const boost::json::object s = boost::json::parse(sb.seccomp_stats_json()).as_object();
  INFO(boost::json::serialize(s));
  CHECK(s.at("counted").as_bool());
  CHECK(json_count(s.at("by_syscall").as_object(), "socket") >= 2 * (44 + 30 + 6));
  CHECK(json_count(s.at("by_syscall").as_object(), "socketpair") >= 2);
  bool vsock_recorded = false;
  for (const boost::json::value& r : s.at("records").as_array()) {
    const boost::json::object& o = r.as_object();
    if (o.at("syscall").as_string() != "socket" || !o.contains("family") || !o.at("family").is_string()) continue;
    if (o.at("family").as_string() != "AF_VSOCK") continue;
    vsock_recorded = true;
    CHECK(o.at("errno").to_number<int>() == EAFNOSUPPORT);
    CHECK(o.at("args").as_array().at(0).to_number<uint64_t>() == 40);
  }
  CHECK(vsock_recorded);
  const std::string id = sb.id();
  sb.destroy();
  auto reader = sandlet::AuditReader::open(h.rt().audit_path(), sandlet::AuditFilter{id});
  bool audited = false;
  while (auto line = reader.next())
    if (line->find(R"("event":"denial")") != std::string::npos && line->find(R"("kind":"seccomp")") != std::string::npos &&
        line->find(R"("family":"AF_VSOCK")") != std::string::npos && line->find(R"("errno":97)") != std::string::npos)
      audited = true;
  CHECK(audited);
  h.check_no_leaks();
}

TEST_CASE("the vsock and netlink relaxations; default-v1 keeps every family", "[security][seccomp]") {
  Harness h;
  const int host_vsock = host_vsock_errno();
  INFO("AF_VSOCK on this host: " << std::strerror(host_vsock));
  {
    auto sb = probed(h, R"({"seccomp": {"allow": ["vsock"]}})");
    ProbeOutput p = run_probe(sb, "0", "sockets");
    // The socket is made (where this kernel has vsock), never connected.
    CHECK(p.errnos.at("socket_40") == host_vsock);
    CHECK(p.errnos.at("high_40") == EAFNOSUPPORT);  // the relaxation names AF_VSOCK, not its disguises
    CHECK(p.errnos.at("socket_17") == EAFNOSUPPORT);
    CHECK(p.errnos.at("netlink_9") == EPROTONOSUPPORT);
    CHECK(sb.info_json().find(R"({"name":"vsock","syscalls":[],"arguments":["AF_VSOCK"]})") != std::string::npos);
  }
  {
    auto sb = probed(h, R"({"seccomp": {"allow": ["netlink"]}})");
    ProbeOutput p = run_probe(sb, "0", "sockets");
    CHECK(p.errnos.at("netlink_0") == 0);
    CHECK(p.errnos.at("netlink_16") == 0);  // NETLINK_GENERIC: in every kernel
    CHECK(p.errnos.at("socket_40") == EAFNOSUPPORT);
  }
  {
    // The released default-v1 has no family rules: the kernel answers.
    auto sb = probed(h, R"({"seccomp": {"profile": "default-v1"}})");
    ProbeOutput p = run_probe(sb, "0", "sockets");
    CHECK(p.errnos.at("socket_40") == host_vsock);
    CHECK(p.errnos.at("netlink_16") == 0);
    CHECK(sb.info_json().find(R"("profile":"default-v1")") != std::string::npos);
  }
  h.check_no_leaks();
}

TEST_CASE("python and libc networking work under the default profile (Debian base)", "[security][seccomp]") {
  const char* cache = std::getenv("SANDLET_CACHE");
  const std::string base = std::string(cache ? cache : "/var/cache/sandlet") + "/debian-bookworm-minbase";
  if (!std::filesystem::exists(base + "/complete") || !std::filesystem::exists(base + "/rootfs/usr/bin/python3")) {
    std::cout << "SANDLET-SKIP: no Debian base (scripts/debian-base.sh builds it)" << std::endl;
    return;
  }
  Harness h;
  auto sb = h.rt().create(sandlet::Spec().layer(base + "/rootfs"));
  const std::string script =
      "import errno, socket\n"
      "open('/etc/hosts', 'a').write('127.0.0.1 seccomp-test-host\\n::1 seccomp-test-host\\n')\n"
      "print(sorted({a[4][0] for a in socket.getaddrinfo('seccomp-test-host', 80, flags=socket.AI_ADDRCONFIG)}))\n"
      "print([n for _, n in socket.if_nameindex()])\n"
      "s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM); s.bind(('::1', 0)); s.listen()\n"
      "c = socket.create_connection(('::1', s.getsockname()[1])); a, _ = s.accept(); c.sendall(b'x')\n"
      "print(a.recv(1))\n"
      "for fam in ('AF_VSOCK', 'AF_PACKET', 'AF_ALG', 'AF_TIPC', 'AF_KEY'):\n"
      "    try:\n"
      "        socket.socket(getattr(socket, fam), socket.SOCK_DGRAM if fam != 'AF_ALG' else socket.SOCK_SEQPACKET)\n"
      "        print(fam, 'made')\n"
      "    except OSError as e:\n"
      "        print(fam, errno.errorcode[e.errno])\n";
  sb.write_file("/tmp/net.py", script);
  const std::string out = run_out(sb, "python3 /tmp/net.py && ps -e >/dev/null && echo ps-ok");
  INFO(out);
  CHECK(out.find("'127.0.0.1'") < out.find('\n'));  // getaddrinfo (NSS files, AI_ADDRCONFIG's netlink)
  CHECK(out.find("\n['lo']\nb'x'\n") != std::string::npos);  // if_nameindex (NETLINK_ROUTE); TCP over ::1
  CHECK(out.find("AF_VSOCK EAFNOSUPPORT\nAF_PACKET EAFNOSUPPORT\nAF_ALG EAFNOSUPPORT\nAF_TIPC EAFNOSUPPORT\n"
                 "AF_KEY EAFNOSUPPORT\nps-ok\n") != std::string::npos);
  h.check_no_leaks();
}
