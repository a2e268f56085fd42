// A forged or broken agent at the other end of a real socketpair (a peer thread) drives AgentCall with
// the host's own exec reply rules (runtime/agent_client): garbage, oversized lengths, endless output,
// partial frames then silence, tiny-frame floods. Each call fails with a clear error, within its
// deadline, with bounded host memory, and a well-behaved call on the same event loop goes on unharmed.
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <boost/asio.hpp>
#include <chrono>
#include <future>
#include <thread>

#include "runtime/agent/agent_call.hpp"
#include "runtime/agent/agent_client.hpp"
#include "forged_agent.hpp"
#include "unit_helpers.hpp"

namespace proto = sandlet::proto;
using sandlet::AgentCall;
using sandlet::Code;
using namespace std::chrono_literals;

namespace {

// The runtime's event loop, on its own thread.
struct Loop {
  boost::asio::io_context io;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work{io.get_executor()};
  std::thread thread{[this] { io.run(); }};
  ~Loop() {
    work.reset();
    io.stop();
    thread.join();
  }
};

struct Outcome {
  std::exception_ptr error;
  sandlet::ExecOutcome exec;
  std::chrono::steady_clock::duration took;
};

// One exec through AgentCall with the host's reply rules, waited for at most 30 s.
Outcome run_exec(Loop& loop, ForgedAgent& peer, uint64_t output_limit,
                 std::optional<std::chrono::milliseconds> deadline = std::nullopt,
                 sandlet::ExecReplies::OnOutput on_output = nullptr) {
  proto::ExecRequest req;
  req.argv = {"true"};
  req.output_limit = output_limit;
  auto replies = std::make_shared<sandlet::ExecReplies>(output_limit, std::move(on_output));
  auto promise = std::make_shared<std::promise<std::exception_ptr>>();
  auto future = promise->get_future();
  const auto start = std::chrono::steady_clock::now();
  AgentCall::start(
      loop.io, std::move(peer.host), sandlet::exec_request_frames(req, ""),
      [replies](proto::AgentMsg type, std::string_view payload) { return replies->on_frame(type, payload); },
      [promise](std::exception_ptr e) { promise->set_value(e); }, deadline);
  REQUIRE(future.wait_for(30s) == std::future_status::ready);
  Outcome out;
  out.error = future.get();
  out.took = std::chrono::steady_clock::now() - start;
  out.exec = std::move(replies->outcome);
  return out;
}

sandlet::Error error_of(const Outcome& o) {
  REQUIRE(o.error);
  try {
    std::rethrow_exception(o.error);
  } catch (const sandlet::Error& e) {
    return e;
  } catch (...) {
  }
  FAIL("not a sandlet::Error");
  throw;
}

std::string started() { return proto::frame(proto::AgentMsg::kStarted, proto::encode_u32(42)); }
std::string exit_frame(int code) {
  proto::ExitStatus st;
  st.exit_code = code;
  return proto::frame(proto::AgentMsg::kExit, st.encode());
}
std::string raw_header(uint8_t type, uint8_t version, uint32_t len) {
  std::string h(proto::kHeaderSize, '\0');
  proto::put_header(h.data(), type, version, len);
  return h;
}

long rss_kib() {
  std::string s = sandlet::sys::read_file_if_exists("/proc/self/status", 1 << 16).value_or("");
  size_t p = s.find("VmRSS:");
  return p == std::string::npos ? 0 : std::atol(s.c_str() + p + 6);
}

}  // namespace

TEST_CASE("hostile agent: a well-behaved one first (the harness itself works)", "[proto][hostile]") {
  Loop loop;
  ForgedAgent peer([](int fd, ForgedAgent& p) {
    p.put(fd, started() + proto::frame(proto::AgentMsg::kStdout, "out") +
                  proto::frame(proto::AgentMsg::kStderr, "err") + exit_frame(3));
    p.drain(fd);
  });
  Outcome o = run_exec(loop, peer, 1 << 20);
  REQUIRE_FALSE(o.error);
  CHECK(o.exec.exit_code == 3);
  CHECK(o.exec.stdout_data == "out");
  CHECK(o.exec.stderr_data == "err");
}

