// The host's frame reader and the payload decoders of both protocols, fed malformed, truncated,
// oversized, wrong-version and other-protocol input.
#include <catch2/catch.hpp>

#include <set>

#include "proto/agent_protocol.hpp"
#include "proto/arg_limits.hpp"
#include "proto/frame_reader.hpp"
#include "proto/init_protocol.hpp"

namespace proto = sandlet::proto;
using Result = proto::FrameReader::Result;

namespace {

std::string header(uint8_t type, uint8_t version, uint32_t len, uint16_t reserved = 0) {
  std::string h(proto::kHeaderSize, '\0');
  proto::put_header(h.data(), type, version, len);
  h[6] = static_cast<char>(reserved & 0xff);
  h[7] = static_cast<char>(reserved >> 8);
  return h;
}

uint8_t t(proto::AgentMsg m) { return static_cast<uint8_t>(m); }
uint8_t t(proto::InitMsg m) { return static_cast<uint8_t>(m); }

// Feeds `bytes` one at a time through space()/commit(), as a reader of a trickling socket would.
Result trickle(proto::FrameReader& r, const std::string& bytes, size_t* used = nullptr) {
  Result res = Result::kNeedMore;
  size_t i = 0;
  for (; i < bytes.size(); ++i) {
    REQUIRE(r.space_size() >= 1);
    *r.space() = bytes[i];
    res = r.commit(1);
    if (res != Result::kNeedMore) {
      ++i;
      break;
    }
  }
  if (used) *used = i;
  return res;
}

}  // namespace

TEST_CASE("proto: the two protocols share no message type", "[proto]") {
  std::set<uint8_t> agent, init;
  for (const auto& ft : proto::kHostToAgentTypes) agent.insert(ft.type);
  for (const auto& ft : proto::kAgentToHostTypes) agent.insert(ft.type);
  for (const auto& ft : proto::kHostToInitTypes) init.insert(ft.type);
  for (const auto& ft : proto::kInitToHostTypes) init.insert(ft.type);
  for (uint8_t a : agent) CHECK(init.count(a) == 0);
  // Nor does either direction accept the other direction's types.
  for (const auto& ft : proto::kHostToAgentTypes) CHECK(proto::kAgentToHost.find(ft.type) == nullptr);
  for (const auto& ft : proto::kInitToHostTypes) CHECK(proto::kHostToInit.find(ft.type) == nullptr);
  CHECK(proto::kAgentVersion != 1);  // version 1 had one shared space
}

TEST_CASE("proto: the reader delivers frames whole, in any split", "[proto][frame]") {
  proto::ExitStatus st;
  st.exit_code = 3;
  st.run_ns = 42;
  const std::string bytes = proto::frame(proto::AgentMsg::kStarted, proto::encode_u32(7)) +
                            proto::frame(proto::AgentMsg::kStdout, "hello") +
                            proto::frame(proto::AgentMsg::kExit, st.encode());
  SECTION("byte by byte") {
    proto::FrameReader r(proto::kAgentToHost);
    size_t used = 0;
    std::string rest = bytes;
    std::vector<std::pair<uint8_t, std::string>> got;
    while (!rest.empty()) {
      REQUIRE(trickle(r, rest, &used) == Result::kFrame);
      got.emplace_back(r.type(), std::string(r.payload()));
      rest = rest.substr(used);
    }
    REQUIRE(got.size() == 3);
    CHECK(got[0].first == t(proto::AgentMsg::kStarted));
    CHECK(got[1].second == "hello");
    proto::ExitStatus back;
    CHECK(proto::ExitStatus::decode(got[2].second, &back));
    CHECK(back.exit_code == 3);
    CHECK(back.run_ns == 42);
    CHECK_FALSE(r.mid_frame());
  }
  SECTION("all at once through take()") {
    proto::FrameReader r(proto::kAgentToHost);
    std::string_view in(bytes);
    int frames = 0;
    while (!in.empty()) {
      REQUIRE(r.take(in) == Result::kFrame);
      ++frames;
    }
    CHECK(frames == 3);
  }
  SECTION("space() never reaches past the current frame") {
    proto::FrameReader r(proto::kAgentToHost);
    CHECK(r.space_size() == proto::kHeaderSize);
    std::memcpy(r.space(), bytes.data(), proto::kHeaderSize);
    CHECK(r.commit(proto::kHeaderSize) == Result::kNeedMore);
    CHECK(r.space_size() == 4);  // the started frame's payload, not a byte of the next frame
    CHECK(r.mid_frame());
  }
  SECTION("an empty payload completes with its header") {
    proto::FrameReader r(proto::kAgentToHost);
    CHECK(trickle(r, proto::frame(proto::AgentMsg::kPong, "")) == Result::kFrame);
    CHECK(r.payload().empty());
  }
}

