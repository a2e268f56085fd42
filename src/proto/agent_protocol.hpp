// The agent protocol: the host runtime and the in-sandbox agent, over the channel the backend provides
// (a Unix stream socket for containers). Only exec, stdin, signals, files, trees and ping, with their replies;
// the container init's start-up messages are another protocol (init_protocol.hpp) with types of their own.
//
// The host always opens the connection (the agent only accepts on a socket the host created and handed
// in); nothing inside the sandbox can reach the runtime. One connection carries one request and its
// replies. Frames as in frame.hpp, version kAgentVersion; every type has a payload size range per
// direction (the tables below), checked by the receiver before it allocates anything. Everything the host
// reads here may come from code that root inside the sandbox replaced: the host also checks the order of
// replies and caps what it accepts (runtime/agent_replies.hpp).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "proto/frame.hpp"
#include "proto/replies.hpp"
#include "proto/tree_protocol.hpp"
#include "proto/wire.hpp"

namespace sandlet::proto {

constexpr uint8_t kAgentVersion = 2;  // 1: one message space shared with the init's start-up

constexpr uint32_t kMaxDataFrame = 1u << 20;  // stdin, output and file chunks (senders use 64-256 KiB)
// An ExecRequest at the kernel's largest ARG_MAX (6 MiB, arg_limits.hpp) with room for cwd and user.
constexpr uint32_t kMaxExecRequest = (6u << 20) + (64u << 10);
constexpr uint32_t kMaxPathRequest = 64u << 10;  // a file request: a path (PATH_MAX 4096) and a user

enum class AgentMsg : uint8_t {
  // host -> agent, first frame of a connection
  kExec = 0x01,       // ExecRequest; followed by kStdin* and kStdinEof when kExecHasStdin is set
  kWriteFile = 0x05,  // WriteFileRequest; followed by kFileData* and kFileEof
  kReadFile = 0x08,   // ReadFileRequest
  kPing = 0x09,       // empty; the agent answers kPong
  kPutTree = 0x0A,    // PutTreeRequest; followed by (kTreeEntryIn, a file's kFileData*)* and kFileEof
  kGetTree = 0x0B,    // GetTreeRequest
  // host -> agent, later frames
  kStdin = 0x02,      // raw bytes
  kStdinEof = 0x03,   // empty
  kSignal = 0x04,     // u32 signal number: deliver to every process of this exec (cancellation)
  kFileData = 0x06,   // raw bytes
  kFileEof = 0x07,    // empty
  kTreeEntryIn = 0x0C,  // TreeEntry of a put-tree
  kResize = 0x0D,     // TermSize: the terminal of a kExecPty exec takes this size (ignored otherwise)
  // agent -> host
  kStarted = 0x41,    // u32 pid inside the sandbox; first reply of an exec that started
  kStdout = 0x42,     // raw bytes
  kStderr = 0x43,     // raw bytes
  kExit = 0x44,       // ExitStatus; last frame of an exec
  kError = 0x45,      // ErrorReply; last frame of any request that failed
  kFileChunk = 0x46,  // raw bytes of a read file
  kFileDone = 0x47,   // FileDone; last frame of a successful read
  kOk = 0x48,         // empty; last frame of a successful write
  kPong = 0x49,       // empty
  kTreeEntryOut = 0x4A,  // TreeEntry of a get-tree; a file's data follows as kFileChunk frames
  kTreeDone = 0x4B,      // TreeDone; last frame of a successful get-tree or put-tree
};

inline constexpr FrameType kHostToAgentTypes[] = {
    {0x01, 40, kMaxExecRequest, "exec"},
    {0x02, 1, kMaxDataFrame, "stdin"},
    {0x03, 0, 0, "stdin-eof"},
    {0x04, 4, 4, "signal"},
    {0x05, 16, kMaxPathRequest, "write-file"},
    {0x06, 1, kMaxDataFrame, "file-data"},
    {0x07, 0, 0, "file-eof"},
    {0x08, 12, kMaxPathRequest, "read-file"},
    {0x09, 0, 0, "ping"},
    {0x0A, 12, kMaxPathRequest, "put-tree"},
    {0x0B, 20, kMaxPathRequest, "get-tree"},
    {0x0C, kTreeEntryMin, kTreeEntryMax, "tree-entry"},
    {0x0D, 4, 4, "resize"},
};
inline constexpr FrameType kAgentToHostTypes[] = {
    {0x41, 4, 4, "started"},
    {0x42, 1, kMaxDataFrame, "stdout"},
    {0x43, 1, kMaxDataFrame, "stderr"},
    {0x44, ExitStatus::kSize, ExitStatus::kSize, "exit"},
    {0x45, 12, kErrorReplyMax, "error"},
    {0x46, 1, kMaxDataFrame, "file-chunk"},
    {0x47, 12, 12, "file-done"},
    {0x48, 0, 0, "ok"},
    {0x49, 0, 0, "pong"},
    {0x4A, kTreeEntryMin, kTreeEntryMax, "tree-entry"},
    {0x4B, TreeDone::kSize, TreeDone::kSize, "tree-done"},
};
inline constexpr Direction kHostToAgent{"agent protocol, host -> agent", kAgentVersion, kHostToAgentTypes,
                                        sizeof kHostToAgentTypes / sizeof kHostToAgentTypes[0]};
inline constexpr Direction kAgentToHost{"agent protocol, agent -> host", kAgentVersion, kAgentToHostTypes,
                                        sizeof kAgentToHostTypes / sizeof kAgentToHostTypes[0]};

inline std::string frame(AgentMsg type, std::string_view payload) {
  return encode_frame(static_cast<uint8_t>(type), kAgentVersion, payload);
}
inline void put_header(char* p, AgentMsg type, uint32_t len) {
  put_header(p, static_cast<uint8_t>(type), kAgentVersion, len);
}

// ---- messages -------------------------------------------------------------------------------------

enum ExecFlags : uint32_t {
  kExecHasStdin = 1,          // stdin frames follow; otherwise stdin is /dev/null
  kExecKillOnOutputLimit = 2, // kill the exec when a stream passes output_limit
  kExecKeepBackground = 4,    // processes still running when the main one exits are left alive; the exec
                              // completes at once and their later output is discarded
  kExecToolkit = 8,           // run from the protected toolkit (guest/toolkit.hpp): argv[0], PATH and the
                              // loader from /.sandlet/toolkit only; FAILED_PRECONDITION without a toolkit
  kExecPty = 16,              // stdin, stdout and stderr are one new pseudo-terminal (the command's
                              // controlling terminal, of ExecRequest::term size): its output comes as kStdout
                              // only; requires kExecHasStdin (stdin frames are typed into the terminal)
};
constexpr uint32_t kExecKnownFlags = 31;

// A terminal's size in character cells (TIOCSWINSZ): 1..4096 each.
struct TermSize {
  uint16_t rows = 24, cols = 80;
  static constexpr uint16_t kMax = 4096;
  bool valid() const { return rows >= 1 && cols >= 1 && rows <= kMax && cols <= kMax; }

