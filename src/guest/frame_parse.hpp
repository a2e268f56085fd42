// How the agent and the init read what the host sends, as pure functions over bytes (no system calls,
// no state but the arguments), so that the unit tests and the fuzzer run exactly what the guest runs:
// where a frame ends in a connection's input, what a frame may be at each step of a request, and the
// set-up frames' headers. (The payload decoders are the protocol's own: proto/*_protocol.hpp.)
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "proto/agent_protocol.hpp"
#include "proto/init_protocol.hpp"

namespace sandlet::guest {

struct FrameView {
  enum Kind : uint8_t { kNeedMore, kFrame, kBad } kind = kNeedMore;
  proto::FrameHeader header;
  proto::HeaderCheck check = proto::HeaderCheck::kOk;  // why kBad
  size_t total = 0;            // header + payload, once the header is known and good
  std::string_view payload;    // kFrame
};

// The first frame in `data`, checked against the host -> agent table before its length is believed.
FrameView next_agent_frame(const char* data, size_t size);

// Where a connection's request is.
enum class Phase : uint8_t { kNew, kExec, kWrite, kRead, kPutTree, kGetTree, kDone };

// What a frame means where it arrives.
enum class Action : uint8_t {
  kPing, kExecStart, kWriteStart, kReadStart,  // first frames
  kPutTreeStart, kGetTreeStart,
  kStdin, kStdinEof, kSignal, kResize,         // during an exec
  kFileData, kFileEof,                         // during a file write or a put-tree
  kTreeEntry,                                  // during a put-tree
  kIgnore,                                     // after the request completed
  kReject,                                     // out of order: *why says what
};

// `takes_stdin`: the exec request set kExecHasStdin; `stdin_eof`: kStdinEof came already.
Action classify(Phase phase, proto::AgentMsg type, bool takes_stdin, bool stdin_eof, const char** why);

// kSignal's payload: a signal number 1..64.
bool decode_signal(std::string_view payload, int* sig);

// The init's check of a set-up frame's header: of protocol kInitVersion, the type it waits for, within
// that type's size range. Empty when good, else what is wrong.
std::string check_setup_header(const char* header, proto::InitMsg want, proto::FrameHeader* out);
// kStage's payload: the InitFlags.
bool decode_stage(std::string_view payload, uint32_t* flags);

}  // namespace sandlet::guest
