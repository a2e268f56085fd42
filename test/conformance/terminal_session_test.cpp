// Interactive use every backend must give (docs/SHELLS.md): stdin streamed into a running command, a
// pseudo-terminal inside the sandbox (size, resize, raw bytes both ways, job-control keys), and shell
// sessions that keep one shell across calls and return each command's output and status without echo.
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <mutex>
#include <optional>
#include <thread>

#include "conformance/conformance.hpp"

using namespace conformance;

namespace {

// A command started with exec_start whose output is collected as it comes.
struct Running {
  std::mutex mu;
  std::condition_variable cv;
  std::string output;
  bool done = false;
  std::optional<sandlet::Error> error;
  sandlet::ExecResult result;
  sandlet::ExecControl control;

  Running(sandlet::Sandbox& sb, sandlet::ExecOptions o) {
    o.on_output = [this](int, std::string_view data) {
      std::lock_guard lock(mu);
      output.append(data);
      cv.notify_all();
    };
    control = sb.exec_start(o, [this](const sandlet::Error* e, sandlet::ExecResult r) {
      std::lock_guard lock(mu);
      if (e) error = *e;
      result = std::move(r);
      done = true;
      cv.notify_all();
    });
  }
  ~Running() {
    control.cancel();
    wait(10);
  }
  // Waits until the output holds `text` (true) or `seconds` passed.
  bool wait_for_output(const std::string& text, double seconds = 10) {
    std::unique_lock lock(mu);
    return cv.wait_for(lock, std::chrono::duration<double>(seconds),
                       [&] { return output.find(text) != std::string::npos; });
  }
  bool wait(double seconds = 10) {
    std::unique_lock lock(mu);
    return cv.wait_for(lock, std::chrono::duration<double>(seconds), [&] { return done; });
  }
  std::string text() {
    std::lock_guard lock(mu);
    return output;
  }
};

sandlet::ExecOptions tty_options(std::vector<std::string> argv, uint32_t rows = 0, uint32_t cols = 0) {
  sandlet::ExecOptions o(std::move(argv));
  o.tty = true;
  o.stdin_stream = true;
  o.tty_rows = rows;
  o.tty_cols = cols;
  return o;
}

}  // namespace

TEST_CASE("stdin streams into a running command, which answers before its input ends", "[conformance][interactive]") {
  Fixture f;
  auto sb = f.create();
  {
    sandlet::ExecOptions o({"sh", "-c", "while read -r line; do echo \"got $line\"; done; echo end"});
    o.stdin_stream = true;
    Running r(sb, o);
    r.control.write_stdin("one\n");
    CHECK(r.wait_for_output("got one\n"));  // answered while stdin is still open
    r.control.write_stdin("two\nthr");
    r.control.write_stdin("ee\n");
    CHECK(r.wait_for_output("got three\n"));
    r.control.close_stdin();
    r.control.close_stdin();  // idempotent
    REQUIRE(r.wait());
    CHECK_FALSE(r.error);
    CHECK(r.result.exit_code == 0);
    CHECK(r.text() == "got one\ngot two\ngot three\nend\n");
    CHECK(code_name(error_of([&] { r.control.write_stdin("late"); })) == "FAILED_PRECONDITION");
  }
  {
    // More than the agent buffers (1 MiB) and the host lets queue (4 MiB): writes wait, nothing is lost.
    sandlet::ExecOptions o({"wc", "-c"});
    o.stdin_stream = true;
    Running r(sb, o);
    const std::string chunk(256u << 10, 'x');
    for (int i = 0; i < 40; ++i) r.control.write_stdin(chunk);
    r.control.close_stdin();
    REQUIRE(r.wait(60));
    CHECK(r.text() == std::to_string(40 * chunk.size()) + "\n");
  }
  {
    // An exec without an open stdin refuses writes and resizes, naming the option.
    Running r(sb, sandlet::ExecOptions({"sleep", "5"}));
    auto e = error_of([&] { r.control.write_stdin("x"); });
    CHECK(code_name(e) == "FAILED_PRECONDITION");
    CHECK(contains(e.what(), "stdin_stream"));
    CHECK(code_name(error_of([&] { r.control.resize(10, 10); })) == "FAILED_PRECONDITION");
  }
  f.check_no_leaks();
}

