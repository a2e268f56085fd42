// The container init's set-up protocol, on its set-up socket (the init's fd 3, a socketpair with the host):
// the host stages the filesystem (kInitStage), then configures the sandbox (kInitConfig); the init answers
// kInitStaged and kInitReady, or kInitError naming the step that failed. A one-shot sandbox (kInitRunOnce)
// then reports its command's end on the same socket, once: kInitRunExit, or kInitError when the command
// could not be started. Nothing of the agent protocol (agent_protocol.hpp) is valid here, nor the other
// way round: the message types are disjoint. Frames as in frame.hpp, version kInitVersion.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "proto/frame.hpp"
#include "proto/replies.hpp"
#include "proto/wire.hpp"

namespace sandlet::proto {

constexpr uint8_t kInitVersion = 1;
// A configuration with a one-shot command at the kernel's largest ARG_MAX, the default environment and a
// seccomp program (at most BPF_MAXINSNS = 4096 instructions of 8 bytes).
// Plus at most kMaxMounts mount targets (InitConfig::mounts).
constexpr uint32_t kMaxMounts = 64;  // = the spec's limit; one SCM_RIGHTS message holds 253 descriptors
constexpr uint32_t kMaxMountTarget = 4095;
// Plus at most kMaxFileRules file rules (InitConfig::file_rules).
constexpr uint32_t kMaxFileRules = 64;  // = the spec's limit (spec/policy_spec.hpp)
constexpr uint32_t kMaxInitConfig =
    (16u << 20) + 4 + kMaxMounts * (4 + kMaxMountTarget + 4) + 4 + kMaxFileRules * (4 + kMaxMountTarget + 4);

enum class InitMsg : uint8_t {
  // host -> init, in this order
  kStage = 0x81,    // u32 InitFlags (only kInitHasCgroup, kInitHasUpper and kInitMaskKernelFiles count); fds via SCM_RIGHTS (see below): the init
                    // builds its filesystem view and answers kStaged
  kConfig = 0x82,   // InitConfig: identity and policy; the init answers kReady. With kInitRunOnce it carries
                    // the command's stdio fds (SCM_RIGHTS, see RunOnce) and, after ready, the init answers
                    // kRunExit or kError once the command has ended, then exits. With kInitHasMounts, the
                    // host directories to mount (InitMount), their fds after the stdio ones
  // init -> host
  kStaged = 0xc1,   // empty
  kReady = 0xc2,    // empty
  kError = 0xc3,    // ErrorReply: a start-up step failed, or the one-shot command could not start
  kRunExit = 0xc4,  // ExitStatus of the one-shot command
};

inline constexpr FrameType kHostToInitTypes[] = {
    {0x81, 4, 4, "stage"},
    {0x82, 48, kMaxInitConfig, "config"},
};
inline constexpr FrameType kInitToHostTypes[] = {
    {0xc1, 0, 0, "staged"},
    {0xc2, 0, 0, "ready"},
    {0xc3, 12, kErrorReplyMax, "error"},
    {0xc4, ExitStatus::kSize, ExitStatus::kSize, "run-exit"},
};
inline constexpr Direction kHostToInit{"init set-up protocol, host -> init", kInitVersion, kHostToInitTypes,
                                       sizeof kHostToInitTypes / sizeof kHostToInitTypes[0]};
inline constexpr Direction kInitToHost{"init set-up protocol, init -> host", kInitVersion, kInitToHostTypes,
                                       sizeof kInitToHostTypes / sizeof kInitToHostTypes[0]};

inline std::string frame(InitMsg type, std::string_view payload) {
  return encode_frame(static_cast<uint8_t>(type), kInitVersion, payload);
}

// Start-up is two exchanges on the setup socket (the init's fd 3), so that the first can happen ahead of
// time in a warm pool: kStage carries these SCM_RIGHTS fds, in this order:
//   [0] the root filesystem: a detached mount (fsmount/open_tree fd) to attach and pivot into
//   [1] the sandbox's /dev: a detached tmpfs with the device nodes (backends/container/sandbox_dev.hpp) to attach on /dev
//   [2] the agent's listening Unix socket (already bound and listening, on a host path)
//   [3] optional (kInitHasCgroup): an O_DIRECTORY fd of the sandbox's cgroup2 directory, delegated to the
//       sandbox root, under which the agent creates one child cgroup per exec (to kill whole trees)
//   [3 or 4] optional (kInitHasUpper): the detached tmpfs mount holding the root's writable layer (upper/,
//       work/). The init keeps it at kInitUpperFd for the host to take with pidfd_getfd when it snapshots:
//       the mount is attached nowhere, and a descriptor per sandbox in the host process would be copied into
//       every sandbox started after it.
enum InitFlags : uint32_t {
  kInitHasCgroup = 1,
  kInitLoopbackUp = 2,
  kInitDetached = 4,  // the sandbox outlives its creator: drop the parent-death signal
  kInitRunOnce = 8,   // one-shot: run InitConfig::run_once right after ready instead of serving requests
  kInitHasUpper = 16,
  kInitHasMounts = 32,  // kConfig only: InitConfig::mounts, each with an SCM_RIGHTS fd
  kInitHasFileRules = 64,       // kConfig only: InitConfig::file_rules (guest/file_rules.hpp)
  kInitMaskKernelFiles = 128,   // empty read-only stand-ins over /proc's kernel files: put while staging (kStage); the kConfig flag must agree
  kInitHasToolkit = 256,        // kConfig only: one more SCM_RIGHTS fd, after the mounts: the toolkit's read-only mount
  kInitHasDenialLog = 512,      // kConfig only: one more SCM_RIGHTS fd, last: the seccomp denial log (denial_log.hpp)
  kInitResolverConf = 1024,     // kConfig only: /etc/resolv.conf names the sandbox's resolver (kResolverConf)
  kInitGuestLimits = 2048,      // kConfig only: InitConfig::pids_max and memory_max bind the agent's commands
                                // (a microVM's guest cgroup; a container's limits are on its host cgroup)
  kInitGuestNic = 4096,         // kConfig only: a microVM launched with a NIC, which the guest must bring up
  kInitToolkitDisk = 8192,      // kConfig only: a microVM's toolkit is its disk of serial sl-toolkit (no fd)
};
constexpr int kInitUpperFd = 1000;    // where the init keeps the writable layer's mount (close-on-exec)
constexpr int kInitToolkitFd = 1001;  // where the init keeps the toolkit's mount root (close-on-exec)
constexpr const char* kToolkitPath = "/.sandlet/toolkit";
// What kInitResolverConf writes: the resolver address the node gateway answers (policy/net_sk_lookup.hpp).
constexpr const char* kResolverConf =
    "# Written by sandlet: the sandbox's resolver answers the names its network policy allows.\n"
    "nameserver 169.254.53.53\n";

// A spec file rule (policy.files) as the init applies it.
enum class FileRuleAccess : uint32_t { kReadOnly = 0, kHidden = 1, kWritable = 2 };
struct InitFileRule {
  std::string path;  // absolute, normalized, no NUL, <= kMaxMountTarget bytes
  FileRuleAccess access = FileRuleAccess::kReadOnly;
};

// The command of a one-shot sandbox. Its stdin/stdout/stderr arrive with the kConfig frame as
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

// A host directory for the sandbox, sent with kConfig (spec-dependent: a sandbox staged ahead in a warm
// pool gets its mounts when it is handed out, cloned from the host at that moment). Its fd is a detached
// mount (open_tree clone) the host has already made read-only/nosuid/nodev as asked; the init attaches it
// at `target` in its new root (after pivot_root), making missing directories, refusing symlinks, and
// checks that a kMountReadOnly one is read-only.
enum MountFlags : uint32_t { kMountReadOnly = 1 };
struct InitMount {
  std::string target;  // absolute, no NUL, <= kMaxMountTarget bytes
  uint32_t flags = 0;
};

struct InitConfig {
  std::string hostname;
  std::string workdir = "/";
  std::string user;               // default exec user, "uid[:gid]" or a passwd name; empty = root
  std::vector<std::string> env;   // default environment for execs that send none (not used when an exec sends env)
  std::string seccomp_bpf;        // struct sock_filter[] installed on the agent before serving (inherited by execs)
  uint64_t max_lifetime_ms = 0;   // the agent exits (tearing the sandbox down) after this; 0 = never
  uint64_t idle_timeout_ms = 0;   // ... or after this long without a request; 0 = never
  // When either passes, non-zero: stop every other process instead and exit this much later.
  uint64_t keep_ms = 0;
  uint32_t flags = 0;
  RunOnce run_once;               // only with kInitRunOnce
  std::vector<InitMount> mounts;  // only with kInitHasMounts: 1..kMaxMounts
  std::vector<InitFileRule> file_rules;  // only with kInitHasFileRules: 1..kMaxFileRules
  uint64_t pids_max = 0;          // only with kInitGuestLimits: 0 = none
  uint64_t memory_max = 0;        // only with kInitGuestLimits: bytes, 0 = none

