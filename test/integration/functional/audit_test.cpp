// The audit log (docs/AUDIT.md): every record type with its fields, as written by real sandboxes; rotation
// while several processes append; the sandbox cannot see the log; the readers' filters and following.
#include <sys/stat.h>
#include <sys/wait.h>

#include <future>

#include <boost/json.hpp>
#include <map>
#include <set>

#include "integration/functional/cli_support.hpp"
#include "integration/harness.hpp"

namespace json = boost::json;
using cli_test::CliProcess;

namespace {

std::vector<json::object> read_all(const std::string& path, const sandlet::AuditFilter& filter = {}) {
  auto reader = sandlet::AuditReader::open(path, filter);
  std::vector<json::object> out;
  while (auto line = reader.next()) {
    json::value v = json::parse(*line);
    REQUIRE(v.is_object());
    out.push_back(v.as_object());
  }
  return out;
}

std::vector<json::object> events(const std::vector<json::object>& all, const std::string& event) {
  std::vector<json::object> out;
  for (const auto& r : all)
    if (r.at("event").as_string() == event) out.push_back(r);
  return out;
}

std::string str(const json::object& o, const char* k) { return std::string(o.at(k).as_string()); }
int64_t num(const json::object& o, const char* k) { return o.at(k).to_number<int64_t>(); }

// Every record has the common fields, of the right types.
void check_common(const json::object& r, const std::string& id) {
  INFO(json::serialize(r));
  const std::string ts = str(r, "ts");
  CHECK(ts.size() == 27);  // 2026-12-02T02:35:28.123456Z
  CHECK(ts.back() == 'Z');
  CHECK(ts[10] == 'T');
  CHECK(str(r, "sandbox") == id);
  CHECK(r.at("labels").is_object());
  CHECK(num(r, "pid") > 0);
}

}  // namespace

