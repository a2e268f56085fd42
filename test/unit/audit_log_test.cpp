// The audit log's writer and reader on a plain directory (no sandbox): line format and caps, rotation,
// a reader that keeps its place across rotations, filters, and a writer that cannot write.
#include <sys/stat.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "runtime/audit/audit_log.hpp"
#include "runtime/audit/audit_reader.hpp"
#include "runtime/audit/audit_text.hpp"

namespace fs = std::filesystem;
namespace json = boost::json;

namespace {

struct TempDir {
  TempDir() {
    char tmpl[] = "/tmp/sandlet-audit-unit-XXXXXX";
    path = ::mkdtemp(tmpl);
  }
  ~TempDir() { fs::remove_all(path); }
  std::string path;
};

std::vector<json::object> drain(sandlet::AuditReader& r) {
  std::vector<json::object> out;
  std::string line;
  while (r.next(&line)) out.push_back(json::parse(line).as_object());
  return out;
}

}  // namespace

TEST_CASE("audit_time is RFC 3339 UTC with microseconds", "[audit]") {
  CHECK(sandlet::audit_time(0) == "1970-01-01T00:00:00.000000Z");
  CHECK(sandlet::audit_time(1764642928.25) == "2025-12-02T02:35:28.250000Z");
  CHECK(sandlet::audit_time(1.9999999) == "1970-01-01T00:00:02.000000Z");
}

TEST_CASE("audit lines: common fields first, invalid UTF-8 replaced, long strings and arrays cut", "[audit]") {
  bool cut = false;
  std::string line = sandlet::audit_line("exec", "abc", {{"k", "v"}}, {{"argv", json::array{"a", "\xff\xfe"}}}, &cut);
  CHECK_FALSE(cut);
  REQUIRE(line.back() == '\n');
  json::object o = json::parse(line).as_object();
  CHECK(o.begin()->key() == "ts");
  CHECK(o.at("event") == "exec");
  CHECK(o.at("sandbox") == "abc");
  CHECK(o.at("labels").at("k") == "v");
  CHECK(o.at("pid").to_number<int>() == ::getpid());
  CHECK(o.at("argv").as_array()[1] == "\xef\xbf\xbd\xef\xbf\xbd");
  CHECK_FALSE(o.contains("truncated"));

  json::array many;
  for (int i = 0; i < 1000; ++i) many.push_back(json::value(std::string(5000, 'x')));
  line = sandlet::audit_line("exec", "abc", {}, {{"argv", many}, {"ts", "forged"}}, &cut);
  CHECK(cut);
  CHECK(line.size() <= sandlet::kAuditMaxLine);
  o = json::parse(line).as_object();
  CHECK(o.at("truncated") == true);
  CHECK(o.at("ts") != "forged");  // event fields cannot replace the common ones
  if (o.contains("argv")) CHECK(o.at("argv").as_array().size() <= sandlet::kAuditMaxArray);
}

TEST_CASE("audit log: rotation by size, each line once, a reader that follows across rotations", "[audit]") {
  TempDir d;
  sandlet::AuditOptions opt;
  opt.max_bytes = 65536;
  opt.keep = 3;
  sandlet::AuditLog log(d.path + "/audit", opt);
  sandlet::AuditReader follower(log.path(), {"", {{"who", "a"}}, 0});
  CHECK(drain(follower).empty());  // no log yet
  std::vector<int64_t> seen;
  const std::string pad(400, 'p');
  for (int i = 0; i < 500; ++i) {
    log.write("test", "s1", {{"who", i % 2 ? "b" : "a"}}, {{"seq", i}, {"pad", pad}});
    if (i % 37 == 0)
      for (auto& r : drain(follower)) seen.push_back(r.at("seq").to_number<int64_t>());
  }
  for (auto& r : drain(follower)) seen.push_back(r.at("seq").to_number<int64_t>());
  auto s = log.stats();
  CHECK(s.failed == 0);
  CHECK(s.written == 500);
  CHECK(s.rotations >= 2);
  REQUIRE(seen.size() == 250);
  for (size_t i = 0; i < seen.size(); ++i) CHECK(seen[i] == static_cast<int64_t>(2 * i));
  CHECK(fs::exists(log.path() + ".3"));
  CHECK_FALSE(fs::exists(log.path() + ".4"));
  for (const char* f : {"", ".1", ".2", ".3"}) CHECK(fs::file_size(log.path() + f) <= 65536);
  struct stat st;
  REQUIRE(::stat((d.path + "/audit").c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0700);
  REQUIRE(::stat(log.path().c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0600);

  // A fresh reader gets what is kept, oldest first, with filters.
  sandlet::AuditReader all(log.path(), {});
  auto kept = drain(all);
  REQUIRE_FALSE(kept.empty());
  CHECK(kept.back().at("seq").to_number<int>() == 499);
  for (size_t i = 1; i < kept.size(); ++i)
    CHECK(kept[i].at("seq").to_number<int>() == kept[i - 1].at("seq").to_number<int>() + 1);
  sandlet::AuditReader none(log.path(), {"other-id", {}, 0});
  CHECK(drain(none).empty());
  sandlet::AuditReader later(log.path(), {"", {}, 4102444800.0});  // 2100
  CHECK(drain(later).empty());
}

TEST_CASE("audit log: a fragment from a short write is skipped; the next record reads", "[audit]") {
  TempDir d;
  sandlet::AuditLog log(d.path + "/audit", {});
  log.write("a", "s", {}, {});
  { std::ofstream(log.path(), std::ios::app) << "{\"not\": \"finished\n"; }
  log.write("b", "s", {}, {});
  sandlet::AuditReader r(log.path(), {});
  auto recs = drain(r);
  REQUIRE(recs.size() == 2);
  CHECK(recs[1].at("event") == "b");
  CHECK(r.skipped() == 1);
}

TEST_CASE("audit log: a log that cannot be written counts the failure and never throws", "[audit]") {
  TempDir d;
  { std::ofstream(d.path + "/file") << "x"; }
  sandlet::AuditLog log(d.path + "/file/audit", {});  // a directory under a file: cannot be made
  log.write("exec", "s", {}, {});
  log.denial("s", {}, "seccomp", {{"syscall", "bpf"}});
  auto s = log.stats();
  CHECK(s.written == 0);
  CHECK(s.failed == 2);
  CHECK_FALSE(s.last_error.empty());
}

TEST_CASE("audit log: denial and policy records carry their kind and details", "[audit]") {
  TempDir d;
  sandlet::AuditLog log(d.path + "/audit", {});
  log.denial("s1", {{"task", "t"}}, "network", {{"protocol", "tcp"}, {"address", "10.0.0.1"}, {"port", 443}});
  log.policy("s1", {{"task", "t"}}, "ptrace", {{"why", "debugger task"}});
  sandlet::AuditReader r(log.path(), {"s1", {{"task", "t"}}, 0});
  auto recs = drain(r);
  REQUIRE(recs.size() == 2);
  CHECK(recs[0].at("event") == "denial");
  CHECK(recs[0].at("kind") == "network");
  CHECK(recs[0].at("details").at("port").to_number<int>() == 443);
  CHECK(recs[1].at("event") == "policy");
  CHECK(recs[1].at("relaxation") == "ptrace");
}