  std::string encode() const {
    wire::Writer w;
    w.str(hostname); w.str(workdir); w.str(user); w.strs(env); w.str(seccomp_bpf);
    w.u64(max_lifetime_ms); w.u64(idle_timeout_ms); w.u64(keep_ms); w.u32(flags);
    if (flags & kInitRunOnce) {
      w.strs(run_once.argv); w.strs(run_once.env); w.str(run_once.cwd); w.str(run_once.user);
      w.u64(run_once.timeout_ms); w.u32(run_once.stdio);
    }
    if (flags & kInitHasMounts) {
      w.u32(static_cast<uint32_t>(mounts.size()));
      for (const InitMount& m : mounts) { w.str(m.target); w.u32(m.flags); }
    }
    if (flags & kInitHasFileRules) {
      w.u32(static_cast<uint32_t>(file_rules.size()));
      for (const InitFileRule& f : file_rules) { w.str(f.path); w.u32(static_cast<uint32_t>(f.access)); }
    }
    if (flags & kInitGuestLimits) { w.u64(pids_max); w.u64(memory_max); }
    return std::move(w.data());
  }
  static bool decode(std::string_view p, InitConfig* out) {
    wire::Reader r(p);
    out->hostname = r.str(); out->workdir = r.str(); out->user = r.str(); out->env = r.strs();
    out->seccomp_bpf = r.str(); out->max_lifetime_ms = r.u64(); out->idle_timeout_ms = r.u64();
    out->keep_ms = r.u64(); out->flags = r.u32();
    if (out->flags & kInitRunOnce) {
      RunOnce& c = out->run_once;
      c.argv = r.strs(); c.env = r.strs(); c.cwd = r.str(); c.user = r.str();
      c.timeout_ms = r.u64(); c.stdio = r.u32();
      if (c.argv.empty() || (c.stdio & ~7u) != 0) return false;
    }
    if (out->flags & kInitHasMounts) {
      const uint32_t n = r.u32();
      if (!r.ok() || n == 0 || n > kMaxMounts) return false;
      out->mounts.resize(n);
      for (InitMount& m : out->mounts) {
        m.target = r.str(); m.flags = r.u32();
        if (m.target.empty() || m.target[0] != '/' || m.target.size() > kMaxMountTarget ||
            m.target.find('\0') != std::string::npos || (m.flags & ~static_cast<uint32_t>(kMountReadOnly)) != 0)
          return false;
      }
    }
    if (out->flags & kInitHasFileRules) {
      const uint32_t n = r.u32();
      if (!r.ok() || n == 0 || n > kMaxFileRules) return false;
      out->file_rules.resize(n);
      for (InitFileRule& f : out->file_rules) {
        f.path = r.str();
        const uint32_t a = r.u32();
        if (f.path.empty() || f.path[0] != '/' || f.path.size() > kMaxMountTarget ||
            f.path.find('\0') != std::string::npos || a > 2)
          return false;
        f.access = static_cast<FileRuleAccess>(a);
      }
    }
    if (out->flags & kInitGuestLimits) {
      out->pids_max = r.u64();
      out->memory_max = r.u64();
    }
    return r.ok() && r.at_end();
  }
};

}  // namespace sandlet::proto
