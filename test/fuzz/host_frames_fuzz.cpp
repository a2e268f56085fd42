// libFuzzer target: what the host reads from a sandbox, through the code the host runs — the frame
// reader, the reply rules of each agent request (runtime/agent_client), the init's set-up replies and a
// one-shot report. Input: one byte choosing the reader and a cap, then the bytes "the sandbox sent".
// Failing a call with sandlet::Error is the expected outcome; a crash, a leak, undefined behaviour or an
// allocation past the caps is a finding.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "backends/container/init_setup.hpp"
#include "common/error.hpp"
#include "proto/frame_reader.hpp"
#include "runtime/agent/agent_client.hpp"
#include "runtime/agent/one_shot_report.hpp"

namespace proto = sandlet::proto;

namespace {

// Runs the frames of `in` through `on_frame` until it reports the final one, throws, or a header is bad.
template <typename OnFrame>
void agent_replies(std::string_view in, OnFrame on_frame) {
  proto::FrameReader reader(proto::kAgentToHost);
  while (!in.empty()) {
    switch (reader.take(in)) {
      case proto::FrameReader::Result::kBad: (void)reader.error(); return;
      case proto::FrameReader::Result::kNeedMore: return;
      case proto::FrameReader::Result::kFrame:
        if (on_frame(static_cast<proto::AgentMsg>(reader.type()), reader.payload())) return;
    }
  }
}

void init_replies(std::string_view in) {
  // The set-up exchange: staged, then ready; then the one-shot report from the rest.
  proto::FrameReader reader(proto::kInitToHost);
  for (proto::InitMsg want : {proto::InitMsg::kStaged, proto::InitMsg::kReady}) {
    if (reader.take(in) != proto::FrameReader::Result::kFrame) return;
    sandlet::container::check_setup_reply(static_cast<proto::InitMsg>(reader.type()), reader.payload(), want, "fuzz");
  }
  sandlet::OneShotReport report("fuzz", 0);
  (void)report.feed(in);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint8_t mode = data[0] % 5;
  const uint64_t cap = 1 + (static_cast<uint64_t>(data[0] / 5) << 10);  // 1 B .. 51 KiB
  std::string_view in(reinterpret_cast<const char*>(data) + 1, size - 1);
  try {
    switch (mode) {
      case 0: {
        sandlet::ExecReplies replies(cap, nullptr);
        agent_replies(in, [&](proto::AgentMsg t, std::string_view p) { return replies.on_frame(t, p); });
        if (replies.outcome.stdout_data.size() > cap || replies.outcome.stderr_data.size() > cap) __builtin_trap();
        break;
      }
      case 1: {
        sandlet::ReadFileReplies replies(cap);
        agent_replies(in, [&](proto::AgentMsg t, std::string_view p) { return replies.on_frame(t, p); });
        if (replies.data.size() > cap) __builtin_trap();
        break;
      }
      case 2: agent_replies(in, sandlet::write_file_reply); break;
      case 3: agent_replies(in, sandlet::ping_reply); break;
      case 4: init_replies(in); break;
    }
  } catch (const sandlet::Error&) {
  }
  return 0;
}
