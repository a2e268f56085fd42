// The CLI's core commands (--version, --help, run, create, exec, ps, rm, gc, cp) driven as a user would
// through the built `sandlet` binary against the harness's fresh root, checked against what their --help
// texts promise. Real sandboxes; each test ends by checking that nothing of its sandboxes is left.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>

#include <cstring>
#include <set>

#include <boost/json.hpp>

#include "integration/harness.hpp"

extern char** environ;

namespace {

struct CliResult {
  int status = -1;  // the exit status, or 128+N when the CLI died by signal N (as a shell reports it)
  int signal = 0;   // N when it died by a signal
  std::string out, err;
  double seconds = 0;
};

// What a CLI process gets besides its arguments.
struct Input {
  std::string data;              // written to the CLI's stdin
  bool close = true;             // false: the stdin pipe stays open (no EOF) until the CLI has exited
  std::vector<std::string> env;  // "K=V" added to the CLI's environment
};

// One `sandlet --root <harness root> ARGS...` process with its three standard streams on pipes. It runs
// without a shell: stdout and stderr are collected apart, stdin is ours to feed (or to keep open), and a
// signal can be sent to the CLI itself.
class CliProcess {
 public:
  CliProcess(Harness& h, const std::vector<std::string>& args, Input input = {}) : input_(std::move(input)) {
    std::vector<std::string> argv_s = {SANDLET_CLI, "--root", h.root()};
    argv_s.insert(argv_s.end(), args.begin(), args.end());
    std::vector<std::string> env_s;
    for (char** e = environ; *e != nullptr; ++e) env_s.emplace_back(*e);
    env_s.insert(env_s.end(), input_.env.begin(), input_.env.end());
    // (Everything the child needs is built before fork: this process has other threads.)
    std::vector<char*> argv, envp;
    for (auto& a : argv_s) argv.push_back(a.data());
    argv.push_back(nullptr);
    for (auto& e : env_s) envp.push_back(e.data());
    envp.push_back(nullptr);
    int in[2], out[2], err[2];
    REQUIRE(::pipe2(in, O_CLOEXEC) == 0);
    REQUIRE(::pipe2(out, O_CLOEXEC) == 0);
    REQUIRE(::pipe2(err, O_CLOEXEC) == 0);
    start_ = std::chrono::steady_clock::now();
    pid_ = ::fork();
    REQUIRE(pid_ >= 0);
    if (pid_ == 0) {
      ::dup2(in[0], 0);
      ::dup2(out[1], 1);
      ::dup2(err[1], 2);
      sigset_t none;
      sigemptyset(&none);
      ::sigprocmask(SIG_SETMASK, &none, nullptr);
      ::execve(argv[0], argv.data(), envp.data());
      ::_exit(126);
    }
    // Our copy of the stdin read end stays open until the end: a write never raises SIGPIPE here, even
    // when the CLI does not read its stdin.
    stdin_read_ = in[0];
    stdin_ = in[1];
    ::fcntl(stdin_, F_SETFL, O_NONBLOCK);
    ::close(out[1]);
    ::close(err[1]);
    out_ = out[0];
    err_ = err[0];
  }
  ~CliProcess() {
    if (pid_ > 0 && !reaped_) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    for (int fd : {stdin_, stdin_read_, out_, err_})
      if (fd >= 0) ::close(fd);
  }
  CliProcess(const CliProcess&) = delete;
  CliProcess& operator=(const CliProcess&) = delete;

  pid_t pid() const { return pid_; }

