#include "backends/container/denial_log.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <boost/json.hpp>
#include <cerrno>
#include <cstring>
#include <vector>

#include "common/error.hpp"
#include "policy/seccomp/profile_rules.hpp"
#include "proto/denial_log.hpp"

namespace sandlet::container {
namespace {

constexpr const char* kFile = "/seccomp-denials";

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
  proto::DenialLog log;
  std::memset(&log, 0, sizeof log);
  const ssize_t n = ::pread(fd.get(), &log, sizeof log, 0);
  if (n < 0) throw_errno("read " + path);
  if (static_cast<size_t>(n) != sizeof log || log.magic != proto::kDenialLogMagic ||
      log.version != proto::kDenialLogVersion)
    return out;  // the init never started counting (or this is not our file)
  out["counted"] = log.counting == 1;
  out["denied"] = log.total;
  boost::json::object by;
  for (uint32_t nr = 0; nr < proto::kDenialLogSyscalls; ++nr)
    if (log.by_nr[nr]) by[seccomp::syscall_name(static_cast<int>(nr))] = log.by_nr[nr];
  if (log.other) by["other"] = log.other;
  out["by_syscall"] = std::move(by);
  // The ring holds seq last_seq-63 .. last_seq, each at its slot; a slot whose seq does not match was being
  // rewritten when it was read (or is garbage) and is left out.
  std::vector<const proto::DenialRecord*> kept;
  const uint64_t last = log.last_seq;
  const uint64_t first = last > proto::kDenialLogRing ? last - proto::kDenialLogRing + 1 : 1;
  for (uint64_t seq = std::max(first, after_seq + 1); seq <= last && seq != 0; ++seq) {
    const proto::DenialRecord& r = log.ring[(seq - 1) % proto::kDenialLogRing];
    if (r.seq == seq) kept.push_back(&r);
  }
  boost::json::array records;
  for (const proto::DenialRecord* r : kept) {
    boost::json::object o;
    o["seq"] = r->seq;
    o["syscall"] = seccomp::syscall_name(static_cast<int>(std::min<uint32_t>(r->nr, 1u << 20)));
    o["nr"] = r->nr;
    o["pid"] = r->pid;
    o["time_ns"] = r->time_ns;
    records.push_back(std::move(o));
  }
  out["records"] = std::move(records);
  return out;
}

}  // namespace sandlet::container
