// The gateway's descriptor budget (src/network/gateway/fd_budget.hpp): a small model of a node whose sandboxes take
// descriptors two at a time, as greedily as they can, checked against the promises docs/NETWORK.md makes.
#include <catch2/catch.hpp>

#include <vector>

#include "network/gateway/fd_budget.hpp"

using namespace sandlet::netgw;

namespace {

struct Node {
  FdBudget b;
  std::vector<size_t> own;  // connection descriptors per attached sandbox
  size_t fixed = 0;
  size_t held() const {
    size_t n = fixed;
    for (size_t o : own) n += o;
    return n;
  }
  size_t unused_floors() const {
    size_t n = 0;
    for (size_t o : own) n += o < b.floor ? b.floor - o : 0;
    return n;
  }
  bool attach() {
    if (!b.admits_sandbox(held(), unused_floors(), kFdsPerSandbox)) return false;
    fixed += kFdsPerSandbox;
    own.push_back(0);
    return true;
  }
  FdVerdict open(size_t i) {
    const FdVerdict v = b.admits_connection(held(), own[i], own.size(), unused_floors(), 2);
    if (v == FdVerdict::kAdmit) own[i] += 2;
    return v;
  }
  size_t flood(size_t i) {  // opens until refused; how many connections it got
    size_t n = 0;
    while (open(i) == FdVerdict::kAdmit) ++n;
    return n;
  }
};

}  // namespace

TEST_CASE("fd budget: what the limit leaves, never more than the node's caps", "[netgw][budget]") {
  const FdBudget at4096 = FdBudget::for_limit(4096);
  CHECK(at4096.usable == 4096 - kFdsOwn - 512);  // a small limit keeps an eighth for the resolver's sockets
  CHECK(at4096.cap == at4096.usable / 2);
  CHECK(FdBudget::for_limit(1024).usable == 1024 - kFdsOwn - 128);
  CHECK(FdBudget::for_limit(100).usable == 0);
  const FdBudget big = FdBudget::for_limit(kFdsWanted);
  CHECK(big.usable == kMaxSandboxes * (kFdsPerSandbox + kFdsPerResolver) + 2 * (kTcpPerNode + kUdpFlowsPerNode));
  CHECK(FdBudget::for_limit(10 * kFdsWanted).usable == big.usable);
}

TEST_CASE("fd budget: two flooders leave a third its floor and more", "[netgw][budget]") {
  for (size_t limit : {size_t{4096}, size_t{20000}, kFdsWanted}) {
    INFO("limit " << limit);
    Node n{FdBudget::for_limit(limit), {}, 0};
    REQUIRE(n.attach());
    REQUIRE(n.attach());
    REQUIRE(n.attach());
    const size_t a = n.flood(0), b = n.flood(1);
    CHECK(a > 0);
    CHECK(b > 0);
    CHECK(2 * a <= n.b.cap);
    const size_t c = n.flood(2);
    CHECK(2 * c >= n.b.floor);  // the innocent one gets at least its floor after both floods
    CHECK(n.held() <= n.b.usable);
  }
}

TEST_CASE("fd budget: every attached sandbox keeps its floor however many flood", "[netgw][budget]") {
  // As many sandboxes as a quarter of the budget holds floors for: each keeps its floor.
  Node n{FdBudget::for_limit(4096), {}, 0};
  const size_t fit = n.b.usable / 4 / n.b.floor;
  for (size_t i = 0; i < fit; ++i) REQUIRE(n.attach());
  for (size_t i = 0; i + 1 < n.own.size(); ++i) n.flood(i);
  CHECK(2 * n.flood(n.own.size() - 1) >= n.b.floor);  // the last one, after everyone else flooded
  for (size_t o : n.own) CHECK(o >= n.b.floor);
  CHECK(n.held() <= n.b.usable);
}

TEST_CASE("fd budget: a crowded node still attaches, and flooders never take the kept quarter", "[netgw][budget]") {
  Node n{FdBudget::for_limit(20000), {}, 0};
  while (n.attach()) {
  }
  CHECK(n.own.size() > 1000);  // the fixed descriptors bind, not the floors
  for (size_t i = 0; i < 4; ++i) {
    n.flood(i);
    CHECK(n.own[i] == n.b.floor);  // the kept quarter is for floors: nothing beyond them on a crowded node
  }
  CHECK(2 * n.flood(n.own.size() - 1) >= n.b.floor);  // a quiet one still gets its floor
  CHECK(n.held() <= n.b.usable);
}

TEST_CASE("fd budget: one sandbox alone stops at its cap; refusals say whose limit it was", "[netgw][budget]") {
  Node n{FdBudget::for_limit(20000), {}, 0};
  REQUIRE(n.attach());
  REQUIRE(n.attach());
  const size_t got = n.flood(0);
  CHECK(2 * got <= n.b.cap);
  CHECK(2 * got + 2 > n.b.cap - (n.b.cap % 2));
  CHECK(n.open(0) == FdVerdict::kOverSandbox);
  // The other one gets more than its floor: the node is far from full.
  CHECK(2 * n.flood(1) > n.b.floor);
}
