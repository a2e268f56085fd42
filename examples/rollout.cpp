// sandlet as a miniature agentic RL rollout (C++, sandlet.hpp only).
//
//   example-rollout-cpp ROOT LAYER
//
// ROOT is the runtime's state directory (a throw-away one is best); LAYER is a root filesystem with
// busybox: a directory (the build's test-rootfs) or the name/digest of an EROFS layer imported into ROOT's
// layer store (`sandlet layer import DIR --name busybox`, as scripts/demo.sh does). Needs root. The toy task: a repository whose shell function add()
// subtracts; each episode's scripted "agent" rewrites add() and runs the tests; the reward is the share of
// tests that pass. Then misbehaving agents, a preempted trainer, and the clean-up.
// ROOT must hold no sandboxes yet. Exit status: 0 when everything behaved as expected, 1 otherwise, 2 on
// usage errors.
#include <sandlet/sandlet.hpp>

#include "exec_all.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cctype>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace fs = std::filesystem;

namespace {

// ---- small helpers --------------------------------------------------------------------------------

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}
double ms(uint64_t ns) { return static_cast<double>(ns) / 1e6; }

// One printf-style line, flushed at once so the output interleaves correctly with the shell script's.
[[gnu::format(printf, 1, 2)]] void say(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  std::vprintf(fmt, ap);
  va_end(ap);
  std::fputc('\n', stdout);
  std::fflush(stdout);
}

void section(const char* title) { say("\n== %s", title); }

// "  ep 4  fork bomb        -> contained: ..."
[[gnu::format(printf, 3, 4)]] void verdict(int episode, const char* probe, const char* fmt, ...) {
  char text[512];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(text, sizeof text, fmt, ap);
  va_end(ap);
  say("  ep %d  %-16s -> %s", episode, probe, text);
}

// A broken expectation of the demo itself (a sandbox that escaped, something left behind, ...).
struct DemoFailure : std::runtime_error {
  using std::runtime_error::runtime_error;
};
void expect(bool ok, const std::string& what) {
  if (!ok) throw DemoFailure(what);
}

std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

// The value of a "key=value" line in a command's output ("" when absent).
std::string value_of(const std::string& out, const std::string& key) {
  const std::string prefix = key + "=";
  size_t at = out.rfind("\n" + prefix);
  if (at != std::string::npos) return first_line(out.substr(at + 1 + prefix.size()));
  return out.rfind(prefix, 0) == 0 ? first_line(out.substr(prefix.size())) : std::string();
}

size_t count_of(const std::string& haystack, const std::string& needle) {
  size_t n = 0;
  for (size_t at = haystack.find(needle); at != std::string::npos; at = haystack.find(needle, at + 1)) ++n;
  return n;
}

using rollout::Collector;
using rollout::exec_all;

sandlet::ExecOptions shell(const std::string& script, double timeout_s) {
  sandlet::ExecOptions o({"sh", "-c", script});
  o.timeout_s = timeout_s;
  return o;
}

// Deletes a host directory tree when it goes out of scope.
struct TempDir {
  fs::path path;
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "sandlet-rollout.XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp " + tmpl + " failed");
    path = tmpl;
  }
  ~TempDir() {
    std::error_code ignored;
    fs::remove_all(path, ignored);
  }
};

void write_host_file(const fs::path& p, const std::string& text, fs::perms mode) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << text;
  fs::permissions(p, mode);
}

// (A missing directory counts as empty: the runtime removes its tmpfs state when the last one closes.)
size_t entries_in(const fs::path& dir) {
  std::error_code ec;
  fs::directory_iterator it(dir, ec);
  return ec ? 0 : static_cast<size_t>(std::distance(it, fs::directory_iterator()));
}

// ---- the toy task ---------------------------------------------------------------------------------

constexpr int kEpisodes = 8;

constexpr char kBuggyCalc[] =
    "# add A B: prints A + B\n"
    "add() {\n"
    "  echo $(( $1 - $2 ))  # bug\n"
    "}\n";