TEST_CASE("hostile agent: garbage, other versions, bad lengths fail the call at once", "[proto][hostile]") {
  Loop loop;
  struct Case {
    std::string bytes;
    Code code;
    const char* says;
  };
  const Case cases[] = {
      {"\x13\x37garbage!", Code::kFailedPrecondition, "protocol version 98"},
      {raw_header(0x42, 1, 5) + "hello", Code::kFailedPrecondition, "version 1, this library version 2"},
      {raw_header(0x99, proto::kAgentVersion, 0), Code::kInternal, "0x99 is not a message"},
      // 4 GiB announced and nothing sent: refused on the header (nothing allocated, nothing awaited).
      {started() + raw_header(0x42, proto::kAgentVersion, 0xfffffff0u), Code::kInternal, "over its maximum"},
      {raw_header(0x44, proto::kAgentVersion, 7) + "1234567", Code::kInternal, "below its minimum"},
      {raw_header(0x01, proto::kAgentVersion, 40) + std::string(40, '\0'), Code::kInternal, "not a message"},
      {raw_header(0xc2, proto::kAgentVersion, 0), Code::kInternal, "not a message"},  // the init's "ready"
  };
  for (const Case& c : cases) {
    INFO(c.says);
    ForgedAgent peer([&c](int fd, ForgedAgent& p) {
      p.put(fd, c.bytes);
      p.drain(fd);  // silent after the bad frame: the host must not wait for more
    });
    Outcome o = run_exec(loop, peer, 1 << 20);
    auto e = error_of(o);
    CHECK(e.code() == c.code);
    CHECK_THAT(e.what(), Catch::Contains(c.says));
    CHECK(o.took < 5s);
  }
}

TEST_CASE("hostile agent: replies out of order or malformed fail the call", "[proto][hostile]") {
  Loop loop;
  proto::ExitStatus bad_exit;
  bad_exit.exit_code = 300;
  proto::ErrorReply bad_error;
  bad_error.code = 0;  // "OK" as an error
  const std::pair<std::string, const char*> cases[] = {
      {proto::frame(proto::AgentMsg::kStdout, "x"), "stdout before the exec started"},
      {exit_frame(0), "exit status before the exec started"},
      {started() + started(), "second 'started'"},
      {started() + proto::frame(proto::AgentMsg::kFileChunk, "x"), "unexpected 'file-chunk' reply to an exec"},
      {started() + proto::frame(proto::AgentMsg::kPong, ""), "unexpected 'pong'"},
      {started() + proto::frame(proto::AgentMsg::kExit, bad_exit.encode()), "malformed exit status"},
      {proto::frame(proto::AgentMsg::kError, bad_error.encode()), "malformed error reply"},
  };
  for (const auto& [bytes, says] : cases) {
    INFO(says);
    ForgedAgent peer([bytes = bytes](int fd, ForgedAgent& p) {
      p.put(fd, bytes);
      p.drain(fd);
    });
    auto e = error_of(run_exec(loop, peer, 1 << 20));
    CHECK(e.code() == Code::kInternal);
    CHECK_THAT(e.what(), Catch::Contains("broke the protocol") && Catch::Contains(says));
  }
  // A well-formed error is the agent's to report (its own sandbox's call fails with it).
  proto::ErrorReply err;
  err.code = SANDLET_NOT_FOUND;
  err.err_no = ENOENT;
  err.message = "exec \"nope\": No such file or directory";
  ForgedAgent peer([&err](int fd, ForgedAgent& p) {
    p.put(fd, proto::frame(proto::AgentMsg::kError, err.encode()));
    p.drain(fd);
  });
  auto e = error_of(run_exec(loop, peer, 1 << 20));
  CHECK(e.code() == Code::kNotFound);
  CHECK(e.err_no() == ENOENT);
}

TEST_CASE("hostile agent: endless output stops at the host's own cap, memory stays bounded", "[proto][hostile]") {
  Loop loop;
  constexpr uint64_t kLimit = 1 << 20;
  const long rss_before = rss_kib();
  for (bool streaming : {false, true}) {
    INFO("streaming " << streaming);
    ForgedAgent peer([](int fd, ForgedAgent& p) {
      if (!p.put(fd, started())) return;
      const std::string chunk = proto::frame(proto::AgentMsg::kStdout, std::string(64 << 10, 'y'));
      while (p.put(fd, chunk)) {  // until the host hangs up
      }
    });
    uint64_t delivered = 0;
    sandlet::ExecReplies::OnOutput on_output;
    if (streaming) on_output = [&delivered](int, std::string_view d) { delivered += d.size(); };
    Outcome o = run_exec(loop, peer, kLimit, std::nullopt, on_output);
    auto e = error_of(o);
    CHECK(e.code() == Code::kInternal);
    CHECK_THAT(e.what(), Catch::Contains("more stdout than the exec's output limit of 1048576 bytes"));
    CHECK(o.exec.stdout_data.size() <= kLimit);
    CHECK(delivered <= kLimit);
    // What the peer got through before the host hung up: the cap plus what the socket buffers hold.
    CHECK(peer.written.load() < kLimit + (8u << 20));
  }
  CHECK(rss_kib() - rss_before < 64 * 1024);
}

