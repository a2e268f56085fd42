#include "network/dns/dns_log_writer.hpp"

#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstring>

namespace sandlet::net {
namespace {

constexpr size_t kHeadSize = offsetof(proto::DnsLog, ring);

void put_text(char* field, size_t size, const std::string& text) {
  std::memset(field, 0, size);
  std::memcpy(field, text.data(), std::min(text.size(), size - 1));
}

}  // namespace

DnsLogWriter::DnsLogWriter(sys::UniqueFd fd) : fd_(std::move(fd)) {
  if (!fd_) return;
  proto::DnsLog& h = head_;
  if (::pread(fd_.get(), &h, kHeadSize, 0) != static_cast<ssize_t>(kHeadSize) || h.magic != proto::kDnsLogMagic ||
      h.version != proto::kDnsLogVersion) {
    std::memset(&h, 0, kHeadSize);
    h.magic = proto::kDnsLogMagic;
    h.version = proto::kDnsLogVersion;
  }
}

void DnsLogWriter::record(proto::DnsVerdict verdict, uint16_t qtype, const std::string& name, uint16_t addresses,
                          const std::string& outcome) noexcept {
  std::lock_guard<std::mutex> lk(mu_);
  if (!fd_) return;
  proto::DnsLog& h = head_;
  switch (verdict) {
    case proto::DnsVerdict::kAnswered: ++h.answered; break;
    case proto::DnsVerdict::kRefused: ++h.refused; break;
    case proto::DnsVerdict::kFailed: ++h.failed; break;
    case proto::DnsVerdict::kDropped: ++h.dropped; break;
  }
  const uint64_t seq = h.last_seq + 1;
  proto::DnsLogRecord r{};
  timespec ts{};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  r.time_ns = static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
  r.verdict = static_cast<uint32_t>(verdict);
  r.qtype = qtype;
  r.addresses = addresses;
  put_text(r.name, sizeof r.name, name);
  put_text(r.outcome, sizeof r.outcome, outcome);
  const off_t at = static_cast<off_t>(offsetof(proto::DnsLog, ring) + ((seq - 1) % proto::kDnsLogRing) * sizeof r);
  // The record with seq 0 first, then its seq, then the header naming it: a reader never takes a half record.
  if (::pwrite(fd_.get(), &r, sizeof r, at) != static_cast<ssize_t>(sizeof r)) return;
  r.seq = seq;
  if (::pwrite(fd_.get(), &r.seq, sizeof r.seq, at) != static_cast<ssize_t>(sizeof r.seq)) return;
  h.last_seq = seq;
  (void)::pwrite(fd_.get(), &h, kHeadSize, 0);
}

}  // namespace sandlet::net