constexpr char kTests[] =
    "#!/bin/sh\n"
    ". \"${1:-/work/repo/calc.sh}\"  # the grader passes the candidate as $1\n"
    "pass=0; total=0\n"
    "check() {\n"
    "  total=$((total + 1)); got=$(add \"$1\" \"$2\")\n"
    "  if [ \"$got\" = \"$3\" ]; then pass=$((pass + 1)); echo \"PASS add $1 $2 = $3\";\n"
    "  else echo \"FAIL add $1 $2: got '$got', want $3\"; fi\n"
    "}\n"
    "check 1 2 3; check 0 0 0; check -4 10 6; check 20 22 42\n"
    "echo \"passed $pass/$total\"\n";

// The "task layer": a tiny repository that goes on top of the base (busybox) layer.
void make_task_layer(const fs::path& layer) {
  write_host_file(layer / "work/repo/calc.sh", kBuggyCalc, fs::perms(0644));
  write_host_file(layer / "work/repo/test.sh", kTests, fs::perms(0755));
  // The sandbox's root is not the host's root: every directory on the way must be world-readable.
  for (fs::path p = layer / "work/repo"; p != layer.parent_path(); p = p.parent_path())
    fs::permissions(p, fs::perms(0755));
}

// A scripted policy stands in for the model: each episode "samples" one rewrite of add().
struct Action {
  const char* name;
  const char* body;  // the new body of add()
};
constexpr Action kPolicy[kEpisodes] = {
    {"fix: a + b", "echo $(( $1 + $2 ))"},
    {"wrong: a * b", "echo $(( $1 * $2 ))"},
    {"fix: a - -b", "echo $(( $1 - -$2 ))"},
    {"no-op (keep bug)", "echo $(( $1 - $2 ))"},
    {"wrong: a + b + 1", "echo $(( $1 + $2 + 1 ))"},
    {"fix: expr a + b", "expr \"$1\" + \"$2\""},
    {"wrong: concat", "echo \"$1$2\""},
    {"fix: a + b", "echo $(( $1 + $2 ))"},
};

// The test script's verdict, from its last "passed X/Y" line; the reward is the share of tests passed.
struct Score {
  int passed = 0, total = 0;
  double reward() const { return total > 0 ? static_cast<double>(passed) / total : 0.0; }
};
Score parse_score(const std::string& out) {
  Score s;
  size_t at = out.rfind("passed ");
  if (at == std::string::npos || std::sscanf(out.c_str() + at, "passed %d/%d", &s.passed, &s.total) != 2) return {};
  return s;
}

sandlet::Spec episode_spec(const std::vector<std::string>& layers, const std::string& episode) {
  sandlet::Spec spec;
  for (const auto& l : layers) spec.layer(l);  // lowest first: busybox, then the task repository
  spec.label("task", "calc").label("episode", episode);
  spec.memory(128u << 20).pids(64).cpus(0.5);
  spec.max_lifetime(120);  // ~2x what the demo needs: a lost owner never leaves a zombie for long
  spec.workdir("/work/repo");
  return spec;
}

// A number or string field of a flat JSON object, as text ("" when absent): enough for the demo's output.
std::string json_field(const std::string& json, const std::string& name) {
  const std::string key = "\"" + name + "\":";
  size_t at = json.find(key);
  if (at == std::string::npos) return "";
  at += key.size();
  if (json[at] == '"') return json.substr(at + 1, json.find('"', at + 1) - at - 1);
  return json.substr(at, json.find_first_of(",}", at) - at);
}

std::string state_of(sandlet::Sandbox& sb) { return json_field(sb.info_json(), "state"); }

// ---- the steps ------------------------------------------------------------------------------------

void show_backends(sandlet::Runtime& rt, const std::vector<std::string>& layers) {
  for (const auto& b : rt.backends())
    say("  %-10s %s%s", b.name.c_str(), b.available ? "available" : "not available: ", b.reason.c_str());
  // Asking for a missing backend is an ordinary, typed error.
  try {
    rt.create(episode_spec(layers, "probe").backend("fullvm"));
    throw DemoFailure("a fullvm sandbox was created although the backend is listed as unavailable");
  } catch (const sandlet::Error& e) {
    if (e.code() != SANDLET_UNIMPLEMENTED) throw;
    say("  asking for fullvm anyway -> %s (as expected)", e.code_name());
  }
}

