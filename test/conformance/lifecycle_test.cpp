// Lifecycle every backend must give: create, destroy, failed creates, labels and list filters, owned and
// detached lifetimes, reattach after the owner process died, gc after the owner was killed mid-create.
#include <csignal>
#include <filesystem>
#include <random>
#include <set>
#include <thread>

#include "conformance/conformance.hpp"
#include "support/sweep_root.hpp"

using namespace conformance;

namespace {

bool listed(sandlet::Runtime& rt, const std::string& id, const std::string& filter = std::string()) {
  for (const auto& info : rt.list(filter))
    if (info.id == id) return true;
  return false;
}

bool exec_works(sandlet::Sandbox& sb) {
  try {
    return sb.exec({"true"}).exit_code == 0;
  } catch (const sandlet::Error&) {
    return false;
  }
}

}  // namespace

TEST_CASE("create gives a running sandbox of the backend asked for; destroy removes it", "[conformance][lifecycle]") {
  Fixture f;
  auto sb = f.create(Fixture::spec().hostname("conformance"));
  const std::string id = sb.id();
  REQUIRE_FALSE(id.empty());
  CHECK(out(sb, "hostname") == "conformance\n");
  const std::string info = sb.info_json();
  INFO(info);
  CHECK(contains(info, "\"backend\":\"" + backend() + "\""));
  CHECK(contains(info, "\"id\":\"" + id + "\""));
  CHECK(listed(f.rt(), id));
  auto again = f.rt().attach(id);  // a second handle on the same sandbox
  CHECK(out(again, "echo same") == "same\n");
  sb.destroy();
  CHECK_FALSE(listed(f.rt(), id));
  CHECK(error_of([&] { sb.exec({"true"}); }).code() == SANDLET_FAILED_PRECONDITION);
  CHECK(error_of([&] { again.exec({"true"}); }).code() != SANDLET_OK);
  CHECK(error_of([&] { f.rt().attach(id); }).code() == SANDLET_NOT_FOUND);
  again.close();
  f.check_no_leaks();
}

TEST_CASE("a create that fails names the field and leaves nothing behind", "[conformance][lifecycle]") {
  Fixture f;
  auto e = error_of([&] { f.create(sandlet::Spec().backend(backend()).layer("/no/such/layer/dir")); });
  CHECK(e.code() == SANDLET_INVALID_ARGUMENT);
  CHECK(contains(e.what(), "layers[0]"));
  e = error_of([&] { f.create(Fixture::spec().workdir("relative")); });
  CHECK(e.code() == SANDLET_INVALID_ARGUMENT);
  CHECK(contains(e.what(), "workdir"));
  e = error_of([&] { f.create(sandlet::Spec().backend("no-such-backend").layer(rootfs())); });
  CHECK(e.code() == SANDLET_INVALID_ARGUMENT);
  CHECK(contains(e.what(), "backend"));
  CHECK(f.rt().list().empty());
  f.check_no_leaks();
  // The runtime is as good as new.
  auto sb = f.create();
  CHECK(exec_works(sb));
  f.check_no_leaks();
}

TEST_CASE("labels are kept and list filters on them", "[conformance][lifecycle][labels]") {
  Fixture f;
  auto a = f.create(Fixture::spec().label("task", "t1").label("dataset", "d7"));
  auto b = f.create(Fixture::spec().label("task", "t2"));
  auto c = f.create();
  CHECK(f.rt().list().size() == 3);
  auto t1 = f.rt().list("task=t1");
  REQUIRE(t1.size() == 1);
  CHECK(t1[0].id == a.id());
  CHECK(contains(t1[0].json, "\"dataset\":\"d7\""));
  CHECK(f.rt().list("task=t2").size() == 1);
  CHECK(f.rt().list("task=t2")[0].id == b.id());
  CHECK(f.rt().list("dataset=d7").size() == 1);
  CHECK(f.rt().list("task=none").empty());
  CHECK(f.rt().list("nosuchkey=t1").empty());
  auto e = error_of([&] { f.rt().list("no-equals-sign"); });
  CHECK(e.code() == SANDLET_INVALID_ARGUMENT);
  e = error_of([&] { Fixture::spec().label("", "v"); });
  CHECK(e.code() == SANDLET_INVALID_ARGUMENT);
  CHECK(contains(e.what(), "label"));
  b.destroy();
  CHECK(f.rt().list("task=t2").empty());
  f.check_no_leaks();
}

