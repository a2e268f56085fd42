// sandlet: an agent trajectory forked at step k into children that diverge (C++, sandlet.hpp only).
//
//   example-fork-cpp ROOT LAYER
//
// ROOT is the runtime's state directory (a throw-away one is best); LAYER is a root filesystem with
// busybox: a directory or the name/digest of a layer in ROOT's store (scripts/demo.sh passes "busybox").
// Needs root. One sandbox runs K steps of a scripted agent on a tiny repository whose add() subtracts;
// then Sandbox::fork makes one snapshot and N children on it. Each child applies a different patch (chosen
// by its fork index), runs the tests and gets its own reward; then every sandbox reports what it sees, to
// show that neither the parent nor a sibling sees another's changes. ROOT must hold no sandboxes yet.
// Exit status: 0 when everything behaved as expected, 1 otherwise, 2 on usage errors.
#include <sandlet/sandlet.hpp>

#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}
double ms(const std::string& ns) { return ns.empty() ? 0.0 : std::stod(ns) / 1e6; }

// Flushed at once so the output interleaves correctly with the shell script's.
[[gnu::format(printf, 1, 2)]] void say(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  std::vprintf(fmt, ap);
  va_end(ap);
  std::fputc('\n', stdout);
  std::fflush(stdout);
}

struct DemoFailure : std::runtime_error {
  using std::runtime_error::runtime_error;
};
void expect(bool ok, const std::string& what) {
  if (!ok) throw DemoFailure(what);
}

// A string or number field of a JSON object, as text ("" when absent): enough for the fields read here,
// whose names occur once in the results they are read from.
std::string json_field(const std::string& json, const std::string& name) {
  const std::string key = "\"" + name + "\":";
  size_t at = json.find(key);
  if (at == std::string::npos) return "";
  at += key.size();
  if (json[at] == '"') return json.substr(at + 1, json.find('"', at + 1) - at - 1);
  return json.substr(at, json.find_first_of(",}", at) - at);
}

// The value of a "key=value" line of a command's output ("" when absent).
std::string value_of(const std::string& out, const std::string& key) {
  const std::string prefix = key + "=";
  for (size_t at = 0; at < out.size();) {
    size_t end = out.find('\n', at);
    if (end == std::string::npos) end = out.size();
    if (out.compare(at, prefix.size(), prefix) == 0) return out.substr(at + prefix.size(), end - at - prefix.size());
    at = end + 1;
  }
  return "";
}

// Runs a shell script that must succeed; returns its stdout.
std::string run(sandlet::Sandbox& sb, const std::string& script) {
  sandlet::ExecOptions o({"sh", "-c", script});
  o.timeout_s = 10;
  const auto r = sb.exec(o);
  expect(r.exit_code == 0, "`" + script + "` failed in " + sb.id() + ": " + r.stderr_data);
  return r.stdout_data;
}

// ---- the task and the policy ----------------------------------------------------------------------

constexpr int kSteps = 3;     // k: the step the trajectory is forked at
constexpr size_t kChildren = 4;

std::string calc_with(const std::string& body) { return "# add A B: prints A + B\nadd() {\n  " + body + "\n}\n"; }

constexpr char kBuggy[] = "echo $(( $1 - $2 ))";
constexpr char kTests[] =
    "#!/bin/sh\n"
    ". ./calc.sh\n"
    "pass=0; total=0\n"
    "check() { total=$((total + 1)); [ \"$(add \"$1\" \"$2\")\" = \"$3\" ] && pass=$((pass + 1)); }\n"
    "check 1 2 3; check 0 0 0; check -4 10 6; check 20 22 42\n"
    "echo \"passed $pass/$total\"\n";

// What child i tries at step k+1: one patch of add() each (the sampled continuations of one prefix).
struct Patch {
  const char* name;
  const char* body;
};
constexpr Patch kPatches[kChildren] = {
    {"fix: a + b", "echo $(( $1 + $2 ))"},
    {"wrong: a * b", "echo $(( $1 * $2 ))"},
    {"fix: expr a + b", "expr \"$1\" + \"$2\""},
    {"wrong: a + b + 1", "echo $(( $1 + $2 + 1 ))"},
};

