// The guest's parsing of what the host sends (src/guest/frame_parse.cpp, compiled in here as the agent
// compiles it): frame boundaries in a connection's input, what each step of a request accepts, and the
// init's set-up frame headers.
#include <catch2/catch.hpp>

#include "guest/frame_parse.hpp"

namespace proto = sandlet::proto;
using sandlet::guest::Action;
using sandlet::guest::FrameView;
using sandlet::guest::Phase;

namespace {

std::string header(uint8_t type, uint8_t version, uint32_t len) {
  std::string h(proto::kHeaderSize, '\0');
  proto::put_header(h.data(), type, version, len);
  return h;
}

FrameView parse(const std::string& s) { return sandlet::guest::next_agent_frame(s.data(), s.size()); }

Action classify(Phase p, proto::AgentMsg m, bool takes_stdin = false, bool stdin_eof = false) {
  const char* why = nullptr;
  Action a = sandlet::guest::classify(p, m, takes_stdin, stdin_eof, &why);
  CHECK((a == Action::kReject) == (why != nullptr));
  return a;
}

}  // namespace

TEST_CASE("guest frames: boundaries, truncation and the header checks", "[guest][frame]") {
  proto::ExecRequest req;
  req.argv = {"true"};
  const std::string exec = proto::frame(proto::AgentMsg::kExec, req.encode());
  const std::string two = exec + proto::frame(proto::AgentMsg::kStdinEof, "");

  FrameView f = parse(two);
  REQUIRE(f.kind == FrameView::kFrame);
  CHECK(f.total == exec.size());
  CHECK(f.payload == req.encode());
  f = parse(two.substr(exec.size()));
  CHECK(f.kind == FrameView::kFrame);
  CHECK(f.payload.empty());

  // Truncated: a partial header says nothing; a full header gives the size to wait for.
  for (size_t cut = 0; cut < exec.size(); ++cut) {
    f = parse(exec.substr(0, cut));
    CHECK(f.kind == FrameView::kNeedMore);
    CHECK(f.total == (cut < proto::kHeaderSize ? 0 : exec.size()));
  }

  const auto bad = [](const std::string& h, proto::HeaderCheck why) {
    FrameView v = parse(h);
    CHECK(v.kind == FrameView::kBad);
    CHECK(v.check == why);
    CHECK(v.total == 0);  // nothing to reserve for a refused header
  };
  bad(header(static_cast<uint8_t>(proto::AgentMsg::kPing), 1, 0), proto::HeaderCheck::kBadVersion);
  bad(header(0x42, proto::kAgentVersion, 5), proto::HeaderCheck::kUnknownType);  // a reply, sent to the agent
  bad(header(0x82, proto::kAgentVersion, 40), proto::HeaderCheck::kUnknownType);  // the init's config
  bad(header(0x01, proto::kAgentVersion, proto::kMaxExecRequest + 1), proto::HeaderCheck::kTooLong);
  bad(header(0x02, proto::kAgentVersion, proto::kMaxDataFrame + 1), proto::HeaderCheck::kTooLong);
  bad(header(0x04, proto::kAgentVersion, 5), proto::HeaderCheck::kTooLong);
  bad(header(0x04, proto::kAgentVersion, 3), proto::HeaderCheck::kTooShort);
  bad(header(0x01, proto::kAgentVersion, 39), proto::HeaderCheck::kTooShort);
  std::string reserved = header(0x09, proto::kAgentVersion, 0);
  reserved[6] = 1;
  bad(reserved, proto::HeaderCheck::kBadReserved);
  // The largest exec a kernel can take is a valid frame size.
  CHECK(parse(header(0x01, proto::kAgentVersion, proto::kMaxExecRequest)).kind == FrameView::kNeedMore);
}

