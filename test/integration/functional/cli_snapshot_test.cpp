// `sandlet snapshot` and `sandlet fork`: digests and ids on stdout, children that outlive the command,
// errors with the CLI's statuses.
#include <algorithm>
#include <sstream>

#include "integration/functional/cli_support.hpp"

using cli_test::cli;

namespace {
std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }
}  // namespace

TEST_CASE("cli: snapshot prints a digest; create --layer restores it; fork prints N ids", "[cli][snapshot]") {
  Harness h;
  auto imp = cli(h, {"layer", "import", "--name", "busybox", SANDLET_TEST_ROOTFS});
  REQUIRE(imp.status == 0);
  auto made = cli(h, {"create", "--layer", "busybox", "--hostname", "agent"});
  REQUIRE(made.status == 0);
  const std::string id = first_line(made.out);
  REQUIRE(cli(h, {"exec", id, "sh", "-c", "echo step > /k"}).status == 0);

  auto snap = cli(h, {"snapshot", "--name", "step-k", id});
  INFO(snap.err);
  REQUIRE(snap.status == 0);
  const std::string digest = first_line(snap.out);
  CHECK(digest.rfind("sha256:", 0) == 0);
  CHECK(digest.size() == 7 + 64);

  auto restored = cli(h, {"create", "--layer", "step-k"});
  REQUIRE(restored.status == 0);
  CHECK(cli(h, {"exec", first_line(restored.out), "cat", "/k"}).out == "step\n");

  auto forked = cli(h, {"fork", "-n", "3", "--label", "run=r1", id});
  INFO(forked.err);
  REQUIRE(forked.status == 0);
  std::vector<std::string> ids;
  std::istringstream lines(forked.out);
  for (std::string l; std::getline(lines, l);) ids.push_back(l);
  REQUIRE(ids.size() == 3);
  // Detached: they outlived the fork command.
  for (size_t i = 0; i < 3; ++i) {
    CHECK(cli(h, {"exec", ids[i], "sh", "-c", "cat /k; hostname"}).out == "step\nagent-" + std::to_string(i) + "\n");
  }
  CHECK(cli(h, {"ps", "-q", "--label", "run=r1"}).out.size() == 3 * 13);

  auto from_snapshot = cli(h, {"fork", "-n", "2", "step-k"});
  REQUIRE(from_snapshot.status == 0);
  CHECK(std::count(from_snapshot.out.begin(), from_snapshot.out.end(), '\n') == 2);

  CHECK(cli(h, {"fork", "-n", "0", id}).status == 2);         // INVALID_ARGUMENT: a usage error
  CHECK(cli(h, {"fork", "-n", "2", "nosuchlayer"}).status == 1);
  CHECK(cli(h, {"snapshot", "--exclude", "relative", id}).status == 2);
  CHECK(cli(h, {"snapshot"}).status == 2);

  auto all = cli(h, {"ps", "-q"});
  std::istringstream ps(all.out);
  for (std::string l; std::getline(ps, l);) cli(h, {"rm", l});
  h.check_no_leaks();
}
