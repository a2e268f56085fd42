// The versioned, length-checked protocol between the host runtime and the in-sandbox agent (PID 1).
//
// Transport: a Unix stream socket. The host always opens the connection (the agent only accepts on a
// listening socket the host created and handed in); nothing inside the sandbox can reach the runtime.
// One connection carries one request (exec, file read/write, ping) and its replies.
//
// Frame: 8-byte header {u32 payload_len, u8 type, u8 version, u16 reserved=0} then payload_len bytes.
// payload_len is capped at kMaxPayload; a frame with a bad version or oversize length closes the
// connection. All integers little-endian (wire.hpp).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "proto/wire.hpp"

namespace sandlet::proto {

constexpr uint8_t kVersion = 1;
constexpr uint32_t kMaxPayload = 1u << 20;
constexpr size_t kHeaderSize = 8;

enum class Msg : uint8_t {
  // host -> agent, first frame of a connection
  kExec = 1,        // ExecRequest; followed by kStdin* and kStdinEof when kExecHasStdin is set
  kWriteFile = 5,   // WriteFileRequest; followed by kFileData* and kFileEof
  kReadFile = 8,    // ReadFileRequest
  kPing = 9,        // empty; agent answers kPong
  // host -> agent, later frames
  kStdin = 2,       // raw bytes
  kStdinEof = 3,    // empty
  kSignal = 4,      // u32 signal number: deliver to every process of this exec (cancellation)
  kFileData = 6,    // raw bytes
  kFileEof = 7,     // empty
  // host -> init, on the setup socket only, in this order
  kInitStage = 34,  // u32 InitFlags (only kInitHasCgroup counts); fds via SCM_RIGHTS (see InitConfig):
                    // the init builds its filesystem view and answers kInitStaged
  kInitConfig = 32, // InitConfig: identity and policy; the init answers kInitReady. With kInitRunOnce it
                    // carries the command's stdio fds (SCM_RIGHTS, see RunOnce) and, after ready, the init
                    // answers kExit or kError once the command has ended, then exits
  // init -> host, on the setup socket only
  kInitStaged = 35, // empty payload
  kInitReady = 33,  // empty payload
  // agent -> host
  kStarted = 64,    // u32 pid inside the sandbox
  kStdout = 65,     // raw bytes
  kStderr = 66,     // raw bytes
  kExit = 67,       // ExitStatus; last frame of an exec
  kError = 68,      // ErrorReply; last frame of any request that failed
  kFileChunk = 69,  // raw bytes of a read file
  kFileDone = 70,   // FileDone; last frame of a successful read
  kOk = 71,         // empty; last frame of a successful write
  kPong = 72,       // empty
};

struct FrameHeader {
  uint32_t len;
  Msg type;
  uint8_t version;
};

inline std::string encode_header(Msg type, uint32_t len) {
  wire::Writer w;
  w.u32(len);
  w.u8(static_cast<uint8_t>(type));
  w.u8(kVersion);
  w.u8(0);
  w.u8(0);
  return std::move(w.data());
}
inline std::string frame(Msg type, const std::string& payload) {
  return encode_header(type, static_cast<uint32_t>(payload.size())) + payload;
}
// Returns false when the header is malformed (wrong version, oversize).
inline bool decode_header(const char* p, FrameHeader* h) {
  wire::Reader r(std::string_view(p, kHeaderSize));
  h->len = r.u32();
  h->type = static_cast<Msg>(r.u8());
  h->version = r.u8();
  return r.ok() && h->version == kVersion && h->len <= kMaxPayload;
}

// ---- messages -------------------------------------------------------------------------------------

enum ExecFlags : uint32_t {
  kExecHasStdin = 1,          // stdin frames follow; otherwise stdin is /dev/null
  kExecKillOnOutputLimit = 2, // kill the exec when a stream passes output_limit
  kExecKeepBackground = 4,    // processes still running when the main one exits are left alive; the exec
                              // completes at once and their later output is discarded
};

struct ExecRequest {
  std::vector<std::string> argv;  // argv[0] resolved through PATH of env
  std::vector<std::string> env;   // complete environment, "K=V" (the host merged spec and exec env)
  std::string cwd;                // empty = config workdir
  std::string user;               // empty = config user; "uid[:gid]" or a passwd name
  uint64_t timeout_ms = 0;        // 0 = none
  uint64_t output_limit = 16u << 20;  // bytes per stream
  uint32_t flags = 0;

  std::string encode() const {
    wire::Writer w;
    w.strs(argv); w.strs(env); w.str(cwd); w.str(user);
    w.u64(timeout_ms); w.u64(output_limit); w.u32(flags);
    return std::move(w.data());
  }
  static bool decode(std::string_view p, ExecRequest* out) {
    wire::Reader r(p);
    out->argv = r.strs(); out->env = r.strs(); out->cwd = r.str(); out->user = r.str();
    out->timeout_ms = r.u64(); out->output_limit = r.u64(); out->flags = r.u32();
    return r.ok() && r.at_end() && !out->argv.empty();
  }
};

enum ExitFlags : uint32_t {
  kExitStdoutTruncated = 1,
  kExitStderrTruncated = 2,
  kExitTimedOut = 4,
  kExitOutputLimitKilled = 8,
};

struct ExitStatus {
  int32_t exit_code = -1;  // -1 when killed by a signal
  int32_t signal = 0;
  uint32_t flags = 0;
  uint64_t run_ns = 0;     // from spawn to the exit of the last process of the exec