  // Feeds stdin and reads stdout and stderr until both end, then reaps the CLI. After `stdout_keep` bytes of
  // stdout our read end is closed (like `| head -c N`). A CLI still running after `limit` seconds is killed
  // and the check fails.
  CliResult wait(double limit = 20, size_t stdout_keep = SIZE_MAX) {
    CliResult r;
    size_t written = 0;
    const auto deadline = start_ + std::chrono::duration<double>(limit);
    bool overdue = false;
    while (out_ >= 0 || err_ >= 0) {
      if (stdin_ >= 0 && written == input_.data.size() && input_.close) close_fd(stdin_);
      pollfd p[3];
      int n = 0;
      for (int fd : {out_, err_}) p[n++] = {fd, POLLIN, 0};
      const bool feeding = stdin_ >= 0 && written < input_.data.size();
      p[n++] = {feeding ? stdin_ : -1, POLLOUT, 0};
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) {
        overdue = true;
        ::kill(pid_, SIGKILL);
        break;
      }
      if (::poll(p, n, static_cast<int>(left.count())) < 0 && errno != EINTR) break;
      if (feeding && (p[2].revents & (POLLOUT | POLLERR))) {
        const ssize_t w = ::write(stdin_, input_.data.data() + written, input_.data.size() - written);
        if (w > 0) written += static_cast<size_t>(w);
      }
      for (int i = 0; i < 2; ++i) {
        if (p[i].fd < 0 || !(p[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
        int& fd = i == 0 ? out_ : err_;
        std::string& sink = i == 0 ? r.out : r.err;
        char buf[65536];
        const ssize_t got = ::read(fd, buf, sizeof buf);
        if (got > 0) sink.append(buf, static_cast<size_t>(got));
        if (got == 0 || (got < 0 && errno != EINTR && errno != EAGAIN)) close_fd(fd);
        if (i == 0 && fd >= 0 && r.out.size() >= stdout_keep) {
          r.out.resize(stdout_keep);
          close_fd(fd);
        }
      }
    }
    int st = 0;
    ::waitpid(pid_, &st, 0);
    reaped_ = true;
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    if (WIFEXITED(st)) r.status = WEXITSTATUS(st);
    if (WIFSIGNALED(st)) {
      r.signal = WTERMSIG(st);
      r.status = 128 + r.signal;
    }
    close_fd(stdin_);
    INFO("stdout: " << r.out.substr(0, 2000) << "\nstderr: " << r.err);
    CHECK_FALSE(overdue);  // the CLI did not end within `limit` seconds
    return r;
  }

 private:
  static void close_fd(int& fd) {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
  Input input_;
  pid_t pid_ = -1;
  bool reaped_ = false;
  int stdin_ = -1, stdin_read_ = -1, out_ = -1, err_ = -1;
  std::chrono::steady_clock::time_point start_;
};

CliResult cli(Harness& h, const std::vector<std::string>& args, Input input = {}) {
  CliProcess p(h, args, std::move(input));
  return p.wait();
}

// `run` with the test root filesystem as its layer.
CliResult run(Harness& h, std::vector<std::string> args, Input input = {}) {
  args.insert(args.begin(), {"run", "--layer", SANDLET_TEST_ROOTFS});
  return cli(h, args, std::move(input));
}

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// A sleep duration no other process on the host uses (30 s plus a fraction made of our pid), so that its
// process can be found from the host by its command line.
std::string unique_seconds(int n) { return std::to_string(30 + n) + "." + std::to_string(::getpid()); }

// Host pids of the processes whose command line is exactly `argv` (sandboxed processes are visible from the
// host's /proc; a zombie's command line is empty, so it does not count).
std::vector<pid_t> host_pids(const std::vector<std::string>& argv) {
  std::string want;
  for (const auto& a : argv) want += a + '\0';
  std::vector<pid_t> out;
  std::error_code ec;
  for (auto& e : fs::directory_iterator("/proc", ec)) {
    const std::string name = e.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    if (slurp(e.path().string() + "/cmdline") == want) out.push_back(std::stoi(name));
  }
  return out;
}

// Nothing of the test's sandboxes is left on the host: those whose id the test knows have no directory,
// cgroup (v1 or v2) or uid slot; no sandbox directory at all remains under the root (the runtime removes
// a sandbox's directory only after its cgroups, so this covers `run`'s sandboxes too); no mount of the
// root is in the mount table. No waiting: the CLI's runtime, closed before the CLI exits, waits for the
// reclaims its destroys started. (And no CLI runs before these checks: its sweep would hide a leak.)
void expect_nothing_left(Harness& h, const std::vector<std::string>& ids = {}) {
  for (const auto& id : ids) CHECK(h.gone(id));
  CHECK(h.sandbox_dirs().empty());
  CHECK_FALSE(contains(slurp("/proc/self/mountinfo"), h.root()));
  h.check_no_leaks();
}

// A sandbox id as `create` prints it: 12 lowercase hex digits and a newline.
std::string expect_id(const CliResult& r) {
  INFO("stderr: " << r.err);
  REQUIRE(r.status == 0);
  REQUIRE(r.out.size() == 13);
  REQUIRE(r.out.back() == '\n');
  const std::string id = r.out.substr(0, 12);
  REQUIRE(id.find_first_not_of("0123456789abcdef") == std::string::npos);
  return id;
}

// `ps --json` is read with Boost.JSON: code independent of the CLI's own JSON writer (src/cli/json.cpp).
boost::json::value parse_json(const std::string& text) {
  INFO("JSON text: " << text);
  boost::system::error_code ec;
  boost::json::value v = boost::json::parse(text, ec);
  if (ec) FAIL("not JSON: " << ec.message());
  return v;
}

// The string at `key` of a JSON object, "" when absent or not a string.
std::string str(const boost::json::value& obj, const char* key) {
  const auto* o = obj.if_object();
  const auto* v = o != nullptr ? o->if_contains(key) : nullptr;
  return v != nullptr && v->is_string() ? std::string(v->get_string()) : std::string();
}

std::set<std::string> lines(const std::string& text) {
  std::set<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) out.insert(l);
  return out;
}

}  // namespace

TEST_CASE("cli: --version, and --help of every command, exit 0 with the usage on stdout", "[cli][commands]") {
  Harness h;
  for (const auto& args : std::vector<std::vector<std::string>>{{"--version"}, {"version"}}) {
    const CliResult r = cli(h, args);
    CHECK(r.status == 0);
    CHECK(r.out.rfind("sandlet version ", 0) == 0);
    CHECK(contains(r.out, "(ABI "));
    CHECK(r.err.empty());
  }
  // The top level: --help, -h and `help` alike.
  for (const auto& args : std::vector<std::vector<std::string>>{{"--help"}, {"-h"}, {"help"}}) {
    const CliResult r = cli(h, args);
    INFO(args[0]);
    CHECK(r.status == 0);
    CHECK(r.out.rfind("Usage: sandlet ", 0) == 0);
    for (const char* command : {"run", "create", "exec", "ps", "rm", "gc", "cp", "layer", "env"})
      CHECK(contains(r.out, std::string("\n  ") + command + " "));  // every command is listed
    CHECK(r.err.empty());
  }
  for (const std::string command : {"run", "create", "exec", "ps", "rm", "gc", "cp", "layer", "env"}) {
    INFO("command: " << command);
    const CliResult r = cli(h, {command, "--help"});
    CHECK(r.status == 0);
    const std::string first_line = r.out.substr(0, r.out.find('\n'));
    CHECK((first_line == "Usage: sandlet " + command || first_line.rfind("Usage: sandlet " + command + " ", 0) == 0));
    CHECK(r.err.empty());
    // `help COMMAND` and `COMMAND -h` print the same text.
    CHECK(cli(h, {"help", command}).out == r.out);
    CHECK(cli(h, {command, "-h"}).out == r.out);
  }
  // What run and exec document about exit statuses, which the tests below hold them to.
  for (const std::string command : {"run", "exec"}) {
    const std::string usage = cli(h, {command, "--help"}).out;
    CHECK(contains(usage, "128+N if it was killed by signal N; 124 if --timeout expired"));
    CHECK(contains(usage, "126 if it cannot be executed, 127 if it was not found"));
  }
  expect_nothing_left(h);
}

TEST_CASE("cli: unknown commands and options, missing operands exit 2 with a hint on stderr", "[cli][commands]") {
  Harness h;
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  for (const Case& c : std::vector<Case>{
           {{"frob"}, "unknown command 'frob'"},
           {{"--frob"}, "unknown option '--frob'"},
           {{"help", "frob"}, "unknown command 'frob'"},
           {{"run", "--frob", "--", "true"}, "run: unknown option '--frob'"},
           {{"run", "--layer", SANDLET_TEST_ROOTFS}, "run: requires a command"},
           {{"run", "--layer", SANDLET_TEST_ROOTFS, "--"}, "run: requires a command"},
           {{"run", "--layer", SANDLET_TEST_ROOTFS, "--timeout", "soon", "--", "true"}, "invalid --timeout 'soon'"},
           {{"run", "--layer", SANDLET_TEST_ROOTFS, "--timeout", "-1", "--", "true"}, "invalid --timeout '-1'"},
           {{"run", "--layer", SANDLET_TEST_ROOTFS, "--label", "nokey", "--", "true"}, "invalid --label 'nokey'"},
           {{"run", "--layer"}, "option '--layer' requires a value"},
           {{"create", "--layer", SANDLET_TEST_ROOTFS, "extra"}, "create: unexpected argument 'extra'"},
           {{"exec"}, "exec: requires a sandbox ID and a command"},
           {{"exec", "0123456789ab"}, "exec: requires a command after the sandbox ID"},
           {{"exec", "--frob", "0123456789ab", "--", "true"}, "exec: unknown option '--frob'"},
           {{"ps", "--frob"}, "ps: unknown option '--frob'"},
           {{"ps", "--label", "nokey"}, "ps: invalid --label 'nokey'"},
           {{"rm"}, "rm: requires at least one sandbox ID"},
           {{"gc", "extra"}, "gc: unexpected argument 'extra'"},
           {{"cp", "a"}, "cp: requires exactly two arguments"},
           {{"cp", "/etc/hostname", "/tmp/x"}, "exactly one of SRC and DST must be ID:PATH"},
       }) {
    const CliResult r = cli(h, c.args);
    INFO("args: " << c.args[0] << " ... (" << c.args.size() << " in all)\nstderr: " << r.err);
    CHECK(r.status == 2);
    CHECK(contains(r.err, "sandlet: "));
    CHECK(contains(r.err, c.message));
    CHECK(contains(r.err, "--help'."));  // "See 'sandlet [COMMAND] --help'."
    CHECK(r.out.empty());
  }
  // No command at all: the usage, on stderr.
  const CliResult none = cli(h, {});
  CHECK(none.status == 2);
  CHECK(none.out.empty());
  CHECK(none.err.rfind("Usage: sandlet ", 0) == 0);
  expect_nothing_left(h);  // none of these made a sandbox
}

TEST_CASE("cli: run passes the command's exit status through and keeps stdout and stderr apart", "[cli][commands]") {
  Harness h;
  CliResult r = run(h, {"--", "sh", "-c", "exit 7"});
  CHECK(r.status == 7);
  CHECK(r.out.empty());
  CHECK(r.err.empty());  // a failing command is not an error of the CLI's

  r = run(h, {"--", "sh", "-c", "echo to-out; echo to-err >&2; echo more-out"});
  CHECK(r.status == 0);
  CHECK(r.out == "to-out\nmore-out\n");
  CHECK(r.err == "to-err\n");

  r = run(h, {"/bin/echo", "no", "dashes"});  // "[--] CMD": the first operand ends the options
  CHECK(r.status == 0);
  CHECK(r.out == "no dashes\n");
  expect_nothing_left(h);
}

TEST_CASE("cli: run reports a signal as 128+N, not found as 127, not executable as 126", "[cli][commands]") {
  Harness h;
  CliResult r = run(h, {"--", "sh", "-c", "kill -9 $$"});
  CHECK(r.status == 128 + SIGKILL);
  CHECK(r.signal == 0);  // the CLI itself exited normally
  r = run(h, {"--", "sh", "-c", "kill -TERM $$"});
  CHECK(r.status == 128 + SIGTERM);

  r = run(h, {"--", "no-such-command"});
  CHECK(r.status == 127);
  CHECK(contains(r.err, "no-such-command"));
  r = run(h, {"--", "/etc/passwd"});  // a regular file without execute permission
  CHECK(r.status == 126);
  CHECK(contains(r.err, "/etc/passwd"));
  expect_nothing_left(h);
}

TEST_CASE("cli: run --timeout kills the command and what it started, exit 124", "[cli][commands]") {
  Harness h;
  const std::string secs = unique_seconds(0);
  // A background sleep as well: the timeout must reach every process, not only the main one.
  const CliResult r = run(h, {"--timeout", "0.5", "--", "sh", "-c", "sleep " + secs + " & exec sleep " + secs});
  CHECK(r.status == 124);
  CHECK(r.seconds >= 0.5);
  CHECK(r.seconds < 5);  // far from the sleep's 30 s
  CHECK(contains(r.err, "timed out"));
  // run destroys its sandbox before it returns: no sleep is left anywhere on the host.
  CHECK(wait_until([&] { return host_pids({"sleep", secs}).empty(); }, 5));
  expect_nothing_left(h);
}

TEST_CASE("cli: run without a command or with an invalid spec value exits 2 naming the field", "[cli][commands]") {
  Harness h;
  for (auto [flags, field] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"--memory", "banana"}, "limits.memory"},
           {{"--memory", "1M"}, "limits.memory"},  // below the minimum
           {{"--cpus", "-1"}, "limits.cpus"},
           {{"--pids", "many"}, "limits.pids"},
           {{"--disk", "huge"}, "limits.disk"},
           {{"--hostname", "-bad-"}, "hostname"},
           {{"--workdir", "relative"}, "workdir"},
           {{"--network", "host"}, "network"},
           {{"--max-lifetime", "-1"}, "max_lifetime_s"},
       }) {
    std::vector<std::string> args = flags;
    args.insert(args.end(), {"--", "true"});
    const CliResult r = run(h, args);
    INFO(flags[0] << " " << flags[1] << "\nstderr: " << r.err);
    CHECK(r.status == 2);
    CHECK(contains(r.err, "'" + field + "'"));
  }
  const CliResult missing = cli(h, {"run", "--layer", "/no/such/layer", "--", "true"});
  CHECK(missing.status == 2);
  CHECK(contains(missing.err, "layers[0]"));
  // A store layer reference that does not exist is a spec error too (it used to exit 1).
  const CliResult unknown_ref = cli(h, {"run", "--layer", "no-such-layer", "--", "true"});
  CHECK(contains(unknown_ref.err, "layers[0]"));
  CHECK(unknown_ref.status == 2);
  expect_nothing_left(h);
}

