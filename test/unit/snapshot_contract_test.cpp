// The snapshot contract (runtime/snapshot/snapshots.hpp): a snapshot is an artifact (its files as a `diff`
// layer, and a machine state only from a backend with kCapMachineState), a restore makes a sandbox from an
// artifact, and fork is one snapshot plus N restores on every backend that snapshots. What no backend of
// this version can do (a machine state) is refused before anything is made.
#include <catch2/catch.hpp>

#include <dirent.h>
#include <unistd.h>

#include <future>
#include <set>

#include "runtime/runtime.hpp"
#include "runtime/sandbox.hpp"
#include "unit_helpers.hpp"

namespace {

using namespace sandlet;
using unit::expect_error;
using unit::TempDir;

size_t entries_in(const std::string& dir) {
  size_t n = 0;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* e = ::readdir(d))
      if (std::string(e->d_name) != "." && std::string(e->d_name) != "..") ++n;
    ::closedir(d);
  }
  return n;
}

struct OpenRuntime {
  TempDir t{"snapcontract"};
  std::shared_ptr<Runtime> rt;
  OpenRuntime() {
    RuntimeOptions ro;
    ro.warm_pool = 0;
    rt = Runtime::open(t / "root", ro);
  }
  ~OpenRuntime() {
    try {
      rt->close();
      rt->layer_mounts().release_unused(nullptr, [] { return std::set<std::string>{}; });
    } catch (...) {
    }
  }
  std::shared_ptr<Sandbox> restore(const SnapshotArtifact& a, Spec spec) {
    std::promise<std::shared_ptr<Sandbox>> got;
    rt->restore_async(a, std::move(spec), [&](std::exception_ptr e, std::shared_ptr<Sandbox> sb) {
      if (e) got.set_exception(e);
      else got.set_value(std::move(sb));
    });
    return got.get_future().get();
  }
};

std::string out_of(Sandbox& sb, const std::string& script) {
  ExecParams p;
  p.argv = {"/bin/sh", "-c", script};
  ExecOutcome o = sb.exec(p);
  return o.stdout_data;
}

}  // namespace

TEST_CASE("snapshot contract: artifacts restore, forks are restores, machine state is refused cleanly", "[snapshot]") {
  OpenRuntime o;
  Runtime& rt = *o.rt;
  // A fork is one snapshot and N restores: the runtime sets kCapFork on every backend that snapshots.
  for (const BackendStatus& b : rt.backends()) {
    if (!b.available) continue;
    INFO(b.name);
    CHECK(bool(b.capabilities & kCapFork) == bool(b.capabilities & kCapSnapshot));
  }
  CHECK(rt.backend_capabilities("container") & kCapFork);

  image::ImportOptions io;
  const std::string base = rt.layer_store().import(SANDLET_TEST_ROOTFS, io).layers.at(0).digest;
  Spec spec;
  spec.layers = {base};
  auto parent = rt.create(spec);
  out_of(*parent, "echo step-1 > /state");

  SECTION("a machine state is asked of a backend that keeps none: refused, nothing kept") {
    SnapshotOptions so;
    so.machine = true;
    Error e = expect_error([&] { parent->snapshot(so); });
    CHECK(e.code() == Code::kUnimplemented);
    CHECK(std::string(e.what()).find("'machine'") != std::string::npos);
    CHECK(::access((rt.root() + "/machines").c_str(), F_OK) != 0);  // nothing was made for it
    ForkOptions fo;
    fo.machine = true;
    CHECK(expect_error([&] { parent->fork(fo); }).code() == Code::kUnimplemented);
  }

  SECTION("restore: the artifact's files; a machine state only by its own backend") {
    SnapshotResult snap = parent->snapshot({});
    CHECK(!snap.machine);
    SnapshotArtifact artifact = snap.artifact();
    Spec child_spec;
    child_spec.layers = {"/nonexistent"};  // replaced by the artifact's chain
    auto child = o.restore(artifact, child_spec);
    CHECK(out_of(*child, "cat /state") == "step-1\n");
    child->destroy();

    const size_t before = entries_in(rt.root() + "/sandboxes");
    SnapshotArtifact with_machine = artifact;
    with_machine.machine = MachineState{};
    with_machine.machine->backend = "container";
    Error e = expect_error([&] { o.restore(with_machine, Spec()); });
    CHECK(e.code() == Code::kUnimplemented);  // the container backend resumes no machine state
    with_machine.machine->backend = "microvm";
    e = expect_error([&] { o.restore(with_machine, Spec()); });
    CHECK(e.code() == Code::kInvalidArgument);
    CHECK(std::string(e.what()).find("'backend'") != std::string::npos);
    with_machine.machine->format_version = 99;
    CHECK(expect_error([&] { o.restore(with_machine, Spec()); }).code() == Code::kInvalidArgument);
    SnapshotArtifact not_a_snapshot;
    not_a_snapshot.layer = rt.layer_store().inspect(base);
    CHECK(expect_error([&] { o.restore(not_a_snapshot, Spec()); }).code() == Code::kInvalidArgument);
    CHECK(entries_in(rt.root() + "/sandboxes") == before);  // nothing was made for a refused restore
  }

  SECTION("fork: children restored from one snapshot") {
    ForkOptions fo;
    fo.n = 2;
    ForkResult r = parent->fork(fo);
    REQUIRE(r.children.size() == 2);
    for (auto& c : r.children) {
      REQUIRE(c);
      CHECK(out_of(*c, "cat /state") == "step-1\n");
      c->destroy();
    }
  }
  parent->destroy();
}