TEST_CASE("hostile agent: a silent agent cannot hold a call past its deadline", "[proto][hostile]") {
  Loop loop;
  CHECK(sandlet::exec_backstop(0) == std::nullopt);
  CHECK(sandlet::exec_backstop(200) == 200ms + sandlet::kBackstopGrace);
  CHECK(sandlet::file_backstop(0) == 60s);  // file calls have no timeout of their own
  CHECK(sandlet::file_backstop(64ull << 20) > 60s);
  CHECK(sandlet::file_backstop(64ull << 20) < 120s);
  CHECK(sandlet::file_backstop(~0ull) < std::chrono::hours(24 * 365 * 10));  // no overflow
  const std::pair<std::string, const char*> cases[] = {
      {"", "nothing at all"},
      {started().substr(0, 5), "half a header"},
      {started() + raw_header(0x42, proto::kAgentVersion, 1000) + "abc", "a payload cut short"},
      {started() + proto::frame(proto::AgentMsg::kStdout, "some output"), "output, then nothing"},
  };
  for (const auto& [bytes, what] : cases) {
    INFO(what);
    ForgedAgent peer([bytes = bytes](int fd, ForgedAgent& p) {
      p.put(fd, bytes);
      p.drain(fd);  // silent until the host closes
    });
    Outcome o = run_exec(loop, peer, 1 << 20, 300ms);
    auto e = error_of(o);
    CHECK(e.code() == Code::kDeadlineExceeded);
    CHECK_THAT(e.what(), Catch::Contains("within 300 ms"));
    CHECK(o.took >= 300ms);
    CHECK(o.took < 2s);
  }
}

TEST_CASE("hostile agent: a connection cut mid-frame is UNAVAILABLE, saying so", "[proto][hostile]") {
  Loop loop;
  ForgedAgent peer([](int fd, ForgedAgent& p) { p.put(fd, started() + raw_header(0x42, proto::kAgentVersion, 100) + "abc"); });
  auto e = error_of(run_exec(loop, peer, 1 << 20));
  CHECK(e.code() == Code::kUnavailable);
  CHECK_THAT(e.what(), Catch::Contains("mid-frame"));
  ForgedAgent early([](int fd, ForgedAgent& p) { p.put(fd, started()); });
  e = error_of(run_exec(loop, early, 1 << 20));
  CHECK(e.code() == Code::kUnavailable);
  CHECK_THAT(e.what(), Catch::Contains("before the request completed"));
}

TEST_CASE("hostile agent: a flood of tiny frames does not starve another sandbox's call", "[proto][hostile]") {
  Loop loop;
  constexpr uint64_t kLimit = 4 << 20;
  std::atomic<bool> stop{false};
  // One-byte output frames, as many as the cap allows, as fast as the host takes them.
  ForgedAgent flood([&stop](int fd, ForgedAgent& p) {
    if (!p.put(fd, started())) return;
    std::string burst;
    for (int i = 0; i < 4096; ++i) burst += proto::frame(proto::AgentMsg::kStdout, "z");
    while (!stop && p.put(fd, burst)) {
    }
  });
  proto::ExecRequest req;
  req.argv = {"true"};
  auto flood_replies = std::make_shared<sandlet::ExecReplies>(kLimit, nullptr);
  auto flood_done = std::make_shared<std::promise<std::exception_ptr>>();
  AgentCall::start(
      loop.io, std::move(flood.host), sandlet::exec_request_frames(req, ""),
      [flood_replies](proto::AgentMsg t, std::string_view p) { return flood_replies->on_frame(t, p); },
      [flood_done](std::exception_ptr e) { flood_done->set_value(e); });

  // Meanwhile other calls, each answered at once by a well-behaved agent, complete promptly.
  for (int i = 0; i < 20; ++i) {
    ForgedAgent good([](int fd, ForgedAgent& p) {
      p.put(fd, started() + proto::frame(proto::AgentMsg::kStdout, "ok") + exit_frame(0));
      p.drain(fd);
    });
    Outcome o = run_exec(loop, good, 1 << 20);
    REQUIRE_FALSE(o.error);
    CHECK(o.exec.stdout_data == "ok");
    CHECK(o.took < 500ms);
  }
  stop = true;
  auto f = flood_done->get_future();
  REQUIRE(f.wait_for(30s) == std::future_status::ready);
  // The flood was on meanwhile, and ended at the cap at most (or earlier, when the peer stopped).
  INFO("flooded " << flood_replies->outcome.stdout_data.size() << " one-byte frames");
  CHECK(flood_replies->outcome.stdout_data.size() > 0);
  CHECK(flood_replies->outcome.stdout_data.size() <= kLimit);
  CHECK(f.get());
}