TEST_CASE("cli: run -i sends stdin to the command; without -i its stdin is empty", "[cli][commands]") {
  Harness h;
  CliResult r = run(h, {"-i", "--", "cat"}, {"hi"});
  CHECK(r.status == 0);
  CHECK(r.out == "hi");

  // More than a pipe buffer, binary included, arrives whole.
  std::string big(300000, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 7 + i / 256);
  r = run(h, {"--interactive", "--", "cat"}, {big});
  CHECK(r.status == 0);
  CHECK(r.out.size() == big.size());
  CHECK(r.out == big);

  // Without -i the host's stdin is not read even when it has data and never ends: cat sees EOF at once.
  r = run(h, {"--", "cat"}, {"host data\n", /*close=*/false});
  CHECK(r.status == 0);
  CHECK(r.out.empty());
  CHECK(r.seconds < 5);
  expect_nothing_left(h);
}

TEST_CASE("cli: run --env, --workdir, --hostname and --user take effect", "[cli][commands]") {
  Harness h;
  CliResult r = run(h, {"--env", "FOO=bar", "-e", "EMPTY=", "--env=SPACED=a b", "--", "sh", "-c",
                        "echo \"$FOO|${EMPTY-unset}|$SPACED\""});
  CHECK(r.status == 0);
  CHECK(r.out == "bar||a b\n");
  r = run(h, {"--workdir", "/etc", "--", "pwd"});
  CHECK(r.out == "/etc\n");
  r = run(h, {"-w", "/tmp", "--", "pwd"});
  CHECK(r.out == "/tmp\n");
  r = run(h, {"--hostname", "box-one", "--", "hostname"});
  CHECK(r.out == "box-one\n");
  r = run(h, {"--user", "1000", "--", "id", "-u"});
  CHECK(r.out == "1000\n");
  r = run(h, {"-u", "1000:1001", "--", "sh", "-c", "echo $(id -u):$(id -g)"});
  CHECK(r.out == "1000:1001\n");
  r = run(h, {"--", "id", "-u"});  // the default stays root
  CHECK(r.out == "0\n");
  expect_nothing_left(h);
}