TEST_CASE("a terminal: all three streams, its size, the user owns it, the line discipline applies",
          "[conformance][interactive]") {
  Fixture f;
  auto sb = f.create();
  sandlet::ExecOptions o({"sh", "-c",
                          "tty; stty size; test -t 0 && test -t 1 && test -t 2 && echo all-three; "
                          "echo to-stderr >&2; stat -c owner=%u \"$(tty)\""});
  o.tty = true;
  o.tty_rows = 33;
  o.tty_cols = 101;
  o.user = "1000";
  auto r = sb.exec(o);
  CHECK(r.exit_code == 0);
  CHECK(r.stderr_data.empty());  // a terminal has one output
  CHECK(contains(r.stdout_data, "/dev/pts/"));
  CHECK(contains(r.stdout_data, "33 101\r\n"));  // onlcr: the terminal turns \n into \r\n
  CHECK(contains(r.stdout_data, "all-three\r\n"));
  CHECK(contains(r.stdout_data, "to-stderr\r\n"));
  CHECK(contains(r.stdout_data, "owner=1000"));

  // Without a size: 24 x 80. Out of range: refused, naming the field.
  CHECK(contains(sb.exec(tty_options({"stty", "size"})).stdout_data, "24 80"));
  auto bad = tty_options({"true"}, 0, 5000);
  auto e = error_of([&] { sb.exec(bad); });
  CHECK(code_name(e) == "INVALID_ARGUMENT");
  CHECK(contains(e.what(), "tty size"));
  f.check_no_leaks();
}

TEST_CASE("a terminal is interactive: echo, resize with SIGWINCH, Ctrl-C, raw bytes both ways", "[conformance][interactive]") {
  Fixture f;
  auto sb = f.create();
  {
    Running r(sb, tty_options({"sh", "-c", "trap 'stty size' WINCH; echo ready; while :; do sleep 0.05; done"}));
    REQUIRE(r.wait_for_output("ready"));
    r.control.resize(50, 132);
    CHECK(r.wait_for_output("50 132"));  // the foreground process got SIGWINCH and sees the new size
    r.control.write_stdin("\x03");  // Ctrl-C: the terminal's SIGINT to its foreground process group
    REQUIRE(r.wait());
    CHECK(r.result.signal == SIGINT);
  }
  {
    Running r(sb, tty_options({"cat"}));
    r.control.write_stdin("hello\n");
    // The terminal echoes what is typed, then cat writes the line back.
    CHECK(r.wait_for_output("hello\r\nhello\r\n"));
    r.control.write_stdin("\x04");  // ^D at the start of a line: end of input, as on a keyboard
    REQUIRE(r.wait());
    CHECK(r.result.exit_code == 0);
  }
  {
    // Raw mode: every byte reaches the program unchanged (binary both ways).
    Running r(sb, tty_options({"sh", "-c", "stty raw -echo; echo ready; head -c 4 | od -An -tx1; stty sane"}));
    REQUIRE(r.wait_for_output("ready"));  // raw before the bytes come
    r.control.write_stdin(std::string("\x01\x03\xff\n", 4));
    REQUIRE(r.wait());
    CHECK(contains(r.text(), "01 03 ff 0a"));
  }
  f.check_no_leaks();
}