  std::string encode() const {
    wire::Writer w;
    w.u16(rows); w.u16(cols);
    return std::move(w.data());
  }
  static bool decode(std::string_view p, TermSize* out) {
    wire::Reader r(p);
    out->rows = r.u16(); out->cols = r.u16();
    return r.ok() && r.at_end() && out->valid();
  }
};

struct ExecRequest {
  std::vector<std::string> argv;  // argv[0] resolved through PATH of env
  std::vector<std::string> env;   // complete environment, "K=V" (the host merged spec and exec env)
  std::string cwd;                // empty = config workdir
  std::string user;               // empty = config user; "uid[:gid]" or a passwd name
  uint64_t timeout_ms = 0;        // 0 = none
  uint64_t output_limit = 16u << 20;  // bytes per stream
  uint32_t flags = 0;
  TermSize term;  // on the wire only with kExecPty (an agent without terminals refuses the flag first)

  std::string encode() const {
    wire::Writer w;
    w.strs(argv); w.strs(env); w.str(cwd); w.str(user);
    w.u64(timeout_ms); w.u64(output_limit); w.u32(flags);
    if (flags & kExecPty) { w.u16(term.rows); w.u16(term.cols); }
    return std::move(w.data());
  }
  static bool decode(std::string_view p, ExecRequest* out) {
    wire::Reader r(p);
    out->argv = r.strs(); out->env = r.strs(); out->cwd = r.str(); out->user = r.str();
    out->timeout_ms = r.u64(); out->output_limit = r.u64(); out->flags = r.u32();
    if (out->flags & kExecPty) { out->term.rows = r.u16(); out->term.cols = r.u16(); }
    const bool pty_ok = !(out->flags & kExecPty) || ((out->flags & kExecHasStdin) && out->term.valid());
    return r.ok() && r.at_end() && !out->argv.empty() && (out->flags & ~kExecKnownFlags) == 0 && pty_ok;
  }
};

// The payload of kStarted and kSignal: one u32.
inline std::string encode_u32(uint32_t v) {
  wire::Writer w;
  w.u32(v);
  return std::move(w.data());
}
inline bool decode_u32(std::string_view p, uint32_t* v) {
  wire::Reader r(p);
  *v = r.u32();
  return r.ok() && r.at_end();
}

enum WriteFileFlags : uint32_t { kWriteMkdirParents = 1 };

struct WriteFileRequest {
  std::string path;   // absolute, inside the sandbox
  uint32_t mode = 0644;
  uint32_t flags = kWriteMkdirParents;
  std::string user;   // owner; empty = config user

  std::string encode() const {
    wire::Writer w;
    w.str(path); w.u32(mode); w.u32(flags); w.str(user);
    return std::move(w.data());
  }
  static bool decode(std::string_view p, WriteFileRequest* out) {
    wire::Reader r(p);
    out->path = r.str(); out->mode = r.u32(); out->flags = r.u32(); out->user = r.str();
    return r.ok() && r.at_end() && !out->path.empty();
  }
};

struct ReadFileRequest {
  std::string path;
  uint64_t max_bytes = 64u << 20;  // larger files are refused with OUT_OF_RANGE

  std::string encode() const {
    wire::Writer w;
    w.str(path); w.u64(max_bytes);
    return std::move(w.data());
  }
  static bool decode(std::string_view p, ReadFileRequest* out) {
    wire::Reader r(p);
    out->path = r.str(); out->max_bytes = r.u64();
    return r.ok() && r.at_end() && !out->path.empty();
  }
};

struct FileDone {
  uint64_t size = 0;
  uint32_t mode = 0;

  std::string encode() const {
    wire::Writer w;
    w.u64(size); w.u32(mode);
    return std::move(w.data());
  }
  static bool decode(std::string_view p, FileDone* out) {
    wire::Reader r(p);
    out->size = r.u64(); out->mode = r.u32();
    return r.ok() && r.at_end() && (out->mode & ~07777u) == 0;
  }
};

}  // namespace sandlet::proto