TEST_CASE("cli: run streams large stdout and stderr whole", "[cli][commands]") {
  Harness h;
  // 5,000,000 bytes on stdout and 3,000,000 on stderr at the same time, each a recognisable pattern.
  const CliResult r = run(h, {"--", "sh", "-c",
                              "yes 0123456789abcdef | head -c 5000000 & "
                              "yes to-stderr | head -c 3000000 >&2; wait"});
  CHECK(r.status == 0);
  auto pattern = [](const std::string& line, size_t size) {
    std::string s;
    while (s.size() < size) s += line + "\n";
    s.resize(size);
    return s;
  };
  REQUIRE(r.out.size() == 5000000);
  CHECK(r.out == pattern("0123456789abcdef", 5000000));
  REQUIRE(r.err.size() == 3000000);
  CHECK(r.err == pattern("to-stderr", 3000000));
  expect_nothing_left(h);
}

TEST_CASE("cli: run ended by Ctrl-C destroys its sandbox, then dies by SIGINT", "[cli][commands]") {
  Harness h;
  const std::string secs = unique_seconds(1);
  CliProcess p(h, {"run", "--layer", SANDLET_TEST_ROOTFS, "--", "sleep", secs});
  REQUIRE(wait_until([&] { return !host_pids({"sleep", secs}).empty(); }, 10));
  const auto ids = h.sandbox_dirs();
  REQUIRE(ids.size() == 1);
  ::kill(p.pid(), SIGINT);
  const CliResult r = p.wait(10);
  CHECK(r.signal == SIGINT);
  CHECK(r.seconds < 10);
  CHECK(wait_until([&] { return host_pids({"sleep", secs}).empty(); }, 5));
  CHECK(h.gone(ids[0]));  // destroyed before the CLI died, not left for the next sweep
  expect_nothing_left(h, ids);
}

