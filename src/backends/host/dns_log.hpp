// The host's side of a sandbox's DNS log (proto/dns_log.hpp): the file is made in the sandbox's directory
// at create and handed to the node gateway, whose name gate writes it; anyone reads it, also after the
// sandbox ended (until reclaim removes the directory).
#pragma once
#include <boost/json/object.hpp>
#include <cstdint>
#include <string>

#include "sys/fd.hpp"

namespace sandlet::host {

// `<dir>/dns-log`, zero-filled at its fixed size (`fresh`), or the existing one opened again for a
// gateway that re-attaches the sandbox (made if missing). Read-write, for the gateway.
sys::UniqueFd open_dns_log(const std::string& dir, bool fresh);

// {"answered", "refused", "failed", "dropped": totals, "records": [{"seq", "time_ns", "verdict"
// ("answered", "refused", "failed", "dropped"), "type", "name", "addresses", "outcome"}, oldest first, seq >
// after_seq]}. A missing or unwritten file reads as zeros and no records. Every field is range-checked.
boost::json::object read_dns_log(const std::string& dir, uint64_t after_seq = 0);

}  // namespace sandlet::host
