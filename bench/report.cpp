#include "report.hpp"

#include "capi.hpp"
#include "peers.hpp"
#include "proc.hpp"

#include <sys/utsname.h>
#include <unistd.h>

#include <charconv>
#include <cmath>
#include <ctime>
#include <fstream>

namespace bench {
namespace fs = std::filesystem;
namespace json = boost::json;

json::object host_info() {
  json::object h;
  h["nproc"] = sysconf(_SC_NPROCESSORS_ONLN);
  struct utsname u {};
  if (uname(&u) == 0) {
    h["kernel"] = u.release;
    h["machine"] = u.machine;
  }
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);)
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) h["cpu"] = line.substr(line.find_first_not_of(' ', colon + 1));
      break;
    }
  h["mem_total_mib"] = meminfo()["MemTotal"] / 1024;
  h["sandlet_version"] = sandlet_version_string();
  if (auto v = capture_output("bwrap --version"); !v.empty()) h["bwrap_version"] = v;
  return h;
}

std::string iso_date_utc() {
  const std::time_t t = std::time(nullptr);
  struct tm tm {};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

void put_latency(json::object &out, const Summary &s, double throughput_per_s) {
  put_summary(out, s);
  out["throughput_per_s"] = round3(throughput_per_s);
}

json::object peer_json(const std::string &name, const std::string &command, const Summary &s,
                       double throughput_per_s) {
  json::object p;
  p["name"] = name;
  p["command"] = command;
  put_latency(p, s, throughput_per_s);
  return p;
}

std::set<std::string> sandlet_cgroups() {
  auto dirs = cgroup_dirs_where([](const std::string &name) { return name.find("sandlet") != std::string::npos; });
  return {dirs.begin(), dirs.end()};
}

json::object leftovers(const fs::path &root, const fs::path &rootfs, const std::set<std::string> &cgroups_before) {
  json::object l;
  json::array procs, mounts, cgroups, new_cgroups;
  for (pid_t p : descendants(getpid())) procs.push_back(json::string(std::to_string(p) + " " + proc_comm(p)));
  if (!root.empty())
    for (const auto &m : mounts_under(root.string())) mounts.push_back(json::string(m));
  if (!rootfs.empty())
    for (const auto &m : mounts_under(rootfs.string())) mounts.push_back(json::string(m));
  for (const auto &c : cgroups_matching(SandboxRegistry::instance().ids())) cgroups.push_back(json::string(c));
  for (const auto &c : sandlet_cgroups())
    if (!cgroups_before.count(c)) new_cgroups.push_back(json::string(c));
  l["clean"] = procs.empty() && mounts.empty() && cgroups.empty();
  l["processes"] = procs;
  l["mounts"] = mounts;
  l["cgroups"] = cgroups;
  l["new_sandlet_cgroups"] = new_cgroups;  // may include other users' sandboxes: informational
  return l;
}

namespace {
// Boost.JSON 1.81 prints doubles as "2.002E0"; print the shortest round-trip form ("2.002") instead.
void put_double(std::string &os, double d) {
  if (!std::isfinite(d)) {
    os += "null";
    return;
  }
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof buf, d);
  os.append(buf, res.ptr);
}

bool all_numbers(const json::array &arr) {
  for (const auto &x : arr)
    if (!x.is_number()) return false;
  return true;
}

void write(std::string &os, const json::value &v, bool pretty, std::string &indent) {
  const char *nl = pretty ? "\n" : "";
  switch (v.kind()) {
    case json::kind::object: {
      const auto &obj = v.get_object();
      if (obj.empty()) { os += "{}"; break; }
      os += '{';
      os += nl;
      indent.append(pretty ? 2 : 0, ' ');
      for (auto it = obj.begin(); it != obj.end(); ++it) {
        os += indent;
        os += json::serialize(json::string(it->key()));
        os += pretty ? ": " : ":";
        write(os, it->value(), pretty, indent);
        if (std::next(it) != obj.end()) os += ',';
        os += nl;
      }
      indent.resize(indent.size() - (pretty ? 2 : 0));
      os += indent;
      os += '}';
      break;
    }
    case json::kind::array: {
      const auto &arr = v.get_array();
      if (arr.empty()) { os += "[]"; break; }
      // Number arrays (cdf_ms: 101 values) stay on one line, or they would swamp the pretty output.
      if (pretty && all_numbers(arr)) {
        os += '[';
        for (auto it = arr.begin(); it != arr.end(); ++it) {
          if (it != arr.begin()) os += ", ";
          write(os, *it, false, indent);
        }
        os += ']';
        break;
      }
      os += '[';
      os += nl;
      indent.append(pretty ? 2 : 0, ' ');
      for (auto it = arr.begin(); it != arr.end(); ++it) {
        os += indent;
        write(os, *it, pretty, indent);
        if (std::next(it) != arr.end()) os += ',';
        os += nl;
      }
      indent.resize(indent.size() - (pretty ? 2 : 0));
      os += indent;
      os += ']';
      break;
    }
    case json::kind::double_:
      put_double(os, v.get_double());
      break;
    default:
      os += json::serialize(v);
  }
}
}  // namespace

std::string to_text(const json::value &v, bool pretty) {
  std::string os;
  std::string indent;
  write(os, v, pretty, indent);
  return os;
}

}  // namespace bench