TEST_CASE("audit: exec records say what ran and how it ended, byte counts and truncation as returned", "[audit]") {
  Harness h;
  const std::string path = h.rt().audit_path();
  CHECK(path == h.root() + "/audit/audit.jsonl");
  auto sb = h.rt().create(Harness::spec().label("task", "t1").label("team", "rl").env("VISIBLE", "env-value-123")
                              .secret("TOKEN", "secret-value-456"));
  const std::string id = sb.id();

  auto plain = sb.exec(sandlet::ExecOptions({"sh", "-c", "printf hello; printf e >&2; exit 3"}));
  sandlet::ExecOptions capped({"sh", "-c", "head -c 5000 /dev/zero"});
  capped.output_limit = 1000;
  auto truncated = sb.exec(capped);
  REQUIRE(truncated.stdout_truncated);
  sandlet::ExecOptions streamed({"sh", "-c", "head -c 3000 /dev/zero; head -c 7 /dev/zero >&2"});
  size_t streamed_bytes = 0;
  streamed.on_output = [&](int, std::string_view d) { streamed_bytes += d.size(); };
  sb.exec(streamed);
  sandlet::ExecOptions slow({"sleep", "5"});
  slow.timeout_s = 0.3;
  auto timed = sb.exec(slow);
  REQUIRE(timed.timed_out);
  try {
    sb.exec(sandlet::ExecOptions({"/no/such/command"}));
    FAIL("a missing command ran");
  } catch (const sandlet::Error&) {
  }
  sandlet::ExecOptions bg({"sh", "-c", "echo async"});
  bg.keep_background = true;
  bg.cwd = "/tmp";
  std::promise<void> done;
  auto control = sb.exec_start(bg, [&](const sandlet::Error*, sandlet::ExecResult) { done.set_value(); });
  done.get_future().wait();

  auto recs = read_all(path, {id, {}, 0});
  auto execs = events(recs, "exec");
  REQUIRE(execs.size() == 6);
  for (const auto& r : execs) check_common(r, id);
  const json::object& e0 = execs[0];
  CHECK(e0.at("argv").as_array().size() == 3);
  CHECK(str(e0, "cwd").empty());
  CHECK(num(e0, "exit_code") == 3);
  CHECK(num(e0, "signal") == 0);
  CHECK(e0.at("timed_out").as_bool() == false);
  CHECK(num(e0, "stdout_bytes") == static_cast<int64_t>(plain.stdout_data.size()));
  CHECK(num(e0, "stderr_bytes") == static_cast<int64_t>(plain.stderr_data.size()));
  CHECK(e0.at("stdout_truncated").as_bool() == false);
  CHECK(str(e0, "start") <= str(e0, "end"));
  CHECK(e0.at("duration_ms").to_number<double>() >= 0);
  CHECK(e0.at("labels").as_object().at("task").as_string() == "t1");

  CHECK(num(execs[1], "stdout_bytes") == static_cast<int64_t>(truncated.stdout_data.size()));
  CHECK(num(execs[1], "stdout_bytes") == 1000);
  CHECK(execs[1].at("stdout_truncated").as_bool());
  CHECK(num(execs[1], "output_limit") == 1000);

  CHECK(execs[2].at("streaming").as_bool());
  CHECK(num(execs[2], "stdout_bytes") + num(execs[2], "stderr_bytes") == static_cast<int64_t>(streamed_bytes));
  CHECK(num(execs[2], "stderr_bytes") == 7);

  CHECK(execs[3].at("timed_out").as_bool());
  CHECK(execs[4].at("error").as_object().at("code").to_number<int>() == SANDLET_NOT_FOUND);
  CHECK(execs[4].at("argv").as_array()[0].as_string() == "/no/such/command");
  CHECK(execs[5].at("keep_background").as_bool());
  CHECK(str(execs[5], "cwd") == "/tmp");

  // The create record: what was asked for, no values of env or secrets anywhere in the log.
  auto creates = events(recs, "create");
  REQUIRE(creates.size() == 1);
  const json::object& c = creates[0];
  check_common(c, id);
  CHECK(str(c, "backend") == "container");
  CHECK(c.at("layers").as_array().size() == 1);
  CHECK(c.at("limits").as_object().contains("memory"));
  CHECK(str(c, "network") == "none");
  CHECK(str(c, "lifetime") == "owned");
  CHECK(num(c, "secrets") == 1);
  CHECK(c.at("env_keys").as_array().size() >= 1);
  REQUIRE(events(recs, "running").size() == 1);
  const std::string whole = slurp(path);
  CHECK(whole.find("env-value-123") == std::string::npos);
  CHECK(whole.find("secret-value-456") == std::string::npos);

  sb.destroy();
  auto destroys = events(read_all(path, {id, {}, 0}), "destroy");
  REQUIRE(destroys.size() == 1);
  CHECK(str(destroys[0], "reason") == "explicit");
  auto stats = json::parse(h.rt().stats_json()).as_object().at("audit").as_object();
  CHECK(stats.at("failed").to_number<int>() == 0);
  CHECK(stats.at("written").to_number<int>() >= 9);
  h.check_no_leaks();
}

