// The table of waiting reads a holder shares with its successor (src/lazy/pending_table).
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>

#include "common/error.hpp"
#include "lazy/pending_table.hpp"

using sandlet::lazy::PendingTable;

namespace {
const std::string kShaA(64, 'a'), kShaB(64, 'b');
}

TEST_CASE("pending table: what one process records, another adopts from the same memfd", "[lazy-table]") {
  PendingTable t = PendingTable::create(4, 1234);
  CHECK(t.fd_limit() == 1234);
  int s0 = t.put(0, kShaA, 3, 5);  // descriptor 0 is a valid event number
  int s1 = t.put(17, kShaB, 9, 9);
  int s2 = t.put(18, kShaA, 1, 1);
  REQUIRE(s0 >= 0);
  REQUIRE(s1 >= 0);
  REQUIRE(s2 >= 0);
  t.clear(s2);
  CHECK(t.put(-1, kShaA, 0, 0) == -1);
  CHECK(t.put(20, "short", 0, 0) == -1);

  PendingTable adopted = PendingTable::adopt(sandlet::sys::UniqueFd(::fcntl(t.fd(), F_DUPFD_CLOEXEC, 0)));
  auto e = adopted.entries();
  std::sort(e.begin(), e.end(), [](auto& a, auto& b) { return a.fd < b.fd; });
  REQUIRE(e.size() == 2);
  CHECK(e[0].fd == 0);
  CHECK(e[0].sha == kShaA);
  CHECK(e[0].first == 3);
  CHECK(e[0].last == 5);
  CHECK(e[1].fd == 17);
  CHECK(e[1].sha == kShaB);
  CHECK(adopted.fd_limit() == 1234);
  // The successor's own waits go to free slots; clearing an adopted one frees it.
  int a = adopted.put(40, kShaB, 2, 2);
  int b = adopted.put(41, kShaB, 2, 2);
  CHECK(a >= 0);
  CHECK(b >= 0);
  CHECK(adopted.put(42, kShaB, 2, 2) == -1);  // full (4 slots)
  adopted.clear(e[0].slot);
  CHECK(adopted.put(42, kShaB, 2, 2) == e[0].slot);
  CHECK(adopted.entries().size() == 4);
}

TEST_CASE("pending table: a memfd that is not one is refused", "[lazy-table]") {
  int fd = ::memfd_create("not-a-table", MFD_CLOEXEC);
  REQUIRE(fd >= 0);
  std::string junk(4096, 'x');
  REQUIRE(::write(fd, junk.data(), junk.size()) == static_cast<ssize_t>(junk.size()));
  CHECK_THROWS_AS(PendingTable::adopt(sandlet::sys::UniqueFd(fd)), sandlet::Error);
  CHECK_THROWS_AS(PendingTable::adopt(sandlet::sys::UniqueFd()), sandlet::Error);
}
