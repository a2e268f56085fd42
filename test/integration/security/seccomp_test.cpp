// The baseline seccomp filter is installed in every sandbox and denies what the profile says, with the
// profile's errno (EPERM). Fails when the filter is off: test/helper/seccomp_probe.c makes each denied
// call with arguments for which the kernel alone answers something else.
#include <cerrno>
#include <cstring>
#include <map>
#include <sstream>

#include "integration/harness.hpp"

namespace {

// "Key:\tvalue" lines and "name errno" lines of the probe's output.
struct ProbeOutput {
  std::map<std::string, std::string> status;
  std::map<std::string, int> errnos;
};

ProbeOutput run_probe(sandlet::Sandbox& sb, const std::string& user) {
  sandlet::ExecOptions o({"/tmp/seccomp-probe"});
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

}  // namespace

TEST_CASE("the baseline seccomp filter is installed and denies its calls with EPERM", "[security][seccomp]") {
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
    CHECK(p.errnos.size() == 32);  // every probe reported
    for (const auto& [name, err] : p.errnos) {
      INFO(name << " gave errno " << err << " (" << std::strerror(err) << ")");
      CHECK(err == EPERM);
    }
  }
  // The init (the agent) runs under it too, so whatever it spawns does.
  CHECK(run_out(sb, "grep '^Seccomp:' /proc/1/status | tr -d '\\t'") == "Seccomp:2\n");
  h.check_no_leaks();
}