// "passed 3/4" -> reward 0.75.
double reward_of(const std::string& out, std::string* tests) {
  int pass = 0, total = 0;
  const size_t at = out.rfind("passed ");
  if (at == std::string::npos || std::sscanf(out.c_str() + at, "passed %d/%d", &pass, &total) != 2 || total == 0)
    throw DemoFailure("no test verdict in: " + out);
  *tests = std::to_string(pass) + "/" + std::to_string(total);
  return static_cast<double>(pass) / total;
}

// Runs the tests and appends the step to the agent's history (both are part of the sandbox's state).
double run_tests(sandlet::Sandbox& sb, int step, const std::string& what, std::string* tests) {
  return reward_of(run(sb, "./test.sh; echo 'step " + std::to_string(step) + ": " + what + "' >> /work/agent/history"),
                   tests);
}

// ---- the steps ------------------------------------------------------------------------------------

// Steps 1..k in one sandbox: check out the repository, run the tests, write down a plan.
void trajectory(sandlet::Sandbox& agent) {
  agent.write_file("/work/repo/calc.sh", calc_with(kBuggy));
  agent.write_file("/work/repo/test.sh", kTests, 0755);
  run(agent, "mkdir -p /work/agent && echo 'step 1: checked out the repository' > /work/agent/history");
  say("  step 1  checked out /work/repo (calc.sh: add() subtracts; test.sh: 4 tests)");
  std::string tests;
  const double r = run_tests(agent, 2, "ran the tests", &tests);
  say("  step 2  ran the tests: %s passed, reward %.2f", tests.c_str(), r);
  agent.write_file("/work/agent/plan", "add() subtracts: rewrite its body\n");
  run(agent, "echo 'step 3: wrote a plan' >> /work/agent/history");
  say("  step 3  wrote /work/agent/plan: \"add() subtracts: rewrite its body\"");
}

// Step k+1 in every child: its own patch, its own test run and reward.
void diverge(std::vector<sandlet::Sandbox>& children, const std::string& snapshot) {
  say("  child  id            hostname  SANDLET_SEED      patch              tests  reward");
  for (auto& c : children) {
    const std::string info = c.info_json();
    const std::string index = json_field(info, "sandlet.fork_index");
    expect(json_field(info, "sandlet.snapshot").find(snapshot) != std::string::npos,
           "child " + index + " is not labelled with the fork's snapshot " + snapshot);
    const Patch& p = kPatches[std::stoul(index)];
    c.write_file("/work/repo/calc.sh", calc_with(p.body));
    c.write_file("/work/repo/branch-" + index, std::string(p.name) + "\n");
    std::string tests;
    const double r = run_tests(c, kSteps + 1, p.name, &tests);
    const std::string who = run(c, "echo host=$(hostname); echo seed=$SANDLET_SEED");
    expect(!value_of(who, "seed").empty(), "child " + index + " has no SANDLET_SEED");
    say("  %-5s  %s  %-8s  %-16s  %-17s  %-5s  %.2f", index.c_str(), c.id().c_str(), value_of(who, "host").c_str(),
        value_of(who, "seed").c_str(), p.name, tests.c_str(), r);
  }
}