TEST_CASE("audit: lifecycle records — pause, resume, snapshot, fork, attach, one-shot runs, failed creates", "[audit]") {
  Harness h;
  const std::string path = h.rt().audit_path();
  auto sb = h.rt().create(Harness::spec().label("task", "life"));
  const std::string id = sb.id();
  sb.pause();
  sb.resume();
  sb.exec(sandlet::ExecOptions({"sh", "-c", "echo x > /root/file"}));
  sb.snapshot();
  sandlet::ForkOptions fo;
  fo.n = 2;
  auto forked = sb.fork(fo);
  {
    auto other = sandlet::Runtime::open(h.root(), [] {
      sandlet::RuntimeOptions o;
      o.skip_gc_on_open = true;
      return o;
    }());
    auto attached = other.attach(id);
    (void)attached;
  }
  auto recs = read_all(path, {id, {}, 0});
  CHECK(events(recs, "pause").size() == 1);
  CHECK(events(recs, "resume").size() == 1);
  auto snaps = events(recs, "snapshot");
  REQUIRE(snaps.size() >= 2);  // the explicit one and the fork's
  CHECK(str(snaps[0], "layer").size() >= 64);  // the digest
  auto forks = events(recs, "fork");
  REQUIRE(forks.size() == 1);
  CHECK(forks[0].at("children").as_array().size() == 2);
  CHECK(num(forks[0], "failed") == 0);
  auto attaches = events(recs, "attach");
  REQUIRE(attaches.size() == 1);
  CHECK(num(attaches[0], "pid") == num(attaches[0], "owner_pid"));  // the same process, another runtime
  // Each child has its own create with the fork's labels.
  for (const auto& child : forked.children) {
    auto crecs = read_all(path, {child.id(), {}, 0});
    REQUIRE(events(crecs, "create").size() == 1);
    CHECK(events(crecs, "create")[0].at("labels").as_object().at("sandlet.parent").as_string() == id);
  }
  forked.children.clear();

  // A one-shot run: an exec record (output went to the caller's descriptors: no byte counts) and its end.
  sandlet::RunOptions ro;
  ro.argv = {"sh", "-c", "exit 4"};
  auto r = h.rt().run(Harness::spec().label("task", "oneshot"), ro);
  CHECK(r.exit_code == 4);
  auto oneshot = read_all(path, {"", {{"task", "oneshot"}}, 0});
  auto runs = events(oneshot, "exec");
  REQUIRE(runs.size() == 1);
  CHECK(runs[0].at("one_shot").as_bool());
  CHECK(num(runs[0], "exit_code") == 4);
  CHECK_FALSE(runs[0].contains("stdout_bytes"));
  wait_until([&] { return !events(read_all(path, {"", {{"task", "oneshot"}}, 0}), "destroy").empty(); }, 5);
  auto run_end = events(read_all(path, {"", {{"task", "oneshot"}}, 0}), "destroy");
  REQUIRE(run_end.size() == 1);
  CHECK(str(run_end[0], "reason") == "run_finished");

  // A create that fails inside the sandbox: its create record, then a destroy saying why.
  const std::string bad = h.root() + "-bad-layer";
  fs::create_directories(bad);
  std::ofstream(bad + "/proc") << "not a directory\n";
  CHECK_THROWS(h.rt().create(Harness::spec().layer(bad).label("task", "broken")));
  auto broken = read_all(path, {"", {{"task", "broken"}}, 0});
  auto failed = events(broken, "destroy");
  REQUIRE(failed.size() == 1);
  CHECK(str(failed[0], "reason") == "create_failed");
  CHECK(str(failed[0].at("error").as_object(), "message").find("/proc") != std::string::npos);
  fs::remove_all(bad);

  sb.destroy();
  h.check_no_leaks();
}

TEST_CASE("audit: a detached sandbox that outlived its max lifetime with nobody watching is recorded by gc",
          "[audit][gc]") {
  Harness h;
  std::string id;
  {
    auto sb = h.rt().create(Harness::spec().lifetime("detached").max_lifetime(1).label("task", "ttl"));
    id = sb.id();
  }
  h.rt().close();  // nobody watches it from here
  std::this_thread::sleep_for(std::chrono::milliseconds(1600));
  auto later = sandlet::Runtime::open(h.root());  // the sweep at open finds it
  const auto path = later.audit_path();
  auto destroys = events(read_all(path, {id, {}, 0}), "destroy");
  REQUIRE(destroys.size() == 1);
  CHECK(str(destroys[0], "reason") == "max_lifetime");
  CHECK(str(destroys[0], "recorded_by") == "gc");
  CHECK(num(destroys[0], "pid") == ::getpid());
  later.close();
  wait_until([&] { return h.gone(id); }, 10);
  CHECK(h.gone(id));
}

