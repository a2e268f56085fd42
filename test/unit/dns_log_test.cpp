// The DNS log between its writer (the gateway's, net/dns_log_writer) and the library's reader
// (backends/host/dns_log): what is recorded is read back, the ring keeps the last 64, a writer
// opened again carries on, and a damaged file reads as nothing rather than as garbage.
#include <catch2/catch.hpp>
#include <fcntl.h>
#include <unistd.h>

#include <boost/json.hpp>

#include "backends/host/dns_log.hpp"
#include "network/dns/dns_log_writer.hpp"
#include "unit_helpers.hpp"

using namespace sandlet;
using proto::DnsVerdict;

TEST_CASE("dns log: records and totals read back, oldest first, after a given seq", "[dns][dns-log]") {
  unit::TempDir tmp("dnslog");
  {
    net::DnsLogWriter w(host::open_dns_log(tmp.path, true));
    w.record(DnsVerdict::kAnswered, 1, "mirror.test", 2, "answered by 10.0.0.53:53: 2 address(es) for mirror.test");
    w.record(DnsVerdict::kRefused, 1, "other.test", 0, "refused: other.test is in no rule");
    w.record(DnsVerdict::kFailed, 28, "mirror.test", 0, "servfail: 10.0.0.53:53 timed out");
    w.record(DnsVerdict::kDropped, 0, "", 0, "dropped: too many queries in flight");
  }
  const boost::json::object all = host::read_dns_log(tmp.path);
  CHECK(all.at("answered").to_number<int>() == 1);
  CHECK(all.at("refused").to_number<int>() == 1);
  CHECK(all.at("failed").to_number<int>() == 1);
  CHECK(all.at("dropped").to_number<int>() == 1);
  const boost::json::array& r = all.at("records").as_array();
  REQUIRE(r.size() == 4);
  CHECK(r[0].at("verdict").as_string() == "answered");
  CHECK(r[0].at("name").as_string() == "mirror.test");
  CHECK(r[0].at("type").as_string() == "A");
  CHECK(r[0].at("addresses").to_number<int>() == 2);
  CHECK(r[2].at("type").as_string() == "AAAA");
  CHECK(r[3].at("verdict").as_string() == "dropped");
  CHECK(host::read_dns_log(tmp.path, 3).at("records").as_array().size() == 1);

  // Opened again (a restarted gateway): the counts go on, the records too.
  {
    net::DnsLogWriter w(host::open_dns_log(tmp.path, false));
    for (int i = 0; i < 100; ++i) w.record(DnsVerdict::kAnswered, 1, "n" + std::to_string(i) + ".test", 1, "ok");
  }
  const boost::json::object later = host::read_dns_log(tmp.path);
  CHECK(later.at("answered").to_number<int>() == 101);
  const boost::json::array& kept = later.at("records").as_array();
  REQUIRE(kept.size() == proto::kDnsLogRing);
  CHECK(kept.front().at("seq").to_number<int>() == 104 - 63);
  CHECK(kept.back().at("name").as_string() == "n99.test");
}

TEST_CASE("dns log: long fields are cut, a damaged or missing file reads as empty", "[dns][dns-log]") {
  unit::TempDir tmp("dnslog");
  CHECK(host::read_dns_log(tmp.path).at("records").as_array().empty());  // no file yet
  {
    net::DnsLogWriter w(host::open_dns_log(tmp.path, true));
    w.record(DnsVerdict::kRefused, 1, std::string(400, 'a'), 0, std::string(400, 'b'));
  }
  const boost::json::array r = host::read_dns_log(tmp.path).at("records").as_array();
  REQUIRE(r.size() == 1);
  CHECK(r[0].at("name").as_string().size() == proto::kDnsLogName - 1);
  CHECK(r[0].at("outcome").as_string().size() == proto::kDnsLogOutcome - 1);
  // Garbage in the verdict and a wrong seq: left out. A wrong magic: nothing at all.
  const std::string path = tmp.path + "/dns-log";
  const int fd = ::open(path.c_str(), O_RDWR);
  REQUIRE(fd >= 0);
  const uint32_t bad = 77;
  const off_t verdict_at = static_cast<off_t>(offsetof(proto::DnsLog, ring) + offsetof(proto::DnsLogRecord, verdict));
  REQUIRE(::pwrite(fd, &bad, sizeof bad, verdict_at) == sizeof bad);
  CHECK(host::read_dns_log(tmp.path).at("records").as_array().empty());
  REQUIRE(::pwrite(fd, &bad, sizeof bad, 0) == sizeof bad);
  CHECK(host::read_dns_log(tmp.path).at("refused").to_number<int>() == 0);
  ::close(fd);
}
