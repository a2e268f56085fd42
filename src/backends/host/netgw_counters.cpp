#include "backends/host/netgw_counters.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <cerrno>

#include "common/error.hpp"
#include "proto/netgw_counters.hpp"

namespace sandlet::host {

sys::UniqueFd open_netgw_counters(const std::string& dir, bool fresh) {
  const std::string path = netgw_counters_path(dir);
  sys::UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC | (fresh ? O_TRUNC : 0), 0600));
  if (!fd) throw_errno("open " + path);
  return fd;
}

boost::json::object read_netgw_counters(const std::string& path, bool node) {
  proto::NetgwCounters c{};
  const sys::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd && errno != ENOENT) throw_errno("open " + path);
  const bool valid = fd && ::pread(fd.get(), &c, sizeof c, 0) == static_cast<ssize_t>(sizeof c) &&
                     c.magic == proto::kNetgwCountersMagic && c.version == proto::kNetgwCountersVersion;
  boost::json::object out;
  const uint32_t n = node ? proto::kGwCounterCount : proto::kGwRestarts;
  for (uint32_t i = 0; i < n; ++i) out[proto::kNetgwCounterNames[i]] = valid ? c.v[i] : 0;
  return out;
}

}  // namespace sandlet::host
