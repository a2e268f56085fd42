// The host's readers of the init's set-up socket, over a real socketpair: the set-up replies
// (backends/container/init_setup) and a one-shot sandbox's report (runtime/one_shot_report). Neither reads
// past its frame (the report follows the ready reply on the same socket), neither waits past its
// deadline, and both refuse what is not the init protocol.
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>

#include "backends/container/init_setup.hpp"
#include "proto/init_protocol.hpp"
#include "runtime/agent/agent_client.hpp"
#include "runtime/agent/one_shot_report.hpp"
#include "unit_helpers.hpp"

namespace proto = sandlet::proto;
using sandlet::Code;
using proto::InitMsg;

namespace {

struct Pair {
  sandlet::sys::UniqueFd host, init;
  Pair() {
    int sv[2];
    REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
    host.reset(sv[0]);
    init.reset(sv[1]);
  }
  void send(const std::string& bytes) { REQUIRE(::write(init.get(), bytes.data(), bytes.size()) == ssize_t(bytes.size())); }
};

std::string run_exit(int code) {
  proto::ExitStatus st;
  st.exit_code = code;
  st.flags = proto::kExitTimedOut;
  return proto::frame(InitMsg::kRunExit, st.encode());
}

std::string error_frame(uint32_t code, const std::string& message) {
  proto::ErrorReply e;
  e.code = code;
  e.message = message;
  return proto::frame(InitMsg::kError, e.encode());
}

void expect(Pair& p, InitMsg want, int timeout_ms = 2000) {
  sandlet::container::expect_setup_reply(p.host.get(), -1, ::getpid(), want, "test step", timeout_ms);
}

}  // namespace

TEST_CASE("init replies: staged, ready and the report arrive together; each reader takes only its frame",
          "[proto][init]") {
  Pair p;
  p.send(proto::frame(InitMsg::kStaged, "") + proto::frame(InitMsg::kReady, "") + run_exit(3));
  expect(p, InitMsg::kStaged);
  expect(p, InitMsg::kReady);
  sandlet::OneShotReport report("sb", 0);
  auto out = report.read_blocking(p.host.get());
  CHECK(out.exit_code == 3);
  CHECK(out.timed_out);
}

TEST_CASE("init replies: errors, other protocols and wrong steps are refused clearly", "[proto][init]") {
  {
    Pair p;
    p.send(error_frame(SANDLET_PERMISSION_DENIED, "mount /proc: denied"));
    auto e = unit::expect_error([&] { expect(p, InitMsg::kStaged); });
    CHECK(e.code() == Code::kPermissionDenied);
    CHECK_THAT(e.what(), Catch::Contains("sandbox setup failed: mount /proc: denied"));
  }
  {
    Pair p;
    p.send(proto::frame(InitMsg::kReady, ""));
    auto e = unit::expect_error([&] { expect(p, InitMsg::kStaged); });
    CHECK(e.code() == Code::kInternal);
    CHECK_THAT(e.what(), Catch::Contains("'ready' during test step"));
  }
  {
    Pair p;  // the agent protocol's exit frame on the set-up socket
    proto::ExitStatus st;
    p.send(proto::encode_frame(0x44, proto::kInitVersion, st.encode()));
    auto e = unit::expect_error([&] { expect(p, InitMsg::kStaged); });
    CHECK(e.code() == Code::kInternal);
    CHECK_THAT(e.what(), Catch::Contains("broke its set-up protocol") && Catch::Contains("0x44"));
  }
  {
    Pair p;  // a 1 GiB "error": refused on its header
    p.send(std::string("\x00\x00\x00\x40\xc3\x01\x00\x00", 8));
    auto e = unit::expect_error([&] { expect(p, InitMsg::kStaged); });
    CHECK_THAT(e.what(), Catch::Contains("over its maximum"));
  }
  {
    Pair p;  // an error whose code is not one
    p.send(error_frame(77, "?"));
    auto e = unit::expect_error([&] { expect(p, InitMsg::kStaged); });
    CHECK_THAT(e.what(), Catch::Contains("malformed error"));
  }
}

TEST_CASE("init replies: a silent or half-sent reply times out; an exit says so", "[proto][init]") {
  {
    Pair p;
    p.send(proto::frame(InitMsg::kStaged, "").substr(0, 5));  // half a header, then nothing
    const auto t0 = std::chrono::steady_clock::now();
    auto e = unit::expect_error([&] { expect(p, InitMsg::kStaged, 300); });
    CHECK(e.code() == Code::kDeadlineExceeded);
    CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(2));
  }
  {
    Pair p;
    p.init.reset();
    auto e = unit::expect_error([&] { expect(p, InitMsg::kStaged); });
    CHECK_THAT(e.what(), Catch::Contains("exited during test step"));
  }
}

TEST_CASE("one-shot report: end of file, a cut frame, an error, a wrong frame, the backstop", "[proto][init]") {
  {
    Pair p;
    p.init.reset();
    sandlet::OneShotReport r("sb", 0);
    auto e = unit::expect_error([&] { r.read_blocking(p.host.get()); });
    CHECK(e.code() == Code::kUnavailable);
    CHECK_THAT(e.what(), Catch::Contains("sandbox sb ended before its command did"));
  }
  {
    Pair p;
    p.send(run_exit(0).substr(0, 12));
    p.init.reset();
    sandlet::OneShotReport r("sb", 0);
    auto e = unit::expect_error([&] { r.read_blocking(p.host.get()); });
    CHECK_THAT(e.what(), Catch::Contains("ended while reporting"));
  }
  {
    sandlet::OneShotReport r("sb", 0);
    auto e = unit::expect_error([&] { r.feed(error_frame(SANDLET_NOT_FOUND, "exec \"x\": not found")); });
    CHECK(e.code() == Code::kNotFound);
  }
  {
    sandlet::OneShotReport r("sb", 0);
    auto e = unit::expect_error([&] { r.feed(proto::frame(InitMsg::kReady, "")); });
    CHECK_THAT(e.what(), Catch::Contains("unexpected report"));
  }
  {
    sandlet::OneShotReport r("sb", 0);
    CHECK_FALSE(r.feed(run_exit(1).substr(0, 10)));  // incomplete: no outcome yet
    CHECK(r.feed(run_exit(1).substr(10))->exit_code == 1);
  }
  {
    Pair p;
    sandlet::OneShotReport r("sb", 100);  // 100 ms timeout + the grace period
    REQUIRE(r.backstop());
    CHECK(*r.backstop() == std::chrono::milliseconds(100) + sandlet::kBackstopGrace);
    CHECK(r.poll_timeout_ms() > 100);
    sandlet::OneShotReport none("sb", 0);
    CHECK(none.poll_timeout_ms() == -1);
  }
}