TEST_CASE("proto: bad headers are refused before any payload is allocated", "[proto][frame]") {
  struct Case {
    std::string bytes;
    proto::HeaderCheck want;
    const char* says;
  };
  const Case cases[] = {
      {header(t(proto::AgentMsg::kStdout), 1, 5), proto::HeaderCheck::kBadVersion, "version 1, expected 2"},
      {header(t(proto::AgentMsg::kStdout), 0xff, 5), proto::HeaderCheck::kBadVersion, "version 255"},
      {header(t(proto::AgentMsg::kStdout), proto::kAgentVersion, 5, 1), proto::HeaderCheck::kBadReserved, "reserved"},
      {header(0, proto::kAgentVersion, 0), proto::HeaderCheck::kUnknownType, "0x00"},
      {header(0xee, proto::kAgentVersion, 0), proto::HeaderCheck::kUnknownType, "0xee"},
      // A request type where replies are read; the init's types on the agent channel.
      {header(t(proto::AgentMsg::kExec), proto::kAgentVersion, 40), proto::HeaderCheck::kUnknownType, "0x01"},
      {header(t(proto::InitMsg::kError), proto::kAgentVersion, 12), proto::HeaderCheck::kUnknownType, "0xc3"},
      {header(t(proto::AgentMsg::kStdout), proto::kAgentVersion, 0xffffffffu), proto::HeaderCheck::kTooLong,
       "4294967295 bytes, over its maximum of 1048576"},
      {header(t(proto::AgentMsg::kStdout), proto::kAgentVersion, proto::kMaxDataFrame + 1), proto::HeaderCheck::kTooLong,
       "over its maximum"},
      {header(t(proto::AgentMsg::kPong), proto::kAgentVersion, 1), proto::HeaderCheck::kTooLong, "maximum of 0"},
      {header(t(proto::AgentMsg::kExit), proto::kAgentVersion, 19), proto::HeaderCheck::kTooShort, "minimum of 20"},
      {header(t(proto::AgentMsg::kStdout), proto::kAgentVersion, 0), proto::HeaderCheck::kTooShort, "minimum of 1"},
  };
  for (const Case& c : cases) {
    INFO(c.says);
    proto::FrameReader r(proto::kAgentToHost);
    CHECK(trickle(r, c.bytes) == Result::kBad);
    CHECK(r.error_kind() == c.want);
    CHECK_THAT(r.error(), Catch::Contains(c.says) && Catch::Contains("agent -> host"));
    CHECK(r.payload_capacity() < 64);  // nothing was reserved for the claimed length
    // It stays refused: nothing more is read.
    CHECK(r.space_size() == 0);
    CHECK(r.commit(0) == Result::kBad);
  }
}

TEST_CASE("proto: a truncated frame leaves the reader mid-frame", "[proto][frame]") {
  const std::string f = proto::frame(proto::AgentMsg::kStderr, std::string(1000, 'e'));
  for (size_t cut : {size_t(1), size_t(7), size_t(8), size_t(9), f.size() - 1}) {
    proto::FrameReader r(proto::kAgentToHost);
    std::string_view in(f.data(), cut);
    CHECK(r.take(in) == Result::kNeedMore);
    CHECK(r.mid_frame());
  }
}

TEST_CASE("proto: the init's reader takes only the init protocol, of its version", "[proto][frame]") {
  proto::FrameReader ok(proto::kInitToHost);
  CHECK(trickle(ok, proto::frame(proto::InitMsg::kReady, "")) == Result::kFrame);
  // The agent's exit frame (0x44) and a v2 header are not the init's.
  proto::ExitStatus st;
  proto::FrameReader a(proto::kInitToHost);
  CHECK(trickle(a, proto::frame(proto::AgentMsg::kExit, st.encode())) == Result::kBad);
  proto::FrameReader b(proto::kInitToHost);
  CHECK(trickle(b, header(t(proto::InitMsg::kRunExit), 2, 20)) == Result::kBad);
  CHECK(b.error_kind() == proto::HeaderCheck::kBadVersion);
}