std::vector<sandlet::Sandbox> create_episodes(sandlet::Runtime& rt, const std::vector<std::string>& layers) {
  struct Created {
    std::optional<sandlet::Error> error;
    sandlet::Sandbox sb;
    double ms = 0;
  };
  Collector<Created> done(kEpisodes);
  const auto t0 = Clock::now();
  for (int i = 0; i < kEpisodes; ++i) {
    auto on_created = [&done, i, t0](const sandlet::Error* err, sandlet::Sandbox sb) {
      Created c;
      if (err != nullptr) c.error = *err;
      c.sb = std::move(sb);  // moved out: destroying a sandbox handle here would be blocking work
      c.ms = ms_since(t0);
      done.put(static_cast<size_t>(i), std::move(c));
    };
    rt.create_async(episode_spec(layers, std::to_string(i)), on_created);
  }
  auto created = done.wait();
  const double all_ms = ms_since(t0);

  std::vector<sandlet::Sandbox> episodes;
  double first = 1e9, last = 0;
  for (int i = 0; i < kEpisodes; ++i) {
    auto& c = created[static_cast<size_t>(i)];
    if (c.error) throw *c.error;
    first = std::min(first, c.ms);
    last = std::max(last, c.ms);
    episodes.push_back(std::move(c.sb));
  }
  say("  %d sandboxes (128 MiB, 64 pids, 0.5 CPU, max lifetime 120 s each) ready in %.1f ms", kEpisodes, all_ms);
  say("  first ready after %.1f ms, last after %.1f ms; e.g. episode 0 = %s", first, last, episodes[0].id().c_str());
  const std::string stats = rt.stats_json();
  say("  warm pool: %s of them handed a sandbox prepared ahead, %s prepared on the spot",
      json_field(stats, "hits").c_str(), json_field(stats, "misses").c_str());
  return episodes;
}

// The grader: a FnCall in a clean pooled container of the task's own layers (not in the episode, whose
// agent could have edited test.sh). The candidate file read back from the episode goes in as stdin.
sandlet::ExecResult grade(sandlet::Runtime& rt, const std::string& grader_spec, const std::string& candidate) {
  sandlet_call_options_t call = SANDLET_CALL_OPTIONS_INIT;
  call.spec_json = grader_spec.c_str();
  call.script = "./test.sh /dev/stdin";
  call.stdin_data = candidate.data();
  call.stdin_len = candidate.size();
  call.timeout_s = 10;
  sandlet_exec_result_t* r = nullptr;
  sandlet::detail::check(sandlet_call(rt.get(), &call, &r));
  return sandlet::ExecResult::take(r);
}

// One agent turn per episode: write the edited file, run the tests there (all episodes in flight at once),
// then grade each episode's file with FnCall.
std::vector<double> run_turn(sandlet::Runtime& rt, const std::vector<std::string>& layers,
                             std::vector<sandlet::Sandbox>& episodes) {
  std::vector<double> write_ms;
  for (int i = 0; i < kEpisodes; ++i) {
    const auto t0 = Clock::now();
    episodes[i].write_file("/work/repo/calc.sh", std::string("add() {\n  ") + kPolicy[i].body + "\n}\n");
    write_ms.push_back(ms_since(t0));
  }

  std::vector<sandlet::Sandbox*> boxes;
  std::vector<sandlet::ExecOptions> cmds;
  for (auto& sb : episodes) {
    boxes.push_back(&sb);
    cmds.push_back(shell("./test.sh", 10));
  }
  const auto t0 = Clock::now();
  auto outcomes = exec_all(boxes, cmds);
  const double all_ms = ms_since(t0);

  sandlet::Spec grader;
  for (const auto& l : layers) grader.layer(l);
  grader.label("task", "calc").label("role", "grader").memory(64u << 20).pids(32).workdir("/work/repo");
  const std::string grader_spec = grader.to_json();
  sandlet_fncall_pool_options_t pool = SANDLET_FNCALL_POOL_OPTIONS_INIT;
  pool.min_idle = pool.max_size = 2;  // two graders, ready before the first call
  sandlet::detail::check(sandlet_runtime_set_fncall_pool(rt.get(), grader_spec.c_str(), &pool));

  say("  episode  action              own run  reward (FnCall)  write     own tests  grading");
  std::vector<double> rewards;
  for (int i = 0; i < kEpisodes; ++i) {
    const auto& o = outcomes[i];
    if (o.error) throw *o.error;
    const Score own = parse_score(o.result.stdout_data);
    expect(own.total > 0, "episode " + std::to_string(i) + ": no test verdict in: " + o.result.stdout_data);
    const std::string candidate = episodes[i].read_file("/work/repo/calc.sh", 64 << 10);
    const auto g0 = Clock::now();
    const sandlet::ExecResult graded = grade(rt, grader_spec, candidate);
    const double grade_ms = ms_since(g0);
    const Score score = parse_score(graded.stdout_data);
    expect(score.total > 0, "episode " + std::to_string(i) + ": no grader verdict in: " + graded.stdout_data);
    rewards.push_back(score.reward());
    say("  %-7d  %-18s  %d/%d      %4.2f (%d/%d)      %5.1f ms  %5.1f ms   %5.1f ms", i, kPolicy[i].name, own.passed,
        own.total, score.reward(), score.passed, score.total, write_ms[i], ms(o.result.duration_ns), grade_ms);
  }
  say("  all %d test runs in flight at once from one thread: %.1f ms wall", kEpisodes, all_ms);
  char* stats = nullptr;
  sandlet::detail::check(sandlet_runtime_fncall_stats_json(rt.get(), &stats));
  const std::string fn = sandlet::detail::take_string(stats);
  say("  graded by FnCall in %s pooled container(s): %s calls reused one the call before left clean",
      json_field(fn, "created").c_str(), json_field(fn, "reused").c_str());
  return rewards;
}

