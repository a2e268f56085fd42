// The agent's serving loop: one thread, one epoll set over the listening socket, the connections, the
// execs' pipes, a signalfd (SIGCHLD reaping, SIGTERM) and one timerfd (exec timeouts, idle and lifetime
// limits). One connection carries one request; nothing a connection sends can crash the agent: a frame
// that is malformed or out of order (guest/frame_parse.hpp) is answered with an error and ends that
// connection (cancelling its exec); the other connections go on.
//
// The Server's methods are split by subsystem: server.cpp (loop, connections, framing, timers),
// exec.cpp (exec lifecycle), files.cpp (file transfer), tree_files.cpp (directory trees).
#pragma once
#include <sys/resource.h>
#include <sys/types.h>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "guest/buffer.hpp"
#include "guest/cgroups.hpp"
#include "guest/command.hpp"
#include "guest/frame_parse.hpp"
#include "guest/setup.hpp"
#include "guest/status.hpp"
#include "guest/tree_jobs.hpp"
#include "guest/users.hpp"
#include "proto/agent_protocol.hpp"
#include "proto/init_protocol.hpp"

namespace sandlet::guest {

struct Conn;
struct Exec;

// What an epoll event points at.
struct Watch {
  enum Kind : uint8_t { kListener, kSignals, kTimer, kConn, kExecStdout, kExecStderr, kExecStdin };
  Kind kind;
  void* owner;
};

struct WriteJob {
  int dirfd = -1;  // the parent directory, resolved once (no path re-walks between create and rename)
  int fd = -1;     // the temporary file in it
  std::string path, base, tmp;
  Identity id;   // whose file-system credentials its path operations use
  Status error;  // first failure; reported at kFileEof (the host sends everything, then reads the reply)
};

struct ReadJob {
  int fd = -1;
  uint64_t sent = 0, max = 0;
  uint32_t mode = 0;
  std::string path;  // for errors
};

struct Conn {
  using State = Phase;
  Watch watch{Watch::kConn, this};
  int fd = -1;
  State state = State::kNew;
  Buffer in, out;
  uint32_t events = 0;          // current epoll interest
  bool read_eof = false;        // the host shut down its sending side
  bool in_paused = false;       // not taking frames: the exec's stdin is backed up
  bool close_after_flush = false;
  bool dead = false;
  Exec* exec = nullptr;
  WriteJob wjob;
  ReadJob rjob;
  std::unique_ptr<TreePutJob> tput;
  std::unique_ptr<TreeGetJob> tget;
};

struct Exec {
  Watch pipe_watch[2] = {{Watch::kExecStdout, this}, {Watch::kExecStderr, this}};
  Watch stdin_watch{Watch::kExecStdin, this};
  Conn* conn = nullptr;  // nullptr once the host went away (the exec is being killed)
  pid_t pid = -1;
  bool exited = false;
  bool dead = false;
  bool pipes_paused = false;   // output backpressure: pipes are out of the epoll set
  bool timed_out = false;
  int wait_status = 0;
  int pipe_fd[2] = {-1, -1};   // read ends of stdout, stderr
  int stdin_fd = -1;           // write end, when the exec takes stdin (with a pty: the master, dup'ed)
  bool pty = false;            // pipe_fd[0] and stdin_fd are a pseudo-terminal's master; pipe_fd[1] unused
  bool stdin_registered = false;
  bool stdin_eof = false;      // kStdinEof seen: close once the buffer drained
  Buffer stdin_buf;
  uint64_t start_ns = 0, deadline_ns = 0;
  uint64_t limit = 0;
  uint64_t count[2] = {0, 0};
  uint32_t req_flags = 0, exit_flags = 0;
  CgroupSlot cg;
};

class Server final {
 public:
  Server(proto::InitConfig cfg, InitFds fds, const struct rlimit* child_nofile);
  Status init();
  // Does what the first exec would otherwise do (the default user's identity, one per-exec cgroup), while
  // the host is still handling "ready": the first command starts sooner.
  void warm_up();
  [[noreturn]] void run();

