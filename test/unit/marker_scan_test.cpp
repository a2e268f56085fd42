// The shell session's end-of-command scanner (runtime/agent/shell_session.cpp): a marker line found wherever the
// stream's chunks split it, output capped without losing the marker, and look-alikes kept as output.
#include <catch2/catch.hpp>

#include "runtime/agent/shell_session.hpp"

using sandlet::MarkerScan;

namespace {

const std::string kPrefix = "__sandlet_00112233445566778899aabb_";

// Feeds `stream` in pieces of `step` bytes; true once the marker was found.
bool feed_in_steps(MarkerScan& scan, const std::string& stream, size_t step) {
  bool found = false;
  for (size_t i = 0; i < stream.size(); i += step) found = scan.feed(stream.substr(i, step)) || found;
  return found;
}

}  // namespace

TEST_CASE("marker scan: output, status and what follows, however the chunks fall", "[session]") {
  const std::string stream = "hello\nworld" + kPrefix + "17__\nlater output\n";
  for (size_t step : {1u, 2u, 7u, 35u, 1000u}) {
    INFO("step " << step);
    MarkerScan scan(kPrefix, 1 << 20);
    CHECK(feed_in_steps(scan, stream, step));
    CHECK(scan.text() == "hello\nworld");
    CHECK(scan.tag() == "17");
    CHECK_FALSE(scan.truncated());
    CHECK(scan.take_rest() == "later output\n");
  }
}

TEST_CASE("marker scan: look-alikes are output; a cap keeps the marker findable", "[session]") {
  MarkerScan fake(kPrefix, 1 << 20);
  // The prefix without a marker line's end within 16 characters is output.
  CHECK_FALSE(fake.feed(kPrefix + "not-a-status-at-all-here\n" + "__sandlet_other_0__\n"));
  CHECK(fake.feed(kPrefix + "0__\n"));
  CHECK(fake.text() == kPrefix + "not-a-status-at-all-here\n__sandlet_other_0__\n");

  MarkerScan capped(kPrefix, 10);
  CHECK_FALSE(capped.feed(std::string(5000, 'y')));
  CHECK(capped.feed(kPrefix + "e__\n"));
  CHECK(capped.text() == std::string(10, 'y'));
  CHECK(capped.truncated());
  CHECK(capped.tag() == "e");

  MarkerScan cut(kPrefix, 100);
  CHECK_FALSE(cut.feed("partial" + kPrefix.substr(0, 9)));
  cut.finish();  // the stream ended (the shell died): what was held back is output too
  CHECK(cut.text() == "partial" + kPrefix.substr(0, 9));
}
