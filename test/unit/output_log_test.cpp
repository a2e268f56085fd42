// The per-sandbox log of last outputs (runtime/agent/output_log.hpp): records in order, the last 16 read back,
// compaction past its size bound, tails of long output, and lines that are not records skipped.
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <fstream>

#include "runtime/agent/output_log.hpp"
#include "unit_helpers.hpp"

using namespace sandlet;

namespace {

void append_exec(const std::string& path, int i, const std::string& out) {
  ExecAudit audit;
  audit.argv = {"sh", "-c", "run " + std::to_string(i)};
  ExecOutcome outcome;
  outcome.exit_code = i % 256;
  output_log::append(path, "sb1", {{"job", "j"}}, audit, &outcome, out, "err-" + std::to_string(i), nullptr);
}

off_t size_of(const std::string& path) {
  struct stat st;
  REQUIRE(::stat(path.c_str(), &st) == 0);
  return st.st_size;
}

}  // namespace

TEST_CASE("output log: the last 16 records, oldest first; compacted past its bound", "[output-log]") {
  unit::TempDir d("output-log");
  const std::string path = d / output_log::kFileName;
  CHECK(output_log::read_last(path).empty());  // no file yet
  // ~8 KiB a record: the file passes kCompactAt after ~32 of them and is cut back to 16 before growing on.
  const std::string big(8000, 'x');
  for (int i = 0; i < 100; ++i) append_exec(path, i, big + "-end-" + std::to_string(i));
  CHECK(static_cast<size_t>(size_of(path)) <= output_log::kCompactAt + 2 * 9000);
  auto last = output_log::read_last(path);
  REQUIRE(last.size() == output_log::kKeptRecords);
  for (size_t k = 0; k < last.size(); ++k) {
    const auto& r = last[k].as_object();
    const int i = 100 - static_cast<int>(output_log::kKeptRecords) + static_cast<int>(k);
    CHECK(r.at("event").as_string() == "output");
    CHECK(r.at("exit_code").as_int64() == i);
    const std::string out(r.at("stdout").as_string());
    CHECK(out.size() == output_log::kTailBytes);  // the tail of 8000+ bytes
    const std::string end = "-end-" + std::to_string(i);
    CHECK(out.compare(out.size() - end.size(), end.size(), end) == 0);
    CHECK(r.at("stderr").as_string() == "err-" + std::to_string(i));
  }
}

TEST_CASE("output log: a cut or foreign line is skipped; a streaming tail keeps the last bytes", "[output-log]") {
  unit::TempDir d("output-log");
  const std::string path = d / output_log::kFileName;
  append_exec(path, 1, "one\n");
  std::ofstream(path, std::ios::app) << "not json\n[1,2]\n{\"half\":";
  append_exec(path, 2, "two\n");  // starts a line of its own: the cut one stays cut (and skipped)
  auto last = output_log::read_last(path);
  REQUIRE(!last.empty());
  CHECK(last.front().as_object().at("stdout").as_string() == "one\n");
  CHECK(last.back().as_object().at("exit_code").as_int64() == 2);

  output_log::TailKeeper t;
  for (int i = 0; i < 1000; ++i) t.add("chunk-" + std::to_string(i) + "\n");
  CHECK(t.text().size() <= 2 * output_log::kTailBytes);
  CHECK(t.text().size() >= output_log::kTailBytes);
  CHECK(t.text().substr(t.text().size() - 10) == "chunk-999\n");
  t.add(std::string(5000, 'y'));
  CHECK(t.text() == std::string(output_log::kTailBytes, 'y'));
}