 private:
  // Output is read from the pipes / files only while the connection's queue is below this.
  static constexpr size_t kOutHigh = 4u << 20;
  static constexpr size_t kOutLow = 1u << 20;
  static constexpr size_t kStdinHigh = 1u << 20;
  static constexpr size_t kPipeChunk = 64u << 10;
  static constexpr size_t kFileChunk = 256u << 10;

  // server.cpp
  void dispatch(Watch* w, uint32_t events);
  void on_accept();
  void on_signals();
  void on_timer();
  void reap_children();
  void conn_read(Conn* c);
  void conn_process_frames(Conn* c);
  void conn_handle_frame(Conn* c, proto::AgentMsg type, std::string_view payload);
  // A frame the protocol does not allow here: an error reply, then the connection ends.
  void conn_reject(Conn* c, const std::string& why);
  void conn_flush(Conn* c);
  void conn_update_events(Conn* c);
  void conn_close(Conn* c);
  void conn_finish(Conn* c);  // the request's last frame is queued: flush, then close
  void reply(Conn* c, proto::AgentMsg type, std::string_view payload = {});
  void reply_error(Conn* c, const Status& s);
  void want_deadline(uint64_t ns);
  void collect_garbage();
  void track_idle();

  // exec.cpp
  void exec_start(Conn* c, std::string_view payload);
  void exec_frame(Conn* c, Action action, std::string_view payload);
  void exec_pipe_readable(Exec* e, int stream);
  void exec_resize(Exec* e, const proto::TermSize& size);
  void exec_pipe_close(Exec* e, int stream);
  void exec_pause_pipes(Exec* e, bool pause);
  void exec_stdin_flush(Exec* e);
  void exec_stdin_close(Exec* e);
  void exec_stdin_writable(Exec* e);
  void exec_resume_conn(Exec* e);
  void exec_exited(Exec* e, int status);
  void exec_detach_background(Exec* e);
  proto::ExitStatus exit_status(const Exec* e) const;
  void exec_kill_tree(Exec* e);
  void exec_signal(Exec* e, int sig);
  void exec_cancel(Exec* e);
  void exec_maybe_finish(Exec* e);
  void exec_check_timeouts(uint64_t now);

  // files.cpp
  void write_start(Conn* c, std::string_view payload);
  void write_frame(Conn* c, Action action, std::string_view payload);
  void write_abort(Conn* c);
  void read_start(Conn* c, std::string_view payload);
  void read_pump(Conn* c);
  void read_end(Conn* c);

  // tree_files.cpp
  void tree_put_start(Conn* c, std::string_view payload);
  void tree_put_frame(Conn* c, Action action, std::string_view payload);
  void tree_put_fail(Conn* c, const Status& s);
  void tree_get_start(Conn* c, std::string_view payload);
  void tree_get_pump(Conn* c);
  void tree_get_end(Conn* c, proto::AgentMsg type, std::string_view payload);

  proto::InitConfig cfg_;
  InitFds fds_;
  const struct rlimit* child_nofile_;
  int ep_ = -1, sigfd_ = -1, timerfd_ = -1;
  Watch listener_watch_{Watch::kListener, nullptr};
  Watch signals_watch_{Watch::kSignals, nullptr};
  Watch timer_watch_{Watch::kTimer, nullptr};
  bool listener_paused_ = false;  // out of fds: accept again once a connection closes

  UserDb users_;
  ExecCgroups cgroups_;
  std::vector<Exec*> execs_;
  std::vector<Conn*> dead_conns_;
  std::vector<Exec*> dead_execs_;
  size_t nconns_ = 0;
  uint64_t file_counter_ = 0;

  uint64_t armed_ns_ = 0;  // what the timerfd is set to (0 = disarmed)
  uint64_t lifetime_deadline_ns_ = 0;
  uint64_t idle_since_ns_ = 0;  // 0 = busy
  uint64_t kept_until_ns_ = 0;  // expired and kept (cfg_.keep_ms): every other process stopped until then
  // Reused for every exec, so spawning allocates nothing once warmed up.
  CommandVectors cmd_scratch_;
};

uint64_t now_ns();
// now + ms, saturating: absurdly large limits mean "never" rather than an overflowed, early deadline.
uint64_t deadline_after(uint64_t now, uint64_t ms);

}  // namespace sandlet::guest