TEST_CASE("cli: run whose reader goes away (| head) still destroys its sandbox", "[cli][commands]") {
  Harness h;
  const std::string token = "sigpipe-" + std::to_string(::getpid());
  CliProcess p(h, {"run", "--layer", SANDLET_TEST_ROOTFS, "--", "yes", token});
  REQUIRE(wait_until([&] { return !host_pids({"yes", token}).empty(); }, 10));
  const auto ids = h.sandbox_dirs();
  REQUIRE(ids.size() == 1);
  const CliResult r = p.wait(10, /*stdout_keep=*/100);  // then our end of its stdout is closed
  CHECK(r.out.size() == 100);
  CHECK(r.out.rfind(token + "\n" + token + "\n", 0) == 0);
  CHECK(r.seconds < 10);
  // The command writes to the pipe itself: it gets the SIGPIPE, the CLI reports that (128+13) and the
  // sandbox is destroyed before the CLI exits. (It used to be the CLI, relaying the output, that died by
  // SIGPIPE, leaving the sandbox's directory, cgroups and uid slot to a later sweep.)
  CHECK(r.signal == 0);
  CHECK(r.status == 128 + SIGPIPE);
  CHECK(h.gone(ids[0]));
  CHECK(wait_until([&] { return host_pids({"yes", token}).empty(); }, 5));
  expect_nothing_left(h, ids);
}