TEST_CASE("audit: rotation while two processes append keeps every line exactly once", "[audit]") {
  Harness h;
  constexpr int kPerWriter = 3000;
  const std::string path = h.rt().audit_path();
  // A reader that follows while the writers rotate under it.
  auto follower = sandlet::AuditReader::open(path, {"", {{"writer", "a"}}, 0});
  std::vector<std::string> followed;
  std::vector<pid_t> pids;
  for (const char* tag : {"a", "b"}) {
    pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      ::execl(SANDLET_AUDIT_WRITER, SANDLET_AUDIT_WRITER, h.root().c_str(), std::to_string(kPerWriter).c_str(), "65536",
              "1000", tag, static_cast<char*>(nullptr));
      ::_exit(127);
    }
    pids.push_back(pid);
  }
  size_t running = pids.size();
  while (running) {
    while (auto line = follower.next()) followed.push_back(*line);
    running = 0;
    for (pid_t& p : pids) {
      if (p <= 0) continue;
      int st = 0;
      if (::waitpid(p, &st, WNOHANG) == p) {
        CHECK((WIFEXITED(st) && WEXITSTATUS(st) == 0));
        p = -1;
      } else {
        ++running;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  while (auto line = follower.next()) followed.push_back(*line);

  // Several files were made, every line is a record, each (writer, seq) once.
  CHECK(fs::exists(path + ".1"));
  CHECK(fs::exists(path + ".5"));
  // A file may pass the size by what other processes appended at the same moment (each writer checks the
  // size under the shared lock, then appends its one line): here two writers of short lines.
  for (int i = 1; fs::exists(path + "." + std::to_string(i)); ++i)
    CHECK(fs::file_size(path + "." + std::to_string(i)) <= 65536 + 2 * 1024);
  std::map<std::string, std::set<int64_t>> seen;
  size_t lines = 0;
  for (const auto& r : read_all(path, {"", {}, 0})) {
    if (r.at("event").as_string() != "test") continue;
    ++lines;
    seen[str(r.at("labels").as_object(), "writer")].insert(num(r, "seq"));
  }
  CHECK(lines == 2 * kPerWriter);
  CHECK(seen["a"].size() == kPerWriter);
  CHECK(seen["b"].size() == kPerWriter);
  std::set<int64_t> followed_seq;
  for (const auto& l : followed) followed_seq.insert(num(json::parse(l).as_object(), "seq"));
  CHECK(followed.size() == kPerWriter);
  CHECK(followed_seq.size() == kPerWriter);
  // The files are root's alone.
  struct stat st;
  REQUIRE(::stat((h.root() + "/audit").c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0700);
  REQUIRE(::stat(path.c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0600);
  h.check_no_leaks();
}

TEST_CASE("audit: root inside the sandbox can neither see nor reach the log", "[audit][security]") {
  Harness h;
  auto sb = h.rt().create(Harness::spec().label("task", "peek"));
  sb.exec(sandlet::ExecOptions({"true"}));  // the log exists now
  const std::string path = h.rt().audit_path();
  REQUIRE(fs::exists(path));
  // By its host path, through /proc (every process's root and cwd, the descriptors the sandbox has), and by
  // name anywhere in its file system.
  const std::string script =
      "for p in '" + path + "' '" + h.root() + "/audit' /proc/1/root'" + path + "' /proc/self/root'" + path +
      "'; do [ -e \"$p\" ] && echo FOUND:$p; done; "
      "for f in /proc/[0-9]*/fd/* /proc/[0-9]*/cwd /proc/[0-9]*/root /proc/[0-9]*/exe; do "
      "  t=$(readlink \"$f\" 2>/dev/null); case \"$t\" in *audit*) echo FOUND:$f:$t;; esac; done; "
      "find / -xdev -name 'audit.jsonl*' 2>/dev/null | sed 's/^/FOUND:/'; "
      "echo done";
  auto r = sb.exec(sandlet::ExecOptions({"sh", "-c", script}));
  INFO(r.stdout_data << r.stderr_data);
  CHECK(r.stdout_data == "done\n");
  // And writing there from inside makes nothing on the host (the text is spelled with an escape, so that the
  // exec's own record, which has its argv, does not contain it).
  sb.exec(sandlet::ExecOptions({"sh", "-c", "mkdir -p '" + h.root() + "/audit' && printf '\\146orged-line\\n' >> '" + path + "'"}));
  CHECK(slurp(path).find("forged-line") == std::string::npos);
  sb.destroy();
  h.check_no_leaks();
}

TEST_CASE("audit: the CLI filters by id and label, reads since a time, and follows", "[audit][cli]") {
  Harness h;
  auto a = h.rt().create(Harness::spec().label("task", "cli-a"));
  auto b = h.rt().create(Harness::spec().label("task", "cli-b"));
  a.exec(sandlet::ExecOptions({"echo", "a"}));
  b.exec(sandlet::ExecOptions({"echo", "b"}));

  auto by_id = cli_test::cli(h, {"audit", a.id()});
  REQUIRE(by_id.status == 0);
  size_t n = 0;
  std::istringstream in(by_id.out);
  for (std::string line; std::getline(in, line); ++n) CHECK(str(json::parse(line).as_object(), "sandbox") == a.id());
  CHECK(n >= 3);  // create, running, exec

  auto by_label = cli_test::cli(h, {"audit", "--label", "task=cli-b"});
  REQUIRE(by_label.status == 0);
  CHECK(by_label.out.find(b.id()) != std::string::npos);
  CHECK(by_label.out.find(a.id()) == std::string::npos);

  CHECK(cli_test::cli(h, {"audit", "--since", "2999-01-01T00:00:00Z"}).out.empty());
  CHECK_FALSE(cli_test::cli(h, {"audit", "--since", "1h"}).out.empty());
  auto bad = cli_test::cli(h, {"audit", "--since", "yesterday"});
  CHECK(bad.status == 2);
  CHECK(bad.err.find("--since") != std::string::npos);
  CHECK(cli_test::cli(h, {"audit", "--label", "novalue"}).status == 2);

  // --follow prints what is written after it started, then stops at its timeout.
  CliProcess follow(h, {"audit", "--follow", "--timeout", "4", "--label", "task=cli-a"});
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  a.exec(sandlet::ExecOptions({"echo", "after-follow-started"}));
  auto followed = follow.wait(15);
  CHECK(followed.status == 0);
  CHECK(followed.out.find("after-follow-started") != std::string::npos);
  CHECK(followed.out.find(b.id()) == std::string::npos);
  CHECK(followed.seconds < 10);
  a.destroy();
  b.destroy();
  h.check_no_leaks();
}

TEST_CASE("audit: bad reader input is refused naming the field; runtime options are checked", "[audit]") {
  sandlet_audit_reader_t* r = nullptr;
  sandlet_error_t* err = sandlet_audit_reader_open("relative/path", nullptr, &r);
  REQUIRE(err != nullptr);
  CHECK(sandlet_error_code(err) == SANDLET_INVALID_ARGUMENT);
  sandlet_error_delete(err);
  const char* labels[] = {"no-equals"};
  sandlet_audit_filter_t f = SANDLET_AUDIT_FILTER_INIT;
  f.labels = labels;
  f.n_labels = 1;
  err = sandlet_audit_reader_open("/tmp/x/audit.jsonl", &f, &r);
  REQUIRE(err != nullptr);
  CHECK(std::string(sandlet_error_message(err)).find("labels[0]") != std::string::npos);
  sandlet_error_delete(err);
  // A log that does not exist yet reads as empty.
  f.n_labels = 0;
  REQUIRE(sandlet_audit_reader_open("/tmp/sandlet-no-such-dir/audit.jsonl", &f, &r) == nullptr);
  char* line = reinterpret_cast<char*>(1);
  REQUIRE(sandlet_audit_reader_next(r, &line) == nullptr);
  CHECK(line == nullptr);
  sandlet_audit_reader_close(r);

  sandlet::RuntimeOptions o;
  o.audit_max_bytes = 100;
  try {
    sandlet::Runtime::open("/tmp/sandlet-audit-bad-options", o);
    FAIL("opened with a 100-byte rotation size");
  } catch (const sandlet::Error& e) {
    CHECK(std::string(e.what()).find("audit_max_bytes") != std::string::npos);
  }
  CHECK_FALSE(fs::exists("/tmp/sandlet-audit-bad-options"));
}

TEST_CASE("audit: a create records its effective seccomp policy, and each relaxation as a policy event", "[audit]") {
  Harness h;
  const std::string spec = std::string("{\"layers\": [\"") + SANDLET_TEST_ROOTFS +
                           "\"], \"policy\": {\"seccomp\": {\"allow\": [\"ptrace\"], \"deny\": [\"getcwd\"]}}}";
  auto sb = h.rt().create(sandlet::Spec::from_json(spec));
  const std::string id = sb.id();
  const auto all = read_all(h.rt().audit_path(), sandlet::AuditFilter{id});
  const auto creates = events(all, "create");
  REQUIRE(creates.size() == 1);
  const json::object& seccomp = creates[0].at("policy").as_object().at("seccomp").as_object();
  INFO(json::serialize(seccomp));
  CHECK(str(seccomp, "profile") == "default-v2");
  REQUIRE(seccomp.at("relaxations").as_array().size() == 1);
  CHECK(seccomp.at("extra_denied").as_array().size() == 1);
  const auto granted = events(all, "policy");
  REQUIRE(granted.size() == 1);
  check_common(granted[0], id);
  INFO(json::serialize(granted[0]));
  CHECK(granted[0].at("relaxation").as_string() == "ptrace");
}