// Misbehaving agents, one per episode sandbox (4..7); every probe must be contained.
void show_safety(std::vector<sandlet::Sandbox>& episodes, const fs::path& host_secret) {
  // The command's own shell forks once, then becomes `sleep` (exec, no fork): a shell that forked again
  // after the bomb exhausted the pid limit would fail ("can't fork"), exit early and dodge the timeout.
  sandlet::ExecOptions bomb = shell("bomb() { bomb | bomb & }; (bomb) & exec sleep 600", 2);
  bomb.output_limit = 64 << 10;
  sandlet::ExecOptions flood({"yes", "reward=1.0"});
  flood.output_limit = 1 << 20;
  flood.kill_on_output_limit = true;
  flood.timeout_s = 10;
  sandlet::ExecOptions hang = shell("sleep 600 & sleep 600 & sleep 600", 1);
  sandlet::ExecOptions escape = shell(
      "echo seccomp=$(awk '/^Seccomp:/ {print $2}' /proc/self/status)\n"
      "m=$(mount -t tmpfs none /mnt 2>&1) && echo mount=ALLOWED || echo \"mount=$m\"\n"
      "m=$(unshare -U true 2>&1) && echo unshare=ALLOWED || echo \"unshare=$m\"\n"
      "m=$(cat '" + host_secret.string() + "' 2>&1) && echo hostfile=VISIBLE || echo \"hostfile=$m\"\n"
      "echo procs=$(ls -d /proc/[0-9]* | wc -l)\n",
      10);

  const auto t0 = Clock::now();
  auto o = exec_all({&episodes[4], &episodes[5], &episodes[6], &episodes[7]}, {bomb, flood, hang, escape});
  say("  4 probes ran concurrently in %.1f ms", ms_since(t0));
  for (const auto& x : o)
    if (x.error) throw *x.error;

  const auto& b = o[0].result;
  expect(b.timed_out, "the fork bomb was not stopped by its timeout");
  verdict(4, "fork bomb", "contained: %zu forks refused at the 64-pid limit, all killed at the %.0f s timeout",
          count_of(b.stderr_data, "can't fork"), bomb.timeout_s);

  const auto& f = o[1].result;
  expect(f.stdout_truncated && f.stdout_data.size() <= flood.output_limit, "`yes` output was not capped");
  verdict(5, "`yes` flood", "contained: stdout cut at %zu KiB (flagged truncated), killed after %.0f ms",
          f.stdout_data.size() >> 10, ms(f.duration_ns));

  const auto& h = o[2].result;
  auto left = episodes[6].exec(shell("ps | grep -c '[s]leep 600'", 5));
  expect(h.timed_out && first_line(left.stdout_data) == "0", "the hanging command or its children survived");
  verdict(6, "hang + children", "contained: killed at the %.1f s timeout, %s of its 3 sleeps left", hang.timeout_s,
          first_line(left.stdout_data).c_str());

  const std::string& e = o[3].result.stdout_data;
  expect(e.find("ALLOWED") == std::string::npos, "mount or unshare was allowed:\n" + e);
  expect(e.find("VISIBLE") == std::string::npos, "a host file was readable:\n" + e);
  verdict(7, "mount tmpfs", "denied (seccomp mode %s): %s", value_of(e, "seccomp").c_str(),
          value_of(e, "mount").c_str());
  verdict(7, "unshare -U", "denied: %s", value_of(e, "unshare").c_str());
  const std::string read = value_of(e, "hostfile");  // "cat: can't open '...': No such file or directory"
  const size_t why = read.rfind(": ");
  verdict(7, "read answer key", "not visible: %s", (why == std::string::npos ? read : read.substr(why + 2)).c_str());
  size_t host_procs = 0;
  for (const auto& d : fs::directory_iterator("/proc"))
    host_procs += std::isdigit(static_cast<unsigned char>(d.path().filename().string()[0])) ? 1 : 0;
  verdict(7, "list processes", "only its own: %s visible (the host has %zu)", value_of(e, "procs").c_str(), host_procs);

  // The neighbours, and the misbehaving sandboxes themselves, still answer.
  std::vector<sandlet::Sandbox*> all;
  std::vector<sandlet::ExecOptions> ping;
  for (auto& sb : episodes) {
    all.push_back(&sb);
    ping.push_back(shell("echo ok", 5));
  }
  const auto t1 = Clock::now();
  size_t ok = 0;
  for (const auto& x : exec_all(all, ping)) ok += !x.error && x.result.stdout_data == "ok\n";
  expect(ok == episodes.size(), "an episode stopped answering after the probes");
  say("  afterwards all %zu episodes still answer (%.1f ms for one round)", ok, ms_since(t1));
}

