#include "backends/host/dns_log.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <boost/json.hpp>
#include <cerrno>
#include <cstring>
#include <memory>

#include "common/error.hpp"
#include "proto/dns_log.hpp"

namespace sandlet::host {
namespace {

constexpr const char* kFile = "/dns-log";

// A NUL-padded text field: up to its first NUL or its end, never past it.
std::string text_of(const char* field, size_t size) {
  return std::string(field, static_cast<size_t>(std::find(field, field + size, '\0') - field));
}

const char* verdict_name(uint32_t v) {
  switch (static_cast<proto::DnsVerdict>(v)) {
    case proto::DnsVerdict::kAnswered: return "answered";
    case proto::DnsVerdict::kRefused: return "refused";
    case proto::DnsVerdict::kFailed: return "failed";
    case proto::DnsVerdict::kDropped: return "dropped";
  }
  return nullptr;
}

std::string type_name(uint16_t t) {
  return t == 1 ? "A" : t == 28 ? "AAAA" : t == 5 ? "CNAME" : std::to_string(t);
}

}  // namespace

sys::UniqueFd open_dns_log(const std::string& dir, bool fresh) {
  const std::string path = dir + kFile;
  sys::UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC | (fresh ? O_TRUNC : 0), 0600));
  if (!fd) throw_errno("open " + path);
  if (::ftruncate(fd.get(), proto::kDnsLogSize) != 0) throw_errno("size " + path);
  return fd;
}

boost::json::object read_dns_log(const std::string& dir, uint64_t after_seq) {
  boost::json::object out{{"answered", 0}, {"refused", 0}, {"failed", 0}, {"dropped", 0}};
  boost::json::array records;
  const std::string path = dir + kFile;
  sys::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd) {
    if (errno != ENOENT) throw_errno("open " + path);
    out["records"] = std::move(records);
    return out;
  }
  auto log = std::make_unique<proto::DnsLog>();
  std::memset(log.get(), 0, sizeof *log);
  const ssize_t n = ::pread(fd.get(), log.get(), sizeof *log, 0);
  if (n < 0) throw_errno("read " + path);
  if (static_cast<size_t>(n) == sizeof *log && log->magic == proto::kDnsLogMagic && log->version == proto::kDnsLogVersion) {
    out["answered"] = log->answered;
    out["refused"] = log->refused;
    out["failed"] = log->failed;
    out["dropped"] = log->dropped;
    // The ring holds seq last_seq-63 .. last_seq; a slot whose seq does not match was being rewritten.
    const uint64_t last = log->last_seq;
    const uint64_t first = last > proto::kDnsLogRing ? last - proto::kDnsLogRing + 1 : 1;
    for (uint64_t seq = std::max(first, after_seq + 1); seq <= last && seq != 0; ++seq) {
      const proto::DnsLogRecord& r = log->ring[(seq - 1) % proto::kDnsLogRing];
      const char* verdict = verdict_name(r.verdict);
      if (r.seq != seq || !verdict) continue;
      records.push_back(boost::json::object{{"seq", r.seq},
                                            {"time_ns", r.time_ns},
                                            {"verdict", verdict},
                                            {"type", type_name(r.qtype)},
                                            {"name", text_of(r.name, sizeof r.name)},
                                            {"addresses", r.addresses},
                                            {"outcome", text_of(r.outcome, sizeof r.outcome)}});
    }
  }
  out["records"] = std::move(records);
  return out;
}

}  // namespace sandlet::host
