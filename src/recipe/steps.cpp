// What runs inside a build step's sandbox (steps.hpp).
#include "recipe/steps.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>

#include "common/error.hpp"
#include "image/sha256.hpp"
#include "sys/fd.hpp"

namespace sandlet::build {
namespace {

constexpr size_t kTailBytes = 2048;   // of stderr, quoted in a failed RUN's error
constexpr size_t kArgBatch = 256;     // paths per helper command

// An exec whose output is handed to the building thread, which calls the progress callback: the library's
// event-loop thread never runs user code. Cancellation is polled every 100 ms.
struct Streamed {
  std::mutex m;
  std::condition_variable cv;
  std::deque<std::pair<int, std::string>> chunks;
  bool done = false;
  std::exception_ptr error;
  ExecOutcome outcome;
};

ExecOutcome exec_streaming(Sandbox& sb, ExecParams params, const StepRun& run, const Step& st, std::string* tail) {
  auto s = std::make_shared<Streamed>();
  params.output_limit = UINT64_MAX;  // streamed: nothing is buffered
  params.on_output = [s](int stream, std::string_view data) {
    std::lock_guard lock(s->m);
    s->chunks.emplace_back(stream, std::string(data));
    s->cv.notify_one();
  };
  ExecControl control = sb.exec_async(std::move(params), [s](std::exception_ptr e, ExecOutcome o) {
    std::lock_guard lock(s->m);
    s->error = e;
    s->outcome = std::move(o);
    s->done = true;
    s->cv.notify_one();
  });
  bool cancel_sent = false;
  while (true) {
    std::deque<std::pair<int, std::string>> chunks;
    bool done;
    {
      std::unique_lock lock(s->m);
      s->cv.wait_for(lock, std::chrono::milliseconds(100), [&] { return s->done || !s->chunks.empty(); });
      chunks.swap(s->chunks);
      done = s->done;
    }
    for (const auto& [stream, data] : chunks) {
      if (tail && stream == 2) {
        tail->append(data);
        if (tail->size() > kTailBytes) tail->erase(0, tail->size() - kTailBytes);
      }
      if (run.options.progress) {
        BuildEvent ev;
        ev.step = run.index;
        ev.steps = run.count;
        ev.line = st.line;
        ev.text = st.text;
        ev.stream = stream;
        ev.data = data;
        run.options.progress(ev);
      }
    }
    if (done) break;
    if (!cancel_sent && run.cancelled()) {
      control.cancel();
      cancel_sent = true;
    }
  }
  if (s->error) std::rethrow_exception(s->error);
  return std::move(s->outcome);
}

// Runs a helper command (mkdir, chmod, ln, chown) as root; a failure names the step and the command.
void helper(Sandbox& sb, std::vector<std::string> argv, const StepRun& run, const Step& st) {
  const std::string name = argv.at(0);
  ExecParams p;
  p.argv = std::move(argv);
  p.cwd = "/";
  p.user = "0:0";
  ExecOutcome o;
  try {
    o = sb.exec(std::move(p));
  } catch (const Error& e) {
    throw Error(e.code(), run.where(st) + ": " + e.what() +
                              " (COPY and WORKDIR need sh, mkdir, chmod, chown and ln in the image)", e.err_no());
  }
  if (o.exit_code != 0)
    throw Error(Code::kAborted, run.where(st) + ": " + name + " failed: " + o.stderr_data.substr(0, kTailBytes));
}

// `cmd` with `args` appended, kArgBatch at a time.
void batched(Sandbox& sb, const std::vector<std::string>& cmd, const std::vector<std::string>& args, const StepRun& run,
             const Step& st) {
  for (size_t i = 0; i < args.size(); i += kArgBatch) {
    std::vector<std::string> argv = cmd;
    argv.insert(argv.end(), args.begin() + static_cast<long>(i), args.begin() + static_cast<long>(std::min(args.size(), i + kArgBatch)));
    helper(sb, std::move(argv), run, st);
  }
}

std::string read_checked(const ContextEntry& e, const StepRun& run, const Step& st) {
  sys::UniqueFd fd(::open(e.host.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd) throw Error(Code::kInvalidArgument, run.where(st) + ": cannot open " + e.host, errno);
  std::string data;
  data.resize(e.size + 1);
  size_t got = 0;
  while (got < data.size()) {
    ssize_t n = ::read(fd.get(), data.data() + got, data.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw Error(Code::kInvalidArgument, run.where(st) + ": cannot read " + e.host, errno);
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  data.resize(got);
  if (image::to_hex(image::sha256(data)) != e.sha256)
    throw Error(Code::kAborted, run.where(st) + ": " + e.host + " changed while the build ran");
  return data;
}

std::string octal(uint32_t mode) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%o", mode);
  return buf;
}

}  // namespace

std::string StepRun::where(const Step& st) const {
  std::string text = st.text.size() > 80 ? st.text.substr(0, 77) + "..." : st.text;
  return "step " + std::to_string(index) + "/" + std::to_string(count) + " (" + recipe + ":" + std::to_string(st.line) +
         " " + text + ")";
}

void run_step(Sandbox& sb, const Step& st, const StepRun& run) {
  ExecParams p;
  p.argv = st.argv;
  p.env = st.arg_env;
  std::string tail;
  ExecOutcome o;
  try {
    o = exec_streaming(sb, std::move(p), run, st, &tail);
  } catch (const Error& e) {
    if (e.code() == Code::kCancelled) throw Error(Code::kCancelled, run.where(st) + ": build cancelled");
    throw Error(e.code(), run.where(st) + ": " + e.what(), e.err_no());
  }
  if (o.exit_code == 0 && o.signal == 0) return;
  if (run.cancelled()) throw Error(Code::kCancelled, run.where(st) + ": build cancelled");
  std::string status = o.signal ? "killed by signal " + std::to_string(o.signal) : "exit status " + std::to_string(o.exit_code);
  std::string msg = run.where(st) + ": " + status;
  while (!tail.empty() && tail.back() == '\n') tail.pop_back();
  if (!tail.empty()) msg += "\n" + tail;
  if (!run.network.empty()) msg += "\n(" + run.network + ")";
  throw Error(Code::kAborted, msg);
}

void workdir_step(Sandbox& sb, const Step& st, const StepRun& run) {
  helper(sb, {"mkdir", "-p", st.state.workdir}, run, st);
}

void copy_step(Sandbox& sb, const Step& st, const CopyInputs& in, const StepRun& run) {
  std::vector<ContextEntry> entries = in.entries;
  if (in.dest_may_be_dir && !entries.empty()) {
    ExecParams p;
    p.argv = {"/bin/sh", "-c", "test -d \"$1\"", "sh", entries[0].dest};
    p.cwd = "/";
    p.user = "0:0";
    bool is_dir = false;
    try {
      is_dir = sb.exec(std::move(p)).exit_code == 0;
    } catch (const Error&) {
      // No shell: the destination is taken as a file path.
    }
    if (is_dir) entries[0].dest += "/" + in.file_name;
  }
  std::vector<std::string> dirs = in.dest_dirs;
  for (const auto& e : entries)
    if (e.type == ContextEntry::kDir) dirs.push_back(e.dest);
  if (!dirs.empty()) batched(sb, {"mkdir", "-p", "--"}, dirs, run, st);

  std::vector<std::string> links;  // target, path pairs for one sh loop
  std::map<uint32_t, std::vector<std::string>> by_mode;
  std::vector<std::string> copied;
  for (const auto& e : entries) {
    if (run.cancelled()) throw Error(Code::kCancelled, run.where(st) + ": build cancelled");
    copied.push_back(e.dest);
    if (e.type == ContextEntry::kFile) {
      try {
        sb.write_file(e.dest, read_checked(e, run, st), 0600);
      } catch (const Error& err) {
        throw Error(err.code(), run.where(st) + ": writing " + e.dest + ": " + err.what(), err.err_no());
      }
    } else if (e.type == ContextEntry::kSymlink) {
      links.push_back(e.target);
      links.push_back(e.dest);
      continue;
    }
    uint32_t mode = st.chmod.empty() ? e.mode : static_cast<uint32_t>(std::stoul(st.chmod, nullptr, 8));
    by_mode[mode].push_back(e.dest);
  }
  for (size_t i = 0; i < links.size(); i += 2 * kArgBatch) {
    std::vector<std::string> argv = {"/bin/sh", "-c", "while [ $# -gt 1 ]; do ln -sfn -- \"$1\" \"$2\" || exit 1; shift 2; done", "sh"};
    argv.insert(argv.end(), links.begin() + static_cast<long>(i), links.begin() + static_cast<long>(std::min(links.size(), i + 2 * kArgBatch)));
    helper(sb, std::move(argv), run, st);
  }
  for (const auto& [mode, paths] : by_mode) batched(sb, {"chmod", octal(mode), "--"}, paths, run, st);
  if (!st.chown.empty()) {
    std::vector<std::string> owned = copied;
    for (const auto& d : in.dir_roots) owned.push_back(d);
    batched(sb, {"chown", "-h", st.chown, "--"}, owned, run, st);
  }
}

}  // namespace sandlet::build