TEST_CASE("cli: create prints an id; ps, ps -q and ps --json list it; --label filters; rm removes it",
          "[cli][commands]") {
  Harness h;
  const std::string a = expect_id(cli(h, {"create", "--layer", SANDLET_TEST_ROOTFS, "--label", "task=t1", "--label", "k=v"}));
  const std::string b = expect_id(cli(h, {"create", "--layer", SANDLET_TEST_ROOTFS, "--label", "task=t2"}));
  CHECK(a != b);

  CliResult r = cli(h, {"ps"});
  CHECK(r.status == 0);
  CHECK(r.out.rfind("ID ", 0) == 0);
  bool row_a = false;
  for (const auto& l : lines(r.out))
    if (l.rfind(a + " ", 0) == 0) row_a = contains(l, "running") && contains(l, "task=t1") && contains(l, "k=v");
  CHECK(row_a);
  CHECK(lines(cli(h, {"ps", "-q"}).out) == std::set<std::string>{a, b});

  r = cli(h, {"ps", "--json"});
  CHECK(r.status == 0);
  const boost::json::value all = parse_json(r.out);
  REQUIRE(all.is_array());
  REQUIRE(all.get_array().size() == 2);
  bool found_a = false;
  for (const boost::json::value& rec : all.get_array()) {
    REQUIRE(rec.is_object());
    if (str(rec, "id") != a) continue;
    found_a = true;
    CHECK(str(rec, "state") == "running");
    const boost::json::value* spec = rec.get_object().if_contains("spec");
    REQUIRE(spec != nullptr);
    const boost::json::value* labels = spec->is_object() ? spec->get_object().if_contains("labels") : nullptr;
    REQUIRE(labels != nullptr);
    CHECK(str(*labels, "task") == "t1");
    CHECK(str(*labels, "k") == "v");
    CHECK(str(*spec, "lifetime") == "detached");
  }
  CHECK(found_a);

  // --label filters every form of the listing.
  const boost::json::value only_a = parse_json(cli(h, {"ps", "--json", "--label", "task=t1"}).out);
  REQUIRE(only_a.is_array());
  REQUIRE(only_a.get_array().size() == 1);
  CHECK(str(only_a.get_array()[0], "id") == a);
  CHECK(cli(h, {"ps", "-q", "--label", "task=t2"}).out == b + "\n");
  r = cli(h, {"ps", "--json", "--label", "task=none"});
  CHECK(r.status == 0);
  const boost::json::value none = parse_json(r.out);
  CHECK(none.is_array());
  CHECK(none.as_array().empty());

  r = cli(h, {"rm", a});
  CHECK(r.status == 0);
  CHECK(r.out == a + "\n");
  CHECK(cli(h, {"ps", "-q"}).out == b + "\n");
  // The removed id: exec and rm fail with status 1 and a message naming it.
  r = cli(h, {"exec", a, "--", "true"});
  CHECK(r.status == 1);
  CHECK(contains(r.err, a));
  r = cli(h, {"rm", a, b});  // each operand on its own: b is removed all the same
  CHECK(r.status == 1);
  CHECK(contains(r.err, "rm " + a));
  CHECK(r.out == b + "\n");
  const boost::json::value after_rm = parse_json(cli(h, {"ps", "--json"}).out);
  CHECK((after_rm.is_array() && after_rm.get_array().empty()));

  r = cli(h, {"gc"});
  CHECK(r.status == 0);
  CHECK(r.out == "0\n");  // nothing crashed or expired
  expect_nothing_left(h, {a, b});
}