TEST_CASE("a shell session keeps its state and returns each command's output and status without echo",
          "[conformance][session]") {
  Fixture f;
  auto sb = f.create();
  sandlet::Session s = sb.open_session();
  CHECK(s.alive());
  auto r = s.run("cd /tmp && export GREETING=hi && greet() { echo \"$GREETING $1\"; }");
  CHECK(r.exit_code == 0);
  CHECK(r.stdout_data.empty());
  CHECK(r.stderr_data.empty());
  r = s.run("pwd; greet there; echo oops >&2; false");
  CHECK(r.stdout_data == "/tmp\nhi there\n");
  CHECK(r.stderr_data == "oops\n");
  CHECK(r.exit_code == 1);
  CHECK(s.run("(exit 42)").exit_code == 42);
  CHECK(s.run("printf 'no newline'").stdout_data == "no newline");  // exactly what was written
  CHECK(s.run("echo 'it'\"'\"'s quoted'; echo \"$((6 * 7))\"").stdout_data == "it's quoted\n42\n");
  CHECK(s.run("if true; then\n  echo multi\nfi").stdout_data == "multi\n");
  CHECK(s.run("cat; echo read-eof").stdout_data == "read-eof\n");  // a command's stdin is /dev/null
  CHECK(s.run("syntax error (").exit_code != 0);  // the command's own failure; the shell goes on
  CHECK(s.run("echo still here").stdout_data == "still here\n");
  // A background job lives on between commands; its later output goes to the next command's result.
  CHECK(s.run("(sleep 0.2; echo late) &").exit_code == 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(600));
  CHECK(s.run("echo now").stdout_data == "late\nnow\n");
  // The nonce marker cannot be forged by printing something like it.
  CHECK(s.run("echo __sandlet_0123456789abcdef01234567_0__").stdout_data == "__sandlet_0123456789abcdef01234567_0__\n");
  f.check_no_leaks();
}

TEST_CASE("a session's timeout kills the shell's whole tree and ends it; exit ends it with its status",
          "[conformance][session]") {
  Fixture f;
  auto sb = f.create();
  Sleeper sleeper;
  {
    sandlet::Session s = sb.open_session();
    auto r = s.run(sleeper.cmd() + " & " + sleeper.cmd(), 0.5);
    CHECK(r.timed_out);
    CHECK_FALSE(s.alive());
    CHECK(wait_until([&] { return sleeper.inside(sb) == 0; }, 10));
    auto e = error_of([&] { s.run("true"); });
    CHECK(code_name(e) == "FAILED_PRECONDITION");
    CHECK(contains(e.what(), "timed out"));
  }
  {
    sandlet::Session s = sb.open_session();
    auto r = s.run("echo bye; exit 3");
    CHECK(r.stdout_data == "bye\n");
    CHECK(r.exit_code == 3);
    CHECK_FALSE(s.alive());
  }
  {
    // Output past the limit is dropped and flagged; the marker is still found.
    sandlet::SessionOptions o;
    o.output_limit = 1000;
    sandlet::Session s = sb.open_session(o);
    auto r = s.run("yes | head -c 100000; echo done >&2");
    CHECK(r.stdout_data.size() == 1000);
    CHECK(r.stdout_truncated);
    CHECK(r.stderr_data == "done\n");
    CHECK(s.run("echo next").stdout_data == "next\n");
  }
  {
    // Closing the session kills what it left running.
    sandlet::Session s = sb.open_session();
    CHECK(s.run(sleeper.cmd() + " &").exit_code == 0);
    CHECK(sleeper.inside(sb) == 1);
    s.close();
    CHECK(wait_until([&] { return sleeper.inside(sb) == 0; }, 10));
  }
  {
    // A shell that cannot start fails at open; a bad command text is refused.
    sandlet::SessionOptions o;
    o.argv = {"/no/such/shell"};
    CHECK(code_name(error_of([&] { sb.open_session(o); })) == "NOT_FOUND");
    sandlet::SessionOptions as_user;
    as_user.user = "1000";
    as_user.cwd = "/tmp";
    sandlet::Session s = sb.open_session(as_user);
    CHECK(s.run("id -u; pwd").stdout_data == "1000\n/tmp\n");
  }
  f.check_no_leaks();
}