  std::string encode() const {
    wire::Writer w;
    w.i32(exit_code); w.i32(signal); w.u32(flags); w.u64(run_ns);
    return std::move(w.data());
  }
  static bool decode(std::string_view p, ExitStatus* out) {
    wire::Reader r(p);
    out->exit_code = r.i32(); out->signal = r.i32(); out->flags = r.u32(); out->run_ns = r.u64();
    return r.ok() && r.at_end();
  }
};

struct ErrorReply {
  uint32_t code = 13;  // a sandlet_code_t
  int32_t err_no = 0;
  std::string message;

  std::string encode() const {
    wire::Writer w;
    w.u32(code); w.i32(err_no); w.str(message);
    return std::move(w.data());
  }
  static bool decode(std::string_view p, ErrorReply* out) {
    wire::Reader r(p);
    out->code = r.u32(); out->err_no = r.i32(); out->message = r.str();
    return r.ok() && r.at_end();
  }
};

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
    return r.ok() && r.at_end();
  }
};

// Start-up is two exchanges on the setup socket (the init's fd 3), so that the first can happen ahead of
// time in a warm pool: kInitStage carries these SCM_RIGHTS fds, in this order:
//   [0] the root filesystem: a detached mount (fsmount/open_tree fd) to attach and pivot into
//   [1] the sandbox's /dev: a detached tmpfs with the device nodes (backends/container/sandbox_dev.hpp) to attach on /dev
//   [2] the agent's listening Unix socket (already bound and listening, on a host path)
//   [3] optional (kInitHasCgroup): an O_DIRECTORY fd of the sandbox's cgroup2 directory, delegated to the
//       sandbox root, under which the agent creates one child cgroup per exec (to kill whole trees)
enum InitFlags : uint32_t {
  kInitHasCgroup = 1,
  kInitLoopbackUp = 2,
  kInitDetached = 4,  // the sandbox outlives its creator: drop the parent-death signal
  kInitRunOnce = 8,   // one-shot: run InitConfig::run_once right after ready instead of serving requests
};

// The command of a one-shot sandbox. Its stdin/stdout/stderr arrive with the kInitConfig frame as
// SCM_RIGHTS fds, in that order, only those whose bit is set in `stdio` (bit 0 stdin, 1 stdout, 2 stderr);
// a missing one is the sandbox's /dev/null.
struct RunOnce {
  std::vector<std::string> argv;  // argv[0] resolved through PATH of env
  std::vector<std::string> env;   // complete environment, "K=V"
  std::string cwd;                // empty = config workdir
  std::string user;               // empty = config user
  uint64_t timeout_ms = 0;        // 0 = none; on expiry every process of the sandbox is killed
  uint32_t stdio = 0;
};

struct InitConfig {
  std::string hostname;
  std::string workdir = "/";
  std::string user;               // default exec user, "uid[:gid]" or a passwd name; empty = root
  std::vector<std::string> env;   // default environment for execs that send none (not used when an exec sends env)
  std::string seccomp_bpf;        // struct sock_filter[] installed on the agent before serving (inherited by execs)
  uint64_t max_lifetime_ms = 0;   // the agent exits (tearing the sandbox down) after this; 0 = never
  uint64_t idle_timeout_ms = 0;   // ... or after this long without a request; 0 = never
  uint32_t flags = 0;
  RunOnce run_once;               // only with kInitRunOnce

  std::string encode() const {
    wire::Writer w;
    w.str(hostname); w.str(workdir); w.str(user); w.strs(env); w.str(seccomp_bpf);
    w.u64(max_lifetime_ms); w.u64(idle_timeout_ms); w.u32(flags);
    if (flags & kInitRunOnce) {
      w.strs(run_once.argv); w.strs(run_once.env); w.str(run_once.cwd); w.str(run_once.user);
      w.u64(run_once.timeout_ms); w.u32(run_once.stdio);
    }
    return std::move(w.data());
  }
  static bool decode(std::string_view p, InitConfig* out) {
    wire::Reader r(p);
    out->hostname = r.str(); out->workdir = r.str(); out->user = r.str(); out->env = r.strs();
    out->seccomp_bpf = r.str(); out->max_lifetime_ms = r.u64(); out->idle_timeout_ms = r.u64();
    out->flags = r.u32();
    if (out->flags & kInitRunOnce) {
      RunOnce& c = out->run_once;
      c.argv = r.strs(); c.env = r.strs(); c.cwd = r.str(); c.user = r.str();
      c.timeout_ms = r.u64(); c.stdio = r.u32();
      if (c.argv.empty() || (c.stdio & ~7u) != 0) return false;
    }
    return r.ok() && r.at_end();
  }
};

}  // namespace sandlet::proto