TEST_CASE("cli: exec runs in a created sandbox: status, streams, options, timeout, state kept", "[cli][commands]") {
  Harness h;
  const std::string id = expect_id(cli(h, {"create", "--layer", SANDLET_TEST_ROOTFS}));
  auto exec = [&](std::vector<std::string> args, Input input = {}) {
    args.insert(args.begin(), "exec");
    return cli(h, args, std::move(input));
  };
  CliResult r = exec({id, "--", "sh", "-c", "echo to-out; echo to-err >&2; exit 3"});
  CHECK(r.status == 3);
  CHECK(r.out == "to-out\n");
  CHECK(r.err == "to-err\n");
  CHECK(exec({id, "/bin/echo", "no", "dashes"}).out == "no dashes\n");

  r = exec({"--env", "A=1", "-e", "B=two", "--workdir", "/tmp", id, "--", "sh", "-c", "echo \"$A $B $(pwd)\""});
  CHECK(r.status == 0);
  CHECK(r.out == "1 two /tmp\n");
  // exec's bare --env K copies K from the CLI's environment (its --help says so).
  r = exec({"-e", "FROM_HOST", id, "--", "sh", "-c", "echo \"[$FROM_HOST]\""}, {"", true, {"FROM_HOST=copied"}});
  CHECK(r.out == "[copied]\n");
  CHECK(exec({"--user", "1000", id, "--", "id", "-u"}).out == "1000\n");
  CHECK(exec({"-i", id, "--", "cat"}, {"to stdin"}).out == "to stdin");
  r = exec({id, "--", "cat"}, {"host data\n", /*close=*/false});
  CHECK(r.status == 0);
  CHECK(r.out.empty());

  CHECK(exec({id, "--", "sh", "-c", "kill -TERM $$"}).status == 128 + SIGTERM);
  CHECK(exec({id, "--", "no-such-command"}).status == 127);
  CHECK(exec({id, "--", "/etc/passwd"}).status == 126);

  // The sandbox keeps its state between execs.
  CHECK(exec({id, "--", "sh", "-c", "echo kept > /root/state"}).status == 0);
  CHECK(exec({id, "--", "cat", "/root/state"}).out == "kept\n");

  // --timeout: 124, quickly, and the command's whole tree is killed.
  const std::string secs = unique_seconds(2);
  r = exec({"--timeout", "0.5", id, "--", "sh", "-c", "sleep " + secs + " & exec sleep " + secs});
  CHECK(r.status == 124);
  CHECK(r.seconds < 5);
  CHECK(contains(r.err, "timed out"));
  CHECK(wait_until([&] { return host_pids({"sleep", secs}).empty(); }, 5));

  // What a command leaves running dies with it, unless --keep-background.
  const std::string bg = unique_seconds(3);
  CHECK(exec({id, "--", "sh", "-c", "sleep " + bg + " &"}).status == 0);
  CHECK(wait_until([&] { return host_pids({"sleep", bg}).empty(); }, 5));
  CHECK(exec({"--keep-background", id, "--", "sh", "-c", "sleep " + bg + " &"}).status == 0);
  // (The shell may exit before its background child has exec'd sleep: wait for it to show.)
  CHECK(wait_until([&] { return host_pids({"sleep", bg}).size() == 1; }, 5));

  CHECK(cli(h, {"rm", id}).status == 0);
  CHECK(wait_until([&] { return host_pids({"sleep", bg}).empty(); }, 5));  // rm killed it
  expect_nothing_left(h, {id});
}

