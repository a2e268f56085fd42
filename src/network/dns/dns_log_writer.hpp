// The gateway's writer of a sandbox's DNS log (proto/dns_log.hpp), the file the library made in the
// sandbox's directory and passed at attach. The gateway's event loop records its decisions; a mutex orders
// any other writer. A gateway that re-attaches a sandbox after a restart carries on from the file's counters.
#pragma once
#include <cstdint>
#include <mutex>
#include <string>

#include "proto/dns_log.hpp"
#include "sys/fd.hpp"

namespace sandlet::net {

class DnsLogWriter final {
 public:
  explicit DnsLogWriter(sys::UniqueFd fd);  // an invalid fd: records nothing
  void record(proto::DnsVerdict verdict, uint16_t qtype, const std::string& name, uint16_t addresses,
              const std::string& outcome) noexcept;

 private:
  std::mutex mu_;
  sys::UniqueFd fd_;
  proto::DnsLog head_{};  // the header part (magic .. dropped) as last written; the ring is not kept here
};

}  // namespace sandlet::net
