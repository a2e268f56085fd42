// Writes the fuzzers' seed corpus (test/fuzz/corpus/<target>/): one well-formed exchange of each kind, as
// the real peers send them. Run after a protocol change:  cmake --build build --target fuzz-make-seeds &&
// build/test/fuzz/fuzz-make-seeds test/fuzz/corpus
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "proto/agent_protocol.hpp"
#include "proto/init_protocol.hpp"

namespace proto = sandlet::proto;
using proto::AgentMsg;
using proto::InitMsg;

namespace {

std::string root;

void seed(const std::string& target, const std::string& name, char selector, const std::string& bytes) {
  std::filesystem::create_directories(root + "/" + target);
  std::ofstream(root + "/" + target + "/" + name, std::ios::binary) << selector << bytes;
}

std::string exit_status(int code, int sig, uint32_t flags) {
  proto::ExitStatus st;
  st.exit_code = code;
  st.signal = sig;
  st.flags = flags;
  st.run_ns = 123456;
  return st.encode();
}

std::string error(uint32_t code, int err_no, const std::string& message) {
  proto::ErrorReply e;
  e.code = code;
  e.err_no = err_no;
  e.message = message;
  return e.encode();
}

void host_seeds() {
  const char exec_cap = static_cast<char>(0 + 5 * 50);  // mode 0 with a 50 KiB cap
  seed("host-frames", "exec-output-exit", exec_cap,
       proto::frame(AgentMsg::kStarted, proto::encode_u32(7)) + proto::frame(AgentMsg::kStdout, "hello\n") +
           proto::frame(AgentMsg::kStderr, "warning\n") + proto::frame(AgentMsg::kExit, exit_status(0, 0, 0)));
  seed("host-frames", "exec-killed-truncated", exec_cap,
       proto::frame(AgentMsg::kStarted, proto::encode_u32(9)) +
           proto::frame(AgentMsg::kStdout, std::string(4096, 'x')) +
           proto::frame(AgentMsg::kExit, exit_status(-1, 9, proto::kExitStdoutTruncated | proto::kExitTimedOut)));
  seed("host-frames", "exec-error", 0, proto::frame(AgentMsg::kError, error(5, 2, "exec \"nope\": No such file")));
  seed("host-frames", "read-file", static_cast<char>(1 + 5 * 10),
       proto::frame(AgentMsg::kFileChunk, "file bytes") + [] {
         proto::FileDone d;
         d.size = 10;
         d.mode = 0644;
         return proto::frame(AgentMsg::kFileDone, d.encode());
       }());
  seed("host-frames", "read-file-error", 1, proto::frame(AgentMsg::kError, error(11, 27, "read: too large")));
  seed("host-frames", "write-file-ok", 2, proto::frame(AgentMsg::kOk, ""));
  seed("host-frames", "ping-pong", 3, proto::frame(AgentMsg::kPong, ""));
  seed("host-frames", "init-run-exit", 4,
       proto::frame(InitMsg::kStaged, "") + proto::frame(InitMsg::kReady, "") +
           proto::frame(InitMsg::kRunExit, exit_status(3, 0, 0)));
  seed("host-frames", "init-setup-error", 4,
       proto::frame(InitMsg::kStaged, "") + proto::frame(InitMsg::kError, error(13, 1, "mount /proc: denied")));
}

void guest_seeds() {
  proto::ExecRequest exec;
  exec.argv = {"sh", "-c", "cat; echo done"};
  exec.env = {"PATH=/bin", "HOME=/root"};
  exec.cwd = "/tmp";
  exec.user = "1000:1000";
  exec.timeout_ms = 1000;
  exec.flags = proto::kExecHasStdin | proto::kExecKillOnOutputLimit;
  const std::string exec_stdin = proto::frame(AgentMsg::kExec, exec.encode()) +
                                 proto::frame(AgentMsg::kStdin, "input") + proto::frame(AgentMsg::kStdinEof, "") +
                                 proto::frame(AgentMsg::kSignal, proto::encode_u32(15));
  seed("guest-frames", "exec-stdin-signal", 0, exec_stdin);
  seed("guest-frames", "exec-stdin-signal-in-pieces", static_cast<char>(2 * 3), exec_stdin);
  proto::WriteFileRequest w;
  w.path = "/tmp/file";
  w.mode = 0600;
  w.user = "root";
  seed("guest-frames", "write-file", static_cast<char>(2 * 64),
       proto::frame(AgentMsg::kWriteFile, w.encode()) + proto::frame(AgentMsg::kFileData, std::string(300, 'd')) +
           proto::frame(AgentMsg::kFileEof, ""));
  proto::ReadFileRequest r;
  r.path = "/etc/passwd";
  r.max_bytes = 1 << 20;
  seed("guest-frames", "read-file", 0, proto::frame(AgentMsg::kReadFile, r.encode()));
  seed("guest-frames", "ping", 0, proto::frame(AgentMsg::kPing, ""));

  proto::InitConfig cfg;
  cfg.hostname = "box";
  cfg.user = "1000";
  cfg.env = {"PATH=/bin"};
  cfg.seccomp_bpf = std::string(64, '\0');
  cfg.max_lifetime_ms = 60000;
  cfg.flags = proto::kInitHasCgroup | proto::kInitRunOnce;
  cfg.run_once.argv = {"true"};
  cfg.run_once.stdio = 6;
  seed("guest-frames", "init-stage-config", 1,
       proto::frame(InitMsg::kStage, proto::encode_u32(proto::kInitHasCgroup)) +
           proto::frame(InitMsg::kConfig, cfg.encode()));
  cfg.flags |= proto::kInitHasMounts;
  cfg.mounts = {{"/data", proto::kMountReadOnly}, {"/work/out", 0}};
  seed("guest-frames", "init-stage-config-mounts", 1,
       proto::frame(InitMsg::kStage, proto::encode_u32(proto::kInitHasCgroup | proto::kInitHasUpper)) +
           proto::frame(InitMsg::kConfig, cfg.encode()));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]);
    return 2;
  }
  root = argv[1];
  host_seeds();
  guest_seeds();
  return 0;
}
