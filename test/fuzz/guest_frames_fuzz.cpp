// libFuzzer target: what the guest reads from the host, through the code the guest runs — a
// connection's input buffer (guest/buffer.cpp) cut into frames and classified step by step as the agent's
// server does (guest/frame_parse.cpp), every payload decoded with the protocol's own decoders; and the
// init's set-up frames. Input: one byte choosing the reader and how the input arrives in pieces, then
// the bytes "the host sent".
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

#include "guest/buffer.hpp"
#include "guest/frame_parse.hpp"

namespace proto = sandlet::proto;
using sandlet::guest::Action;
using sandlet::guest::FrameView;
using sandlet::guest::Phase;

namespace {

// The server's connection loop without the system calls (server.cpp conn_read / conn_process_frames /
// conn_handle_frame): false once the connection would end.
struct Conn {
  sandlet::guest::Buffer in;
  Phase phase = Phase::kNew;
  bool takes_stdin = false, stdin_eof = false;

  bool frame(proto::AgentMsg type, std::string_view payload) {
    const char* why = nullptr;
    switch (sandlet::guest::classify(phase, type, takes_stdin, stdin_eof, &why)) {
      case Action::kReject: return false;
      case Action::kIgnore: return true;
      case Action::kPing: phase = Phase::kDone; return true;
      case Action::kExecStart: {
        proto::ExecRequest req;
        if (!proto::ExecRequest::decode(payload, &req)) return false;
        if (req.argv.empty()) __builtin_trap();
        takes_stdin = req.flags & proto::kExecHasStdin;
        phase = Phase::kExec;
        return true;
      }
      case Action::kWriteStart: {
        proto::WriteFileRequest req;
        if (!proto::WriteFileRequest::decode(payload, &req)) return false;
        phase = Phase::kWrite;
        return true;
      }
      case Action::kReadStart: {
        proto::ReadFileRequest req;
        if (!proto::ReadFileRequest::decode(payload, &req)) return false;
        phase = Phase::kRead;
        return true;
      }
      case Action::kPutTreeStart: {
        proto::PutTreeRequest req;
        if (!proto::PutTreeRequest::decode(payload, &req)) return false;
        phase = Phase::kPutTree;
        return true;
      }
      case Action::kGetTreeStart: {
        proto::GetTreeRequest req;
        if (!proto::GetTreeRequest::decode(payload, &req)) return false;
        phase = Phase::kGetTree;
        return true;
      }
      case Action::kTreeEntry: {
        proto::TreeEntry e;
        if (!proto::TreeEntry::decode(payload, &e)) return false;
        // The applier opens these beneath its destination: a decoded path that is not a tree path is a broken check.
        if (proto::tree_path_problem(e.path, true) != nullptr) __builtin_trap();
        if (e.kind == proto::TreeKind::kHardlink && proto::tree_path_problem(e.link, false) != nullptr) __builtin_trap();
        return true;
      }
      case Action::kStdin: return true;
      case Action::kStdinEof: stdin_eof = true; return true;
      case Action::kSignal: {
        int sig = 0;
        return sandlet::guest::decode_signal(payload, &sig);
      }
      case Action::kResize: {
        proto::TermSize size;
        return proto::TermSize::decode(payload, &size);  // the guest rejects the connection otherwise
      }
      case Action::kFileData: return true;
      case Action::kFileEof: phase = Phase::kDone; return true;
    }
    return false;
  }

  // Appends one piece of input and takes every complete frame; false once the connection ends.
  bool feed(std::string_view piece) {
    std::memcpy(in.reserve_tail(piece.size()), piece.data(), piece.size());
    in.commit(piece.size());
    while (phase != Phase::kDone) {
      const FrameView f = sandlet::guest::next_agent_frame(in.data(), in.size());
      if (f.kind == FrameView::kBad) return false;
      if (f.kind == FrameView::kNeedMore) {
        if (f.total > proto::kHeaderSize + proto::kMaxExecRequest) __builtin_trap();  // a cap not enforced
        if (f.total > in.size()) in.reserve_tail(f.total - in.size());
        return true;
      }
      if (f.total > in.size() || f.payload.size() != f.header.len) __builtin_trap();
      if (!frame(static_cast<proto::AgentMsg>(f.header.type), f.payload)) return false;
      in.consume(f.total);
    }
    return true;
  }
};

void init_frames(std::string_view in) {
  proto::FrameHeader h;
  for (proto::InitMsg want : {proto::InitMsg::kStage, proto::InitMsg::kConfig}) {
    if (in.size() < proto::kHeaderSize) return;
    if (!sandlet::guest::check_setup_header(in.data(), want, &h).empty()) return;
    in.remove_prefix(proto::kHeaderSize);
    if (h.len > in.size()) return;
    const std::string_view payload = in.substr(0, h.len);
    in.remove_prefix(h.len);
    if (want == proto::InitMsg::kStage) {
      uint32_t flags;
      if (!sandlet::guest::decode_stage(payload, &flags)) return;
    } else {
      proto::InitConfig cfg;
      if (!proto::InitConfig::decode(payload, &cfg)) return;
      if ((cfg.flags & proto::kInitRunOnce) && cfg.run_once.argv.empty()) __builtin_trap();
      // The init indexes its descriptor array by these and hands the targets to system calls.
      if (cfg.mounts.size() > proto::kMaxMounts || ((cfg.flags & proto::kInitHasMounts) == 0) != cfg.mounts.empty())
        __builtin_trap();
      for (const proto::InitMount& m : cfg.mounts)
        if (m.target.empty() || m.target[0] != '/' || m.target.find('\0') != std::string::npos) __builtin_trap();
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  std::string_view in(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] & 1) {
    init_frames(in);
    return 0;
  }
  // The input arrives in pieces of 1..128 bytes (as reads of a socket would cut it), or whole.
  const size_t piece = data[0] >> 1 ? data[0] >> 1 : in.size() + 1;
  Conn c;
  while (!in.empty()) {
    const std::string_view p = in.substr(0, piece);
    in.remove_prefix(p.size());
    if (!c.feed(p)) break;
  }
  return 0;
}
