#include "backends/container/denial_log.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <boost/json.hpp>
#include <cerrno>
#include <cstring>

#include "common/error.hpp"
#include "policy/seccomp/profile_rules.hpp"
#include "policy/seccomp/profile_table.hpp"
#include "proto/denial_log.hpp"

namespace sandlet::container {
namespace {

constexpr const char* kFile = "/seccomp-denials";

// What a version 2 record adds: the errno the caller got and the arguments, with a socket call's family
// by name (how a refused family, AF_VSOCK say, shows in `policy stats` and the audit log).
void add_detail(boost::json::object& o, const proto::DenialRecord& r, const std::string& syscall) {
  o["errno"] = r.error;
  boost::json::array args;
  for (uint64_t a : r.args) args.push_back(a);
  o["args"] = std::move(args);
  if (syscall == "socket" || syscall == "socketpair") {
    const std::string_view family = seccomp::socket_family_name(r.args[0]);
    if (family.empty()) o["family"] = r.args[0];
    else o["family"] = boost::json::string(family.data(), family.size());
  }
}
void add_detail(boost::json::object&, const proto::v1::DenialRecord&, const std::string&) {}

template <typename Log>
void read_log(int fd, const std::string& path, uint64_t after_seq, boost::json::object& out) {
  Log log;
  std::memset(&log, 0, sizeof log);
  const ssize_t n = ::pread(fd, &log, sizeof log, 0);
  if (n < 0) throw_errno("read " + path);
  if (static_cast<size_t>(n) != sizeof log) return;
  out["counted"] = log.counting == 1;
  out["denied"] = log.total;
  boost::json::object by;
  for (uint32_t nr = 0; nr < proto::kDenialLogSyscalls; ++nr)
    if (log.by_nr[nr]) by[seccomp::syscall_name(static_cast<int>(nr))] = log.by_nr[nr];
  if (log.other) by["other"] = log.other;
  out["by_syscall"] = std::move(by);
  // The ring holds seq last_seq-63 .. last_seq, each at its slot; a slot whose seq does not match was being
  // rewritten when it was read (or is garbage) and is left out.
  boost::json::array records;
  const uint64_t last = log.last_seq;
  const uint64_t first = last > proto::kDenialLogRing ? last - proto::kDenialLogRing + 1 : 1;
  for (uint64_t seq = std::max(first, after_seq + 1); seq <= last && seq != 0; ++seq) {
    const auto& r = log.ring[(seq - 1) % proto::kDenialLogRing];
    if (r.seq != seq) continue;
    boost::json::object o;
    const std::string syscall = seccomp::syscall_name(static_cast<int>(std::min<uint32_t>(r.nr, 1u << 20)));
    o["seq"] = r.seq;
    o["syscall"] = syscall;
    o["nr"] = r.nr;
    o["pid"] = r.pid;
    o["time_ns"] = r.time_ns;
    add_detail(o, r, syscall);
    records.push_back(std::move(o));
  }
  out["records"] = std::move(records);
}

}  // namespace

sys::UniqueFd make_denial_log(const std::string& dir) {
  const std::string path = dir + kFile;
  sys::UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!fd) throw_errno("create " + path);
  if (::ftruncate(fd.get(), proto::kDenialLogSize) != 0) throw_errno("size " + path);
  return fd;
}

boost::json::object read_denial_log(const std::string& dir, uint64_t after_seq) {
  boost::json::object out;
  out["counted"] = false;
  out["denied"] = 0;
  out["by_syscall"] = boost::json::object();
  out["records"] = boost::json::array();
  const std::string path = dir + kFile;
  sys::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd) {
    if (errno == ENOENT) return out;
    throw_errno("open " + path);
  }
  uint32_t head[2] = {0, 0};  // magic, version: the same place in every version
  const ssize_t n = ::pread(fd.get(), head, sizeof head, 0);
  if (n < 0) throw_errno("read " + path);
  if (static_cast<size_t>(n) != sizeof head || head[0] != proto::kDenialLogMagic) return out;
  if (head[1] == proto::kDenialLogVersion) read_log<proto::DenialLog>(fd.get(), path, after_seq, out);
  else if (head[1] == proto::v1::kVersion) read_log<proto::v1::DenialLog>(fd.get(), path, after_seq, out);
  // Another version: the init never started counting, or this is not our file.
  return out;
}

}  // namespace sandlet::container