TEST_CASE("guest frames: what each step of a request accepts", "[guest][frame]") {
  using M = proto::AgentMsg;
  CHECK(classify(Phase::kNew, M::kExec) == Action::kExecStart);
  CHECK(classify(Phase::kNew, M::kWriteFile) == Action::kWriteStart);
  CHECK(classify(Phase::kNew, M::kReadFile) == Action::kReadStart);
  CHECK(classify(Phase::kNew, M::kPing) == Action::kPing);
  for (M m : {M::kStdin, M::kStdinEof, M::kSignal, M::kFileData, M::kFileEof})
    CHECK(classify(Phase::kNew, m) == Action::kReject);

  CHECK(classify(Phase::kExec, M::kSignal) == Action::kSignal);
  CHECK(classify(Phase::kExec, M::kResize) == Action::kResize);
  CHECK(classify(Phase::kNew, M::kResize) == Action::kReject);
  CHECK(classify(Phase::kWrite, M::kResize) == Action::kReject);
  CHECK(classify(Phase::kExec, M::kStdin, true) == Action::kStdin);
  CHECK(classify(Phase::kExec, M::kStdinEof, true) == Action::kStdinEof);
  CHECK(classify(Phase::kExec, M::kStdin, false) == Action::kReject);      // takes no stdin
  CHECK(classify(Phase::kExec, M::kStdin, true, true) == Action::kReject);  // after its end
  CHECK(classify(Phase::kExec, M::kStdinEof, true, true) == Action::kReject);
  for (M m : {M::kExec, M::kPing, M::kReadFile, M::kWriteFile, M::kFileData, M::kFileEof})
    CHECK(classify(Phase::kExec, m, true) == Action::kReject);

  CHECK(classify(Phase::kWrite, M::kFileData) == Action::kFileData);
  CHECK(classify(Phase::kWrite, M::kFileEof) == Action::kFileEof);
  for (M m : {M::kExec, M::kStdin, M::kSignal, M::kPing, M::kWriteFile})
    CHECK(classify(Phase::kWrite, m) == Action::kReject);

  for (M m : {M::kExec, M::kStdin, M::kPing, M::kFileData}) CHECK(classify(Phase::kRead, m) == Action::kReject);
  for (M m : {M::kExec, M::kStdin, M::kPing}) CHECK(classify(Phase::kDone, m) == Action::kIgnore);

  int sig = 0;
  CHECK(sandlet::guest::decode_signal(proto::encode_u32(9), &sig));
  CHECK(sig == 9);
  for (uint32_t v : {0u, 65u, 0xffffffffu}) CHECK_FALSE(sandlet::guest::decode_signal(proto::encode_u32(v), &sig));
  CHECK_FALSE(sandlet::guest::decode_signal("abc", &sig));
}

TEST_CASE("guest frames: terminal sizes and terminal execs", "[guest][frame]") {
  proto::TermSize size;
  CHECK(proto::TermSize::decode(proto::TermSize{50, 132}.encode(), &size));
  CHECK((size.rows == 50 && size.cols == 132));
  for (proto::TermSize bad : {proto::TermSize{0, 80}, proto::TermSize{24, 0}, proto::TermSize{4097, 80}})
    CHECK_FALSE(proto::TermSize::decode(bad.encode(), &size));
  CHECK_FALSE(proto::TermSize::decode("abc", &size));

  proto::ExecRequest req;
  req.argv = {"sh"};
  req.flags = proto::kExecPty | proto::kExecHasStdin;
  req.term = {40, 100};
  proto::ExecRequest back;
  REQUIRE(proto::ExecRequest::decode(req.encode(), &back));
  CHECK((back.term.rows == 40 && back.term.cols == 100));
  req.flags = proto::kExecPty;  // a terminal is typed into: it needs the stdin frames
  CHECK_FALSE(proto::ExecRequest::decode(req.encode(), &back));
  req.flags = proto::kExecPty | proto::kExecHasStdin;
  req.term = {0, 0};
  CHECK_FALSE(proto::ExecRequest::decode(req.encode(), &back));
  req.flags = proto::kExecHasStdin;  // without the flag the size is not on the wire
  std::string plain = req.encode();
  CHECK(proto::ExecRequest::decode(plain, &back));
  CHECK_FALSE(proto::ExecRequest::decode(plain + std::string(4, '\x01'), &back));
}

TEST_CASE("guest frames: the init's set-up headers", "[guest][frame]") {
  proto::FrameHeader h;
  const std::string stage = proto::frame(proto::InitMsg::kStage, proto::encode_u32(proto::kInitHasCgroup));
  CHECK(sandlet::guest::check_setup_header(stage.data(), proto::InitMsg::kStage, &h).empty());
  CHECK(h.len == 4);
  // Out of order: the config where the stage is due.
  proto::InitConfig cfg;
  const std::string config = proto::frame(proto::InitMsg::kConfig, cfg.encode());
  CHECK_THAT(sandlet::guest::check_setup_header(config.data(), proto::InitMsg::kStage, &h),
             Catch::Contains("config where stage was due"));
  // The agent's protocol, another version, an oversized config.
  CHECK_FALSE(sandlet::guest::check_setup_header(header(0x01, proto::kInitVersion, 40).data(), proto::InitMsg::kStage, &h).empty());
  CHECK_THAT(sandlet::guest::check_setup_header(header(0x81, 2, 4).data(), proto::InitMsg::kStage, &h),
             Catch::Contains("version 2, expected 1"));
  CHECK_THAT(sandlet::guest::check_setup_header(header(0x82, proto::kInitVersion, proto::kMaxInitConfig + 1).data(),
                                                proto::InitMsg::kConfig, &h),
             Catch::Contains("over its maximum"));
  uint32_t flags = 0;
  CHECK(sandlet::guest::decode_stage(proto::encode_u32(proto::kInitHasCgroup), &flags));
  CHECK_FALSE(sandlet::guest::decode_stage(proto::encode_u32(0x100), &flags));
  CHECK_FALSE(sandlet::guest::decode_stage("ab", &flags));
}