// The trainer is preempted: its runtime goes away. Detached sandboxes live on; a new runtime (here the
// same process; it could be a new one) finds them by label and continues.
void show_preemption(sandlet::Runtime& rt, std::vector<sandlet::Sandbox>& episodes,
                     const std::vector<std::string>& layers, const std::string& root) {
  // Detached: it outlives this runtime; its max lifetime bounds it if the demo dies before destroying it.
  sandlet::Spec spec = episode_spec(layers, "long-horizon").lifetime("detached").max_lifetime(300);
  auto t0 = Clock::now();
  sandlet::Sandbox sb = rt.create(spec);
  sb.write_file("/work/agent/state.json", "{\"turn\": 3, \"plan\": \"fix add(), then run the tests\"}\n");
  sb.exec(shell("printf 'turn 1\\nturn 2\\nturn 3\\n' > /work/agent/log", 5));
  const std::string id = sb.id();  // what the trainer's checkpoint would keep
  say("  detached sandbox %s created, 3 turns of state written (%.1f ms)", id.c_str(), ms_since(t0));
  // While the trainer is away the sandbox waits frozen: its processes keep their memory and files but use
  // no CPU. (The next request resumes it.)
  sandlet::ExecOptions heartbeat = shell("(while :; do date +%s > /work/agent/heartbeat; sleep 0.05; done) >/dev/null 2>&1 &", 5);
  heartbeat.keep_background = true;  // a process of the agent's that lives across turns
  sb.exec(heartbeat);
  // The preemption notice: the whole job (every sandbox labelled task=calc, whichever process made it)
  // is frozen in one call, and the page cache its sandboxes filled goes back to the host.
  const std::string paused = rt.pause_job("task=calc");
  say("  job task=calc paused in one call: %s sandboxes frozen in %.1f ms, %.1f MiB of page cache given back",
      json_field(paused, "paused").c_str(), std::stod(json_field(paused, "elapsed_ns")) / 1e6,
      std::stod(json_field(paused, "reclaimed_bytes")) / (1 << 20));
  // (The job's sandboxes: the episodes, this one, and the grader's pooled FnCall containers.)
  expect(json_field(paused, "paused") == json_field(paused, "matched") &&
             std::stoul(json_field(paused, "matched")) > episodes.size() && json_field(paused, "failed") == "[]",
         "the job pause did not freeze every sandbox of the job: " + paused);

  t0 = Clock::now();
  sb.close();
  rt.close();        // owned sandboxes die with their runtime, detached ones do not
  episodes.clear();  // those handles are unusable now; releasing them is all that is left
  const size_t left = entries_in(fs::path(root) / "sandboxes");
  say("  trainer preempted: runtime closed in %.1f ms; sandboxes left on disk: %zu (the 8 owned episodes went with it)",
      ms_since(t0), left);
  expect(left == 1, "expected only the detached sandbox to survive the runtime");

  t0 = Clock::now();
  rt = sandlet::Runtime::open(root);
  say("  new runtime opened on the same root in %.1f ms", ms_since(t0));
  auto found = rt.list("task=calc");
  for (const auto& s : found)
    say("  list(\"task=calc\"): %s  %s%s", s.id.c_str(), s.state.c_str(),
        s.id == id ? "  (the id the checkpoint kept)" : "");
  expect(found.size() == 1 && found[0].id == id && found[0].state == "paused", "the paused sandbox was not found");

  // The job resumes in one call (an exec or file call on one paused sandbox would resume just that one).
  const std::string resumed = rt.resume_job("task=calc");
  say("  job task=calc resumed in one call: %s sandbox(es) running again in %.1f ms", json_field(resumed, "resumed").c_str(),
      std::stod(json_field(resumed, "elapsed_ns")) / 1e6);
  expect(json_field(resumed, "resumed") == "1", "the job resume did not thaw the detached sandbox: " + resumed);

  t0 = Clock::now();
  sandlet::Sandbox again = rt.attach(id);
  std::string state = again.read_file("/work/agent/state.json");
  auto turn = again.exec(shell("echo 'turn 4 (after resume)' >> /work/agent/log; wc -l < /work/agent/log", 5));
  say("  attached by id (%s); state: %s", state_of(again).c_str(), first_line(state).c_str());
  say("  continued: turn 4 done, the log now has %s lines (attach + read + exec: %.1f ms)",
      first_line(turn.stdout_data).c_str(), ms_since(t0));
}

