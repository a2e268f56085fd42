// snapshot: latency and source-frozen time of sandlet_sandbox_snapshot for M MB of changes (--workspace-mb,
//   default 100: M/4 files of 4 MiB of random data plus 256 files of 4 KiB), each iteration a fresh sandbox.
//   Peers, on the same files in a host tmpfs directory (where a container's writable layer lives): `cp -a`
//   of the directory and `tar -cf` of it, both onto the runtime root's disk, as the store's layers are.
// fork: sandlet_sandbox_fork of a sandbox with M MB of changes into N children (--sandboxes, default 64),
//   total and until every child has run /bin/true; peers: per child `cp -a` of the changes + a new sandbox
//   on [rootfs, copy], and `tar -cf` once + per child `tar -xf` + a new sandbox (at concurrency = cores).
#include "capi.hpp"
#include "proc.hpp"
#include "report.hpp"
#include "rootfs.hpp"
#include "runner.hpp"
#include "scenarios.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <random>

namespace bench {
namespace fs = std::filesystem;
namespace json = boost::json;

namespace {
constexpr std::uint64_t kMiB = 1ull << 20;

unsigned cores() { return std::max(1L, sysconf(_SC_NPROCESSORS_ONLN)); }

// The script that writes the changes inside a sandbox (busybox sh).
std::string change_script(unsigned mb) {
  return "set -e; mkdir -p /diff/small; i=0; while [ $i -lt " + std::to_string(mb / 4) +
         " ]; do head -c 4194304 /dev/urandom > /diff/big$i; i=$((i+1)); done; " +
         (mb % 4 ? "head -c " + std::to_string((mb % 4) * kMiB) + " /dev/urandom > /diff/rest; " : std::string()) +
         "j=0; while [ $j -lt 256 ]; do head -c 4096 /dev/urandom > /diff/small/f$j; j=$((j+1)); done";
}

// The same shape of files in a host directory (the peers' input).
void write_host_changes(const fs::path& dir, unsigned mb) {
  std::mt19937_64 rng(42);
  auto write = [&](const fs::path& p, std::uint64_t size) {
    std::string buf(size, '\0');
    for (std::size_t i = 0; i + 8 <= size; i += 8) {
      const std::uint64_t v = rng();
      std::memcpy(buf.data() + i, &v, 8);
    }
    std::ofstream(p, std::ios::binary).write(buf.data(), static_cast<std::streamsize>(buf.size()));
  };
  fs::create_directories(dir / "diff" / "small");
  for (unsigned i = 0; i < mb / 4; ++i) write(dir / "diff" / ("big" + std::to_string(i)), 4 * kMiB);
  if (mb % 4) write(dir / "diff" / "rest", (mb % 4) * kMiB);
  for (int j = 0; j < 256; ++j) write(dir / "diff" / "small" / ("f" + std::to_string(j)), 4096);
}

struct SnapshotTimes {
  std::uint64_t total_ns = 0, frozen_ns = 0;
  std::string digest;
};

SnapshotTimes parse_snapshot(char* res) {
  const json::value v = json::parse(res);
  sandlet_free(res);
  SnapshotTimes t;
  t.total_ns = v.as_object().at("total_ns").to_number<std::uint64_t>();
  t.frozen_ns = v.as_object().at("frozen_ns").to_number<std::uint64_t>();
  t.digest = json::value_to<std::string>(v.as_object().at("layer").as_object().at("digest"));
  return t;
}

struct ScratchDir {
  fs::path path;
  explicit ScratchDir(const fs::path& under, const std::string& name) : path(under / name) { fs::create_directories(path); }
  ~ScratchDir() {
    if (!remove_tree_one_fs(path)) std::fprintf(stderr, "sandlet-bench: warning: could not remove all of %s\n", path.c_str());
  }
};

// The base layer as a store layer (restores and forks stack store layers; the parent runs on it too).
std::string base_layer(sandlet_runtime_t* rt, const fs::path& rootfs) {
  char* res = nullptr;
  sandlet_layer_import_options_t o = SANDLET_LAYER_IMPORT_OPTIONS_INIT;
  o.name = "bench-base";  // named: the layer gc between iterations keeps it
  check(sandlet_layer_import(rt, rootfs.c_str(), &o, &res), "sandlet_layer_import(rootfs)");
  const json::value v = json::parse(res);
  sandlet_free(res);
  return json::value_to<std::string>(v.as_object().at("layers").as_array().at(0).as_object().at("digest"));
}

struct StoreSpec {
  sandlet_spec_t* spec = nullptr;
  explicit StoreSpec(const std::vector<std::string>& layers) {
    check(sandlet_spec_new(&spec), "sandlet_spec_new");
    for (const auto& l : layers) check(sandlet_spec_add_layer(spec, l.c_str()), "sandlet_spec_add_layer(" + l + ")");
  }
  ~StoreSpec() { sandlet_spec_delete(spec); }
};

Sandbox make_parent(sandlet_runtime_t* rt, const std::string& base, unsigned mb) {
  StoreSpec spec({base});
  sandlet_sandbox_t* sb = nullptr;
  check(sandlet_sandbox_create(rt, spec.spec, &sb), "sandlet_sandbox_create");
  Sandbox parent(sb);
  SandboxRegistry::instance().add(sandlet_sandbox_id(sb));
  const std::string script = change_script(mb);
  exec_ok(parent, {"/bin/sh", "-c", script.c_str()});
  return parent;
}

// A peer's summary and how many times slower than ours it was at the median.
json::object peer_entry(const std::string& name, const std::string& command, const Summary& s, const Summary& ours) {
  json::object p = peer_json(name, command, s, 0);
  p.erase("throughput_per_s");
  p["p50_over_ours"] = ours.p50_ms > 0 ? round3(s.p50_ms / ours.p50_ms) : 0;
  return p;
}

}  // namespace

json::object scenario_snapshot(const Context& ctx) {
  const unsigned mb = ctx.opt.workspace_mb ? ctx.opt.workspace_mb : 100;
  const std::size_t n = iterations_of(ctx);
  Runtime rt(ctx.root, ctx.opt.workers, ctx.opt.warm_pool);
  const std::string base = base_layer(rt.get(), ctx.rootfs);
  std::vector<std::uint64_t> total, frozen;
  for (std::size_t i = 0; i < n; ++i) {
    throw_if_stopped();
    Sandbox parent = make_parent(rt.get(), base, mb);
    char* res = nullptr;
    sandlet_snapshot_options_t o = SANDLET_SNAPSHOT_OPTIONS_INIT;
    check(sandlet_sandbox_snapshot(parent.get(), &o, &res), "sandlet_sandbox_snapshot");
    SnapshotTimes t = parse_snapshot(res);
    total.push_back(t.total_ns);
    frozen.push_back(t.frozen_ns);
    parent.destroy();
    char* gc = nullptr;
    check(sandlet_layer_gc(rt.get(), &gc), "sandlet_layer_gc");  // each snapshot is new data, as in use
    sandlet_free(gc);
  }
  json::object out;
  out["diff_mb"] = mb;
  json::object t;
  put_summary(t, summarize(total));
  out["snapshot"] = t;
  json::object f;
  put_summary(f, summarize(frozen));
  out["frozen"] = f;
  if (ctx.opt.peer) {
    ScratchDir src("/dev/shm", "sandlet-bench-snapshot-src-" + std::to_string(getpid()));
    write_host_changes(src.path, mb);
    ScratchDir dst(ctx.root, "peer-copies");
    std::vector<std::uint64_t> cp, tar;
    for (std::size_t i = 0; i < n; ++i) {
      const fs::path c = dst.path / ("cp" + std::to_string(i));
      // Flushed like the store's files (our side fsyncs the blob): the sync is part of the peer's time.
      cp.push_back(Command({"/bin/cp", "-a", (src.path / "diff").string(), c.string()}).run_ok() +
                   Command({"/bin/sync", "-f", c.string()}).run_ok());
      tar.push_back(Command({"/usr/bin/tar", "-cf", (dst.path / ("t" + std::to_string(i) + ".tar")).string(), "-C",
                             src.path.string(), "diff"})
                        .run_ok());
      fs::remove_all(c);
      fs::remove(dst.path / ("t" + std::to_string(i) + ".tar"));
    }
    const Summary ours = summarize(total), cps = summarize(cp), tars = summarize(tar);
    json::object peers;
    peers["cp_a"] = peer_entry("cp -a", "cp -a DIFF DIR; sync -f DIR (host tmpfs -> runtime root's disk)", cps, ours);
    peers["tar"] = peer_entry("tar -cf", "tar -cf FILE -C DIR diff (onto the runtime root's disk)", tars, ours);
    out["peers"] = peers;
  }
  return out;
}

json::object scenario_fork(const Context& ctx) {
  const unsigned mb = ctx.opt.workspace_mb ? ctx.opt.workspace_mb : 100;
  const std::size_t n = ctx.opt.sandboxes ? ctx.opt.sandboxes : 64;
  const std::size_t rounds = iterations_of(ctx);
  const unsigned c = cores();
  Runtime rt(ctx.root, ctx.opt.workers, ctx.opt.warm_pool);
  const std::string base = base_layer(rt.get(), ctx.rootfs);
  std::vector<std::uint64_t> fork_ns, ready_ns, snap_ns, per_child_ns;
  for (std::size_t r = 0; r < rounds; ++r) {
    throw_if_stopped();
    Sandbox parent = make_parent(rt.get(), base, mb);
    sandlet_fork_options_t o = SANDLET_FORK_OPTIONS_INIT;
    o.n = n;
    sandlet_fork_result_t* res = nullptr;
    const auto t0 = now_ns();
    check(sandlet_sandbox_fork(parent.get(), &o, &res), "sandlet_sandbox_fork");
    const auto t1 = now_ns();
    std::vector<Sandbox> children;
    for (std::size_t i = 0; i < n; ++i) {
      if (const sandlet_error_t* e = sandlet_fork_result_error(res, i))
        throw BenchError(std::string("fork child: ") + sandlet_error_message(e));
      children.emplace_back(sandlet_fork_result_take(res, i));
      SandboxRegistry::instance().add(sandlet_sandbox_id(children.back().get()));
    }
    char* snap_json = strdup(sandlet_fork_result_snapshot_json(res));
    const SnapshotTimes st = parse_snapshot(snap_json);
    sandlet_fork_result_delete(res);
    run_parallel(n, c, [&](std::size_t i, unsigned) { exec_ok(children[i], {"/bin/true"}); });
    const auto t2 = now_ns();
    fork_ns.push_back(t1 - t0);
    ready_ns.push_back(t2 - t0);
    snap_ns.push_back(st.total_ns);
    per_child_ns.push_back((t1 - t0 - std::min<std::uint64_t>(st.total_ns, t1 - t0)) / n);
    run_parallel(n, c, [&](std::size_t i, unsigned) { children[i].destroy(); });
    parent.destroy();
    char* gc = nullptr;
    check(sandlet_layer_gc(rt.get(), &gc), "sandlet_layer_gc");
    sandlet_free(gc);
  }
  json::object out;
  out["diff_mb"] = mb;
  out["children"] = n;
  auto put = [&](const char* key, const std::vector<std::uint64_t>& v) {
    json::object o;
    put_summary(o, summarize(v));
    out[key] = o;
  };
  put("fork", fork_ns);
  put("all_ran", ready_ns);
  put("snapshot", snap_ns);
  put("per_child_beyond_snapshot", per_child_ns);
  if (ctx.opt.peer) {
    ScratchDir src("/dev/shm", "sandlet-bench-fork-src-" + std::to_string(getpid()));
    write_host_changes(src.path, mb);
    ScratchDir work(ctx.root, "peer-children");
    std::vector<std::uint64_t> cp_ns, tar_ns;
    for (std::size_t r = 0; r < rounds; ++r) {
      for (int way = 0; way < 2; ++way) {
        std::vector<Sandbox> sbs(n);
        const fs::path tarball = work.path / "changes.tar";
        const auto t0 = now_ns();
        if (way == 1) Command({"/usr/bin/tar", "-cf", tarball.string(), "-C", src.path.string(), "diff"}).run_ok();
        run_parallel(n, c, [&](std::size_t i, unsigned) {
          const fs::path d = work.path / ("child" + std::to_string(i));
          if (way == 0) {
            fs::create_directories(d);
            Command({"/bin/cp", "-a", (src.path / "diff").string(), (d / "diff").string()}).run_ok();
          } else {
            fs::create_directories(d);
            Command({"/usr/bin/tar", "-xf", tarball.string(), "-C", d.string()}).run_ok();
          }
          Spec spec(ctx.rootfs);
          spec.add_layer(d);
          sbs[i] = create_sandbox(rt.get(), spec);
          exec_ok(sbs[i], {"/bin/true"});
        });
        (way == 0 ? cp_ns : tar_ns).push_back(now_ns() - t0);
        run_parallel(n, c, [&](std::size_t i, unsigned) { sbs[i].destroy(); });
        for (std::size_t i = 0; i < n; ++i) remove_tree_one_fs(work.path / ("child" + std::to_string(i)));
        fs::remove(tarball);
      }
    }
    const Summary ours = summarize(ready_ns), cps = summarize(cp_ns), tars = summarize(tar_ns);
    json::object peers;
    peers["cp_a"] = peer_entry("cp -a per child", "per child: cp -a DIFF DIR; a sandbox on [rootfs, DIR]; /bin/true", cps, ours);
    peers["tar"] = peer_entry("tar + untar per child",
                              "tar -cf once; per child: tar -xf; a sandbox on [rootfs, DIR]; /bin/true", tars, ours);
    out["peers"] = peers;
  }
  return out;
}

}  // namespace bench
