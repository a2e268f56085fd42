#include "guest/frame_parse.hpp"

#include <cstdio>

namespace sandlet::guest {

FrameView next_agent_frame(const char* data, size_t size) {
  FrameView v;
  if (size < proto::kHeaderSize) return v;
  v.header = proto::parse_header(data);
  v.check = proto::check_header(proto::kHostToAgent, v.header);
  if (v.check != proto::HeaderCheck::kOk) {
    v.kind = FrameView::kBad;
    return v;
  }
  v.total = proto::kHeaderSize + v.header.len;
  if (size < v.total) return v;
  v.kind = FrameView::kFrame;
  v.payload = std::string_view(data + proto::kHeaderSize, v.header.len);
  return v;
}

Action classify(Phase phase, proto::AgentMsg type, bool takes_stdin, bool stdin_eof, const char** why) {
  using proto::AgentMsg;
  *why = nullptr;
  switch (phase) {
    case Phase::kNew:
      switch (type) {
        case AgentMsg::kPing: return Action::kPing;
        case AgentMsg::kExec: return Action::kExecStart;
        case AgentMsg::kWriteFile: return Action::kWriteStart;
        case AgentMsg::kReadFile: return Action::kReadStart;
        case AgentMsg::kPutTree: return Action::kPutTreeStart;
        case AgentMsg::kGetTree: return Action::kGetTreeStart;
        default:
          *why = "the first frame of a connection must be a request (exec, write-file, read-file, put-tree, get-tree, ping)";
          break;
      }
      break;
    case Phase::kExec:
      switch (type) {
        case AgentMsg::kStdin:
        case AgentMsg::kStdinEof:
          if (!takes_stdin) *why = "stdin for an exec that takes none";
          else if (stdin_eof) *why = "stdin after its end";
          else return type == AgentMsg::kStdin ? Action::kStdin : Action::kStdinEof;
          break;
        case AgentMsg::kSignal: return Action::kSignal;
        case AgentMsg::kResize: return Action::kResize;
        default: *why = "only stdin, signals and terminal sizes may follow an exec request"; break;
      }
      break;
    case Phase::kWrite:
      if (type == AgentMsg::kFileData) return Action::kFileData;
      if (type == AgentMsg::kFileEof) return Action::kFileEof;
      *why = "only file data and its end may follow a write-file request";
      break;
    case Phase::kRead: *why = "nothing may follow a read-file request"; break;
    case Phase::kPutTree:
      if (type == AgentMsg::kTreeEntryIn) return Action::kTreeEntry;
      if (type == AgentMsg::kFileData) return Action::kFileData;
      if (type == AgentMsg::kFileEof) return Action::kFileEof;
      *why = "only tree entries, file data and their end may follow a put-tree request";
      break;
    case Phase::kGetTree: *why = "nothing may follow a get-tree request"; break;
    case Phase::kDone: return Action::kIgnore;
  }
  return Action::kReject;
}

bool decode_signal(std::string_view payload, int* sig) {
  uint32_t v = 0;
  if (!proto::decode_u32(payload, &v) || v < 1 || v > 64) return false;
  *sig = static_cast<int>(v);
  return true;
}

namespace {

[[gnu::cold]] std::string setup_header_problem(proto::HeaderCheck c, const proto::FrameHeader& h, proto::InitMsg want) {
  if (c != proto::HeaderCheck::kOk) return proto::describe(c, h, proto::kHostToInit);
  char buf[160];
  snprintf(buf, sizeof buf, "frame %s where %s was due (%s)", proto::kHostToInit.find(h.type)->name,
           proto::kHostToInit.find(static_cast<uint8_t>(want))->name, proto::kHostToInit.name);
  return buf;
}

}  // namespace

std::string check_setup_header(const char* header, proto::InitMsg want, proto::FrameHeader* out) {
  *out = proto::parse_header(header);
  const proto::HeaderCheck c = proto::check_header(proto::kHostToInit, *out);
  if (c == proto::HeaderCheck::kOk && out->type == static_cast<uint8_t>(want)) return {};
  return setup_header_problem(c, *out, want);
}

bool decode_stage(std::string_view payload, uint32_t* flags) {
  if (!proto::decode_u32(payload, flags)) return false;
  return (*flags & ~static_cast<uint32_t>(proto::kInitHasCgroup | proto::kInitLoopbackUp | proto::kInitDetached |
                                          proto::kInitRunOnce | proto::kInitHasUpper | proto::kInitMaskKernelFiles)) == 0;
}

}  // namespace sandlet::guest