// An episode its trainer abandons: the idle timeout ends it with nobody watching, and with on_expiry
// "keep_logs" its last output and audit trail stay for whoever debugs the run later.
void show_abandoned(sandlet::Runtime& rt, const std::vector<std::string>& layers) {
  sandlet::Sandbox sb = rt.create(episode_spec(layers, "abandoned").lifetime("detached").idle_timeout(0.5).on_expiry("keep_logs", 600));
  const std::string id = sb.id();
  sb.exec(shell("echo 'patched add() in calc.sh'; echo 'test.sh: 3 of 4 passed' >&2; exit 1", 5));
  sb.close();  // the handle goes; the (detached) sandbox lives on until its idle timeout
  const auto t0 = Clock::now();
  std::string logs;
  while (ms_since(t0) < 10000) {
    logs = rt.logs(id);
    if (json_field(logs, "state") == "expired") break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  expect(json_field(logs, "state") == "expired", "the abandoned episode did not expire: " + logs);
  expect(logs.find("3 of 4 passed") != std::string::npos, "its last output was not kept: " + logs);
  say("  episode %s idle 0.5 s -> ended by its own init (%s); kept: last output "
      "(\"patched add() in calc.sh\", stderr \"test.sh: 3 of 4 passed\", exit 1) and its audit trail",
      id.c_str(), json_field(logs, "reason").c_str());
  rt.forget_expired(id);
  say("  forget_expired(%s) -> its logs are gone too (else gc drops them after keep_s)", id.c_str());
}

void clean_up(sandlet::Runtime& rt, const std::string& root) {
  const auto t0 = Clock::now();
  auto batch = rt.list("task=calc");
  std::string last_id;
  for (const auto& s : batch) {
    rt.attach(s.id).destroy();
    last_id = s.id;
  }
  say("  list(\"task=calc\") -> %zu sandbox(es), destroyed in %.1f ms", batch.size(), ms_since(t0));
  if (!last_id.empty()) {
    try {
      rt.attach(last_id);
      throw DemoFailure("attach succeeded on a destroyed sandbox");
    } catch (const sandlet::Error& e) {
      if (e.code() != SANDLET_NOT_FOUND && e.code() != SANDLET_FAILED_PRECONDITION) throw;
      say("  attach(%s) now -> %s (as expected)", last_id.c_str(), e.code_name());
    }
  }
  const size_t listed = rt.list().size();
  expect(listed == 0, std::to_string(listed) + " sandbox(es) still listed under " + root);
  // destroy() kills at once and reclaims cgroups and files on a worker; closing the runtime waits for that.
  rt.close();
  const size_t on_disk = entries_in(fs::path(root) / "sandboxes");
  expect(on_disk == 0, std::to_string(on_disk) + " entries left in " + root + "/sandboxes after close");
  say("  runtime closed; nothing left: list() was empty, %s/sandboxes is empty", root.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s ROOT LAYER   (ROOT: runtime state dir; LAYER: busybox root fs directory, or "
                 "the name of a layer in ROOT's store)\n", argv[0]);
    return 2;
  }
  const std::string root = fs::absolute(argv[1]).lexically_normal().string();
  // A path (has a '/') is a host directory; anything else names an EROFS layer of the runtime's store.
  const bool from_store = std::string(argv[2]).find('/') == std::string::npos;
  const std::string base_layer = from_store ? argv[2] : fs::absolute(argv[2]).lexically_normal().string();
  if (!from_store && !fs::exists(fs::path(base_layer) / "bin/sh")) {
    std::fprintf(stderr, "rollout: %s has no bin/sh: LAYER_DIR must be a root filesystem (busybox will do)\n",
                 base_layer.c_str());
    return 2;
  }
  const auto start = Clock::now();
  try {
    section("1. runtime");
    auto t0 = Clock::now();
    sandlet::Runtime rt = sandlet::Runtime::open(root);
    say("  sandlet %s opened at %s in %.1f ms (no daemon: a library in this process)", sandlet::version(),
        rt.root().c_str(), ms_since(t0));
    // The demo lists, destroys and counts everything under ROOT: it must not meet anyone else's sandboxes.
    if (const size_t others = rt.list().size(); others != 0) {
      std::fprintf(stderr, "rollout: %s already holds %zu sandbox(es); use an empty runtime root\n", root.c_str(),
                   others);
      return 2;
    }

    section("2. environment = base layer + task layer");
    TempDir host;
    const fs::path task_layer = host.path / "task-layer";
    make_task_layer(task_layer);
    const fs::path secret = host.path / "answers.txt";  // "leftover answers" an agent must not see
    write_host_file(secret, "add() { echo $(( $1 + $2 )); }\n", fs::perms(0644));
    const std::vector<std::string> layers = {base_layer, task_layer.string()};
    say("  base layer  %s (busybox%s)", base_layer.c_str(),
        from_store ? ": a content-addressed EROFS layer, mounted once and shared by every episode" : "");
    say("  task layer  %s (/work/repo: buggy calc.sh, test.sh)", task_layer.c_str());
    say("  answer key  %s (host only: no agent may see it)", secret.c_str());
    show_backends(rt, layers);

    section("3. burst: 8 episodes created concurrently (create_async)");
    auto episodes = create_episodes(rt, layers);

    section("4. one agent turn per episode (write_file + exec_async); rewards graded by FnCall");
    auto rewards = run_turn(rt, layers, episodes);

    section("5. misbehaving agents (episodes 4-7, after their turn)");
    show_safety(episodes, secret);

    section("6. the trainer is preempted: its job waits paused; the rollout continues");
    show_preemption(rt, episodes, layers, root);

    section("7. an abandoned episode expires; its logs are kept (on_expiry keep_logs)");
    show_abandoned(rt, layers);

    section("8. clean-up by label");
    clean_up(rt, root);

    section("summary");
    double sum = 0;
    int solved = 0;
    for (double r : rewards) {
      sum += r;
      solved += r == 1.0;
    }
    say("  %d episodes, %d solved, mean reward %.3f, total %.2f s", kEpisodes, solved, sum / kEpisodes,
        ms_since(start) / 1000);
    say("  not yet available in this build: the fullvm backend");
    return 0;
  } catch (const sandlet::Error& e) {
    std::fprintf(stdout, "\nrollout: FAILED [%s] %s\n", e.code_name(), e.what());
  } catch (const DemoFailure& e) {
    std::fprintf(stdout, "\nrollout: FAILED (unexpected behaviour) %s\n", e.what());
  } catch (const std::exception& e) {
    std::fprintf(stdout, "\nrollout: FAILED %s\n", e.what());
  }
  return 1;
}
