// The default seccomp profile is installed in every sandbox and denies what docs/POLICY.md says, with EPERM,
// as root inside too; calls of other ABIs kill the process; relaxations and extra denials of the spec take
// effect. Fails when the filter is off: test/helper/seccomp_probe.c makes each denied call with arguments
// for which the kernel alone answers something else.
#include <cerrno>
#include <cstring>
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
    CHECK(info.find(R"("effective_policy":{"seccomp":{"profile":"default-v1","requested":"default")") !=
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
