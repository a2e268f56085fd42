// The lifecycle state machine, gc's verdicts and the sandbox record's round trip (src/runtime).
#include <catch2/catch.hpp>

#include <boost/json.hpp>
#include <set>

#include "common/error.hpp"
#include "runtime/lifecycle.hpp"
#include "runtime/record.hpp"

using namespace sandlet;
using S = SandboxState;

TEST_CASE("lifecycle: the allowed transitions, and only those", "[lifecycle]") {
  const S all[] = {S::kCreating, S::kPooled, S::kRunning, S::kPaused, S::kEnding, S::kReclaimed};
  const std::set<std::pair<S, S>> allowed = {
      {S::kCreating, S::kRunning}, {S::kCreating, S::kEnding}, {S::kPooled, S::kRunning}, {S::kPooled, S::kEnding},
      {S::kRunning, S::kPaused},   {S::kRunning, S::kEnding},  {S::kPaused, S::kRunning}, {S::kPaused, S::kEnding},
      {S::kEnding, S::kReclaimed},
  };
  for (S from : all)
    for (S to : all) {
      INFO(state_name(from) << " -> " << state_name(to));
      CHECK(transition_allowed(from, to) == (allowed.count({from, to}) > 0));
    }
  try {
    check_transition("abc", S::kEnding, S::kRunning);
    FAIL("ending -> running was allowed");
  } catch (const Error& e) {
    CHECK(e.code() == Code::kFailedPrecondition);
    CHECK(std::string(e.what()) == "sandbox abc is ending: it cannot become running");
  }
  for (S s : all) CHECK(state_from_name(state_name(s)) == s);
  CHECK_FALSE(state_from_name("frozen"));
}

TEST_CASE("lifecycle: what gc does about each state after a crash", "[lifecycle][gc]") {
  auto facts = [](S state) {
    GcFacts f{};
    f.state = state;
    f.owner_alive = true;
    f.sandbox_alive = true;
    f.now = 1000;
    return f;
  };
  // A half-made sandbox is its creator's while the creator lives.
  for (S s : {S::kCreating, S::kPooled}) {
    auto f = facts(s);
    CHECK(gc_verdict(f) == GcVerdict::kKeep);
    f.owner_alive = false;
    CHECK(gc_verdict(f) == GcVerdict::kEnd);
  }
  for (S s : {S::kRunning, S::kPaused}) {
    auto f = facts(s);
    CHECK(gc_verdict(f) == GcVerdict::kKeep);
    f.sandbox_alive = false;  // died: its owner cannot revive it
    CHECK(gc_verdict(f) == GcVerdict::kEnd);
    f = facts(s);
    f.owner_alive = false;  // owned, owner gone
    CHECK(gc_verdict(f) == GcVerdict::kEnd);
    f.detached = true;  // detached: lives on without its owner ...
    CHECK(gc_verdict(f) == GcVerdict::kKeep);
    f.deadline = 999;  // ... until its max lifetime
    CHECK(gc_verdict(f) == GcVerdict::kEnd);
  }
  // Retired (or recorded ending): a reclaim a crash interrupted, whoever owned it.
  auto f = facts(S::kRunning);
  f.retired = true;
  CHECK(gc_verdict(f) == GcVerdict::kFinish);
  CHECK(gc_verdict(facts(S::kEnding)) == GcVerdict::kFinish);
}

TEST_CASE("record: a round trip keeps every field, doubles exactly", "[record]") {
  SandboxRecord r;
  r.id = "0123456789ab";
  r.backend = "container";
  r.state = S::kPaused;
  r.spec.layers = {"/a", "/b"};
  r.spec.max_lifetime_s = 1530.9403218205155;  // one ulp off through Boost.JSON's own parser
  r.spec.labels["task"] = "t1";
  r.created_at = 1796122129.5886486;
  r.deadline = r.created_at + r.spec.max_lifetime_s;
  r.owner_pid = 4242;
  r.owner_start = 123456789;
  r.environment = "swe@3";
  r.layers = {{"base", std::string(64, 'a')}, {"/b", ""}};
  r.backend_state = boost::json::object{{"slot", 7}, {"agent_socket", "/x/agent.sock"}};
  SandboxRecord back = SandboxRecord::from_json(r.to_json());
  CHECK(back.to_json() == r.to_json());
  CHECK(back.spec.max_lifetime_s == r.spec.max_lifetime_s);
  CHECK(back.created_at == r.created_at);
  CHECK(back.state == S::kPaused);
  CHECK(back.layers.size() == 2);
  CHECK(back.backend_state.at("slot").to_number<int>() == 7);
  auto shown = boost::json::parse(public_record_json(r, "dead")).as_object();
  CHECK(shown.at("state").as_string() == "dead");
  CHECK(shown.at("backend_state").as_object().at("agent_socket").as_string() == "/x/agent.sock");
}

TEST_CASE("record: version 1 records are read, their container fields as the backend's section", "[record]") {
  const std::string v1 =
      R"({"version":1,"id":"0123456789ab","backend":"container","state":"running","spec":{"layers":["/a"]},)"
      R"("created_at":1,"deadline":2,"slot":3,"uid_base":268632064,"init_pid":99,"init_start":5,"owner_pid":1,)"
      R"("owner_start":2,"cgroup_v2":"/sys/fs/cgroup/sandlet/0123456789ab","cgroup_v1":[],"agent_socket":"/s"})";
  SandboxRecord r = SandboxRecord::from_json(v1);
  CHECK(r.state == S::kRunning);
  CHECK(r.backend_state.at("init_pid").to_number<int>() == 99);
  CHECK(r.backend_state.at("cgroup_v2").as_string() == "/sys/fs/cgroup/sandlet/0123456789ab");
  CHECK_FALSE(r.backend_state.contains("owner_pid"));
}

TEST_CASE("record: damaged records are DATA_LOSS", "[record]") {
  for (const char* text : {"", "{", "[]", R"({"version":3})", R"({"version":2,"id":"x"})",
                           R"({"version":2,"id":"a","backend":"container","state":"weird"})"}) {
    INFO(text);
    try {
      SandboxRecord::from_json(text);
      FAIL("accepted");
    } catch (const Error& e) {
      CHECK(e.code() == Code::kDataLoss);
    }
  }
}