TEST_CASE("owned sandboxes end with their runtime; detached ones outlive it and can be attached", "[conformance][lifecycle]") {
  Fixture f;
  std::string owned_id, detached_id;
  {
    auto rt = sandlet::Runtime::open(f.root());
    auto owned = rt.create(Fixture::spec());
    auto detached = rt.create(Fixture::spec().lifetime("detached"));
    owned_id = owned.id();
    detached_id = detached.id();
    f.track(owned_id);
    f.track(detached_id);
    detached.write_file("/tmp/state", "kept");
  }  // handles and runtime closed
  CHECK_FALSE(listed(f.rt(), owned_id));
  CHECK(error_of([&] { f.rt().attach(owned_id); }).code() == SANDLET_NOT_FOUND);
  auto sb = f.rt().attach(detached_id);
  CHECK(sb.read_file("/tmp/state") == "kept");
  sb.destroy();
  f.check_no_leaks();
}

TEST_CASE("a detached sandbox survives its owner's kill -9 and is reattached with its state", "[conformance][lifecycle][crash]") {
  Fixture f;
  Owner owner({"create", f.root(), "detached"});
  const std::string id = owner.line();
  REQUIRE(id.size() >= 8);
  f.track(id);
  {
    auto sb = f.rt().attach(id);
    out(sb, "echo before > /tmp/state");
  }
  owner.kill9();
  f.rt().gc();  // must not touch a live detached sandbox
  auto sb = f.rt().attach(id);
  CHECK(sb.read_file("/tmp/state") == "before\n");
  CHECK(out(sb, "echo after") == "after\n");
  sb.destroy();
  f.check_no_leaks();
}

TEST_CASE("an owned sandbox dies with its owner's kill -9; gc removes what is left", "[conformance][lifecycle][crash]") {
  Fixture f;
  Owner owner({"create", f.root(), "owned"});
  const std::string id = owner.line();
  REQUIRE(id.size() >= 8);
  f.track(id);
  {
    auto sb = f.rt().attach(id);
    CHECK(exec_works(sb));
  }
  owner.kill9();
  CHECK(wait_until([&] { return host_pids_in_cgroup(id).empty(); }, 10));
  f.rt().gc();
  CHECK_FALSE(listed(f.rt(), id));
  f.check_no_leaks();
}

TEST_CASE("an exec dies with the process that started it; the sandbox stays", "[conformance][lifecycle][crash]") {
  Fixture f;
  auto sb = f.create(Fixture::spec().lifetime("detached"));
  Sleeper s;
  Owner owner({"exec", f.root(), sb.id(), s.seconds});
  REQUIRE(owner.line() == "attached");
  REQUIRE(wait_until([&] { return s.inside(sb) == 1; }, 10));
  owner.kill9();
  CHECK(wait_until([&] { return s.inside(sb) == 0; }, 10));
  CHECK(wait_until([&] { return s.on_host() == 0; }, 10));
  CHECK(exec_works(sb));
  sb.destroy();
  f.check_no_leaks();
}

// The owner is killed at spread-out moments of a create loop: each kill lands somewhere inside or between
// creates (conformance-create-steps kills it at each named step instead).
TEST_CASE("gc after the owner was killed -9 in the middle of creates leaves nothing", "[conformance][lifecycle][crash][gc]") {
  Fixture f;
  std::mt19937 rng(12345);
  for (int round = 0; round < 6; ++round) {
    Owner owner({"create-loop", f.root()});
    REQUIRE_FALSE(owner.line().empty());  // one create done: the next ones run at full speed
    std::set<std::string> seen;
    const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(rng() % 20000);
    do {  // every sandbox directory that appears (the ones being created included)
      std::error_code ec;
      for (const auto& e : std::filesystem::directory_iterator(f.root() + "/sandboxes", ec))
        seen.insert(e.path().filename());
    } while (std::chrono::steady_clock::now() < until);
    owner.kill9();
    for (const auto& name : seen) f.track(test_support::sandbox_id_of(name));
  }
  f.rt().gc();
  CHECK(f.rt().list().empty());
  f.check_no_leaks();
  auto sb = f.create();  // and the root still works
  CHECK(exec_works(sb));
  f.check_no_leaks();
}