// What each sandbox sees afterwards: its own add(), which branch files, whether the parent's later file.
void show_isolation(sandlet::Sandbox& parent, std::vector<sandlet::Sandbox>& children) {
  const std::string probe =
      "echo host=$(hostname)\n"
      "echo \"add=$(sed -n 3p calc.sh | sed 's/^ *//')\"\n"  // quoted: a body may hold a '*'
      "echo branches=$(ls | grep '^branch-' | tr '\\n' ' ')\n"
      "[ -e after-fork ] && echo after=yes || echo after=no\n"
      "echo steps=$(wc -l < /work/agent/history)\n"
      "echo \"last=$(tail -n 1 /work/agent/history)\"\n";
  say("  sandbox   hostname  add() body               branch files  parent's after-fork  history");
  auto report = [&](sandlet::Sandbox& sb, const std::string& who, const std::string& own_branch) {
    const std::string out = run(sb, probe);
    std::string branches = value_of(out, "branches");
    while (!branches.empty() && branches.back() == ' ') branches.pop_back();
    const bool is_parent = own_branch.empty();
    expect(branches == own_branch, who + " sees branch files '" + branches + "', expected '" + own_branch + "'");
    expect(value_of(out, "after") == (is_parent ? "yes" : "no"), who + ": the parent's after-fork file is misplaced");
    say("  %-8s  %-8s  %-23s  %-12s  %-19s  %s steps, last \"%s\"", who.c_str(), value_of(out, "host").c_str(),
        value_of(out, "add").c_str(), branches.empty() ? "none" : branches.c_str(), value_of(out, "after").c_str(),
        value_of(out, "steps").c_str(), value_of(out, "last").c_str());
  };
  report(parent, "parent", "");
  for (size_t i = 0; i < children.size(); ++i)
    report(children[i], "child " + std::to_string(i), "branch-" + std::to_string(i));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s ROOT LAYER   (ROOT: runtime state dir; LAYER: busybox root fs directory, or "
                 "the name of a layer in ROOT's store)\n", argv[0]);
    return 2;
  }
  const std::string root = fs::absolute(argv[1]).lexically_normal().string();
  const std::string layer = std::string(argv[2]).find('/') == std::string::npos
                                ? argv[2]
                                : fs::absolute(argv[2]).lexically_normal().string();
  try {
    sandlet::Runtime rt = sandlet::Runtime::open(root);
    if (const size_t others = rt.list().size(); others != 0) {
      std::fprintf(stderr, "fork: %s already holds %zu sandbox(es); use an empty runtime root\n", root.c_str(),
                   others);
      return 2;
    }
    sandlet::Spec spec;
    spec.layer(layer).hostname("agent").workdir("/work/repo").label("task", "fork-demo");
    spec.memory(64u << 20).pids(64).max_lifetime(60);  // a lost owner never leaves a zombie for long
    sandlet::Sandbox agent = rt.create(spec);
    say("  trajectory in sandbox %s (hostname agent), %d steps:", agent.id().c_str(), kSteps);
    trajectory(agent);

    sandlet::ForkOptions fo;
    fo.n = kChildren;
    fo.labels = {{"step", std::to_string(kSteps)}};
    const auto t0 = Clock::now();
    sandlet::ForkResult forked = agent.fork(fo);
    const double fork_ms = ms_since(t0);
    for (size_t i = 0; i < forked.children.size(); ++i)
      expect(forked.children[i].valid(), "child " + std::to_string(i) + " failed: " + forked.errors[i]);
    const std::string& snap = forked.snapshot_json;
    say("  fork at step %d: snapshot sha256:%.12s (%s entries, %s bytes; processes frozen %.2f ms, snapshot %.1f ms),",
        kSteps, json_field(snap, "digest").c_str(), json_field(snap, "entries").c_str(),
        json_field(snap, "bytes").c_str(), ms(json_field(snap, "frozen_ns")), ms(json_field(snap, "total_ns")));
    say("  then %zu children on it: fork total %.1f ms", kChildren, fork_ms);

    // The parent goes on too: its later change must stay its own.
    agent.write_file("/work/repo/after-fork", "written by the parent after the fork\n");
    run(agent, "echo 'step 4: kept going' >> /work/agent/history");

    say("  step %d, one different patch per child (chosen by its sandlet.fork_index label):", kSteps + 1);
    diverge(forked.children, json_field(snap, "digest"));
    say("  what each sandbox sees now:");
    show_isolation(agent, forked.children);

    // Owned children and parent: destroyed here, or with the runtime if this process dies first.
    for (auto& c : forked.children) c.destroy();
    agent.destroy();
    forked.children.clear();
    agent.close();
    rt.close();  // waits for the destroys' clean-up
    std::error_code ec;
    fs::directory_iterator it(fs::path(root) / "sandboxes", ec);
    expect(ec || it == fs::directory_iterator(), "sandboxes left in " + root + "/sandboxes");
    say("  parent and children destroyed; nothing left in %s/sandboxes", root.c_str());
    return 0;
  } catch (const sandlet::Error& e) {
    std::fprintf(stdout, "\nfork: FAILED [%s] %s\n", e.code_name(), e.what());
  } catch (const DemoFailure& e) {
    std::fprintf(stdout, "\nfork: FAILED (unexpected behaviour) %s\n", e.what());
  } catch (const std::exception& e) {
    std::fprintf(stdout, "\nfork: FAILED %s\n", e.what());
  }
  return 1;
}