TEST_CASE("cli: exec ended by Ctrl-C dies by SIGINT and its command is killed", "[cli][commands]") {
  Harness h;
  const std::string id = expect_id(cli(h, {"create", "--layer", SANDLET_TEST_ROOTFS}));
  const std::string secs = unique_seconds(4);
  CliProcess p(h, {"exec", id, "--", "sleep", secs});
  REQUIRE(wait_until([&] { return !host_pids({"sleep", secs}).empty(); }, 10));
  ::kill(p.pid(), SIGINT);
  const CliResult r = p.wait(10);
  CHECK(r.signal == SIGINT);
  CHECK(wait_until([&] { return host_pids({"sleep", secs}).empty(); }, 5));
  // The sandbox itself lives on.
  CHECK(cli(h, {"exec", id, "--", "echo", "alive"}).out == "alive\n");
  CHECK(cli(h, {"rm", id}).status == 0);
  expect_nothing_left(h, {id});
}

TEST_CASE("cli: cp copies a file into a sandbox and back out byte for byte", "[cli][commands]") {
  Harness h;
  const std::string id = expect_id(cli(h, {"create", "--layer", SANDLET_TEST_ROOTFS}));
  std::string data(200000, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 31 + i / 1000);
  const std::string in = h.root() + "/cp-in.bin", out = h.root() + "/cp-out.bin";
  std::ofstream(in, std::ios::binary) << data;
  fs::permissions(in, fs::perms(0750));

  CliResult r = cli(h, {"cp", in, id + ":/tmp/copied.bin"});
  CHECK(r.status == 0);
  CHECK(r.err.empty());
  // Inside: the same size and mode ("its mode is kept").
  CHECK(cli(h, {"exec", id, "--", "stat", "-c", "%s %a", "/tmp/copied.bin"}).out == "200000 750\n");
  r = cli(h, {"cp", id + ":/tmp/copied.bin", out});
  CHECK(r.status == 0);
  CHECK(slurp(out) == data);

  // A destination ending in '/' keeps the file's name; '-' is stdin or stdout.
  CHECK(cli(h, {"cp", in, id + ":/root/"}).status == 0);
  CHECK(cli(h, {"exec", id, "--", "cmp", "/root/cp-in.bin", "/tmp/copied.bin"}).status == 0);
  CHECK(cli(h, {"cp", "-", id + ":/tmp/from-stdin"}, {"piped bytes"}).status == 0);
  CHECK(cli(h, {"cp", id + ":/tmp/from-stdin", "-"}).out == "piped bytes");

  // A file that is not there: status 1, named.
  r = cli(h, {"cp", id + ":/tmp/not-there", out});
  CHECK(r.status == 1);
  CHECK(contains(r.err, "/tmp/not-there"));

  CHECK(cli(h, {"rm", id}).status == 0);
  fs::remove(in);
  fs::remove(out);
  expect_nothing_left(h, {id});
}