TEST_CASE("proto: decoders are bounds-checked and reject trailing bytes", "[proto][decode]") {
  proto::ExecRequest req;
  req.argv = {"sh", "-c", "echo hi"};
  req.env = {"A=B"};
  req.cwd = "/tmp";
  req.user = "1000:1000";
  req.timeout_ms = 5;
  req.flags = proto::kExecHasStdin;
  const std::string enc = req.encode();
  proto::ExecRequest back;
  REQUIRE(proto::ExecRequest::decode(enc, &back));
  CHECK(back.argv == req.argv);
  CHECK(back.env == req.env);
  CHECK(back.user == req.user);

  CHECK_FALSE(proto::ExecRequest::decode(enc + "x", &back));  // trailing garbage
  for (size_t cut = 0; cut < enc.size(); ++cut) CHECK_FALSE(proto::ExecRequest::decode(enc.substr(0, cut), &back));
  // A string count that the bytes left could not hold fails before anything is allocated for it.
  std::string huge_count = enc;
  huge_count[0] = huge_count[1] = huge_count[2] = huge_count[3] = '\xff';
  CHECK_FALSE(proto::ExecRequest::decode(huge_count, &back));
  // A string length past the end.
  std::string long_str = enc;
  long_str[4 + 3] = '\x7f';
  CHECK_FALSE(proto::ExecRequest::decode(long_str, &back));
  // No command; unknown flags.
  proto::ExecRequest empty = req;
  empty.argv.clear();
  CHECK_FALSE(proto::ExecRequest::decode(empty.encode(), &back));
  proto::ExecRequest flags = req;
  flags.flags = 0x80;
  CHECK_FALSE(proto::ExecRequest::decode(flags.encode(), &back));

  proto::ErrorReply err;
  err.code = 5;
  err.message = std::string(100000, 'm');  // cut to the frame's cap when encoded
  std::string e = err.encode();
  CHECK(e.size() == proto::kErrorReplyMax);
  proto::ErrorReply eback;
  CHECK(proto::ErrorReply::decode(e, &eback));
  for (uint32_t code : {0u, 16u, 0xffffffffu}) {
    err.code = code;
    CHECK_FALSE(proto::ErrorReply::decode(err.encode(), &eback));  // OK or no such code: not an error
  }

  proto::ExitStatus x;
  proto::ExitStatus xback;
  for (auto [code, sig, ok] : {std::tuple{0, 0, true}, {255, 0, true}, {-1, 9, true}, {256, 0, false},
                               {-2, 0, false}, {-1, 0, false}, {-1, 65, false}, {1, 9, false}}) {
    x.exit_code = code;
    x.signal = sig;
    CHECK(proto::ExitStatus::decode(x.encode(), &xback) == ok);
  }
  x.exit_code = 0;
  x.signal = 0;
  x.flags = 16;
  CHECK_FALSE(proto::ExitStatus::decode(x.encode(), &xback));
  CHECK_FALSE(proto::ExitStatus::decode(std::string(19, '\0'), &xback));

  proto::FileDone fd;
  fd.mode = 0100644;  // a type bit: not a permission mode
  proto::FileDone fdback;
  CHECK_FALSE(proto::FileDone::decode(fd.encode(), &fdback));

  uint32_t v;
  CHECK_FALSE(proto::decode_u32("abc", &v));
  CHECK_FALSE(proto::decode_u32("abcde", &v));
}

TEST_CASE("proto: InitConfig round-trips; a one-shot needs a command and valid stdio bits", "[proto][decode]") {
  proto::InitConfig cfg;
  cfg.hostname = "h";
  cfg.env = {"PATH=/bin"};
  cfg.seccomp_bpf = std::string(16, '\1');
  cfg.flags = proto::kInitHasCgroup | proto::kInitRunOnce;
  cfg.run_once.argv = {"true"};
  cfg.run_once.stdio = 5;
  cfg.idle_timeout_ms = 7;
  cfg.keep_ms = 9;
  proto::InitConfig back;
  REQUIRE(proto::InitConfig::decode(cfg.encode(), &back));
  CHECK(back.idle_timeout_ms == 7);
  CHECK(back.keep_ms == 9);
  CHECK(back.run_once.argv == cfg.run_once.argv);
  CHECK(back.run_once.stdio == 5);
  CHECK(cfg.encode().size() >= proto::kHostToInitTypes[1].min_len);
  CHECK_FALSE(proto::InitConfig::decode(cfg.encode() + "x", &back));
  cfg.run_once.stdio = 8;
  CHECK_FALSE(proto::InitConfig::decode(cfg.encode(), &back));
  cfg.run_once.stdio = 0;
  cfg.run_once.argv.clear();
  CHECK_FALSE(proto::InitConfig::decode(cfg.encode(), &back));
}

TEST_CASE("proto: every request's smallest encoding is within its type's range", "[proto]") {
  const auto range = [](proto::AgentMsg m) { return *proto::kHostToAgent.find(static_cast<uint8_t>(m)); };
  proto::ExecRequest exec;
  exec.argv = {""};
  CHECK(exec.encode().size() == range(proto::AgentMsg::kExec).min_len);
  proto::WriteFileRequest w;
  w.path = "";
  CHECK(w.encode().size() == range(proto::AgentMsg::kWriteFile).min_len);
  proto::ReadFileRequest rd;
  rd.path = "";
  CHECK(rd.encode().size() == range(proto::AgentMsg::kReadFile).min_len);
  proto::InitConfig cfg;
  cfg.workdir = "";
  CHECK(cfg.encode().size() == proto::kHostToInitTypes[1].min_len);
  // The largest exec the kernel can take fits the exec frame: 6 MiB of one-byte strings.
  CHECK(proto::arg_space_for_stack(~0ull) == proto::kArgMaxCeiling);
  CHECK(proto::kArgMaxCeiling + (64u << 10) <= proto::kMaxExecRequest);
}

TEST_CASE("proto: exec argument limits as the kernel computes them", "[proto][args]") {
  CHECK(proto::arg_space_for_stack(8u << 20) == (2u << 20));
  CHECK(proto::arg_space_for_stack(100u << 10) == (128u << 10));  // never below ARG_MAX
  CHECK(proto::arg_space_for_stack(64u << 20) == (6u << 20));     // 3/4 of _STK_LIM at most
  static uint64_t stack = 8u << 20;
  auto limit = [] { return stack; };
  std::vector<std::string> env = {"A=B"};
  CHECK(proto::check_exec_args({"sh"}, env, limit).ok());
  // 2 MiB in all: the file name (argv[0]) + strings with NULs + pointers.
  const uint64_t fixed = (2 + 1) + (2 + 1 + 8) + (3 + 1 + 8) + (1 + 8);
  std::vector<std::string> argv = {"sh", std::string((2u << 20) - fixed, 'x')};
  // (One string that long breaks MAX_ARG_STRLEN first.)
  auto p = proto::check_exec_args(argv, env, limit);
  CHECK(p.kind == proto::ArgProblem::kStringTooLong);
  CHECK(p.index == 1);
  CHECK_THAT(proto::describe(p, "exec"), Catch::Contains("argument 1") && Catch::Contains("MAX_ARG_STRLEN"));
  argv.resize(1);
  uint64_t left = (2u << 20) - (2 + 1) - (2 + 1 + 8) - (3 + 1 + 8);
  while (left > 0) {
    uint64_t take = std::min<uint64_t>(left, 100009);
    argv.push_back(std::string(take - 9, 'x'));
    left -= take;
  }
  CHECK(proto::exec_arg_bytes(argv, env) == (2u << 20));
  CHECK(proto::check_exec_args(argv, env, limit).ok());
  argv.back().push_back('x');
  p = proto::check_exec_args(argv, env, limit);
  CHECK(p.kind == proto::ArgProblem::kTotalTooLarge);
  CHECK(p.size == (2u << 20) + 1);
  CHECK_THAT(proto::describe(p, "run"), Catch::Contains("invalid run fields 'argv' and 'env'") &&
                                            Catch::Contains("2097153 bytes") && Catch::Contains("limit of 2097152") &&
                                            Catch::Contains("8388608"));
  stack = ~0ull;
  CHECK(proto::check_exec_args(argv, env, limit).ok());
  CHECK(proto::check_exec_args({"a", std::string("b\0c", 3)}, env, limit).kind == proto::ArgProblem::kNulByte);
  auto nul_env = proto::check_exec_args({"a"}, {"A=1", std::string("B=\0", 3)}, limit);
  CHECK(nul_env.in_env);
  CHECK(nul_env.index == 1);
}
