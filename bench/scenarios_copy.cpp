// copy: a task directory of M MiB (--workspace-mb, default 64: ~2,000 files in 100 directories, most a few
//   KiB, some up to 2 MiB, with symlinks) into a sandbox and back out, by sandlet_sandbox_copy_in /
//   copy_out. Peer, what a harness does without a directory copy (and what `docker cp` does under the hood):
//   a tar stream through an exec — in: `tar -cf` on the host, the archive as the stdin of `tar -xf - -C DST`
//   in the sandbox; out: `tar -cf - -C SRC .` in the sandbox, its stdout unpacked by `tar -xf` on the host.
//   Each iteration copies into a fresh path; what it made is removed untimed.
#include "capi.hpp"
#include "proc.hpp"
#include "report.hpp"
#include "rootfs.hpp"
#include "scenarios.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <random>

namespace bench {
namespace fs = std::filesystem;
namespace json = boost::json;

namespace {

constexpr std::uint64_t kMiB = 1ull << 20;

// Deterministic: the same tree for the same size.
std::uint64_t write_tree(const fs::path& root, unsigned mb) {
  std::mt19937_64 rng(7);
  std::uint64_t total = 0, files = 0;
  const std::uint64_t want = mb * kMiB;
  std::string buf;
  for (unsigned d = 0; total < want; d = (d + 1) % 100) {
    const fs::path dir = root / ("pkg" + std::to_string(d % 10)) / ("mod" + std::to_string(d));
    fs::create_directories(dir);
    const bool large = rng() % 20 == 0;
    const std::uint64_t size = large ? 256 * 1024 + rng() % (2 * kMiB) : 512 + rng() % (16 * 1024);
    buf.resize(size);
    for (std::size_t i = 0; i + 8 <= size; i += 8) {
      const std::uint64_t v = large ? rng() : 0x2020656c69662061ull ^ (rng() & 0x0f0f0f0f);  // text-like or random
      std::memcpy(buf.data() + i, &v, 8);
    }
    std::ofstream(dir / ("f" + std::to_string(files++) + ".txt"), std::ios::binary).write(buf.data(), size);
    if (files % 50 == 0) fs::create_symlink("../mod0", dir / ("link" + std::to_string(files)));
    total += size;
  }
  return files;
}

// An exec with `stdin` fed and stdout kept (no output cap); throws unless it exits 0.
std::string exec_piped(const Sandbox& sb, const std::vector<const char*>& argv, const std::string& stdin_data) {
  std::vector<const char*> args(argv);
  args.push_back(nullptr);
  sandlet_exec_options_t o = SANDLET_EXEC_OPTIONS_INIT;
  o.argv = args.data();
  o.stdin_data = stdin_data.data();
  o.stdin_len = stdin_data.size();
  o.output_limit = UINT64_MAX;
  o.timeout_s = 300;
  sandlet_exec_result_t* res = nullptr;
  check(sandlet_sandbox_exec(sb.get(), &o, &res), std::string("exec ") + argv[0]);
  size_t len = 0;
  const char* out = sandlet_exec_result_stdout(res, &len);
  std::string result(out ? out : "", out ? len : 0);
  const int code = sandlet_exec_result_exit_code(res);
  sandlet_exec_result_delete(res);
  if (code != 0) throw BenchError(std::string("exec ") + argv[0] + ": exit " + std::to_string(code));
  return result;
}

std::string slurp_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void spill(const fs::path& p, const std::string& data) {
  std::ofstream(p, std::ios::binary).write(data.data(), static_cast<std::streamsize>(data.size()));
}

json::object side(const std::vector<std::uint64_t>& ns, double mb) {
  json::object o;
  const Summary s = summarize(ns);
  put_summary(o, s);
  o["mb_per_s_at_p50"] = s.p50_ms > 0 ? round3(mb / (s.p50_ms / 1000.0)) : 0;
  return o;
}

}  // namespace

json::object scenario_copy(const Context& ctx) {
  const unsigned mb = ctx.opt.workspace_mb ? ctx.opt.workspace_mb : 64;
  const std::size_t n = iterations_of(ctx);
  const fs::path work = ctx.root / "copy-bench";
  const fs::path src = work / "src";
  fs::create_directories(work);
  const std::uint64_t files = write_tree(src, mb);
  Runtime rt(ctx.root, ctx.opt.workers, ctx.opt.warm_pool);
  Spec spec(ctx.rootfs);
  Sandbox sb = create_sandbox(rt.get(), spec);

  std::vector<std::uint64_t> in_ns, out_ns, peer_in_ns, peer_out_ns;
  sandlet_copy_stats_t stats{};
  const std::size_t warmup = std::min<std::size_t>(ctx.opt.warmup, 2);
  for (std::size_t i = 0; i < warmup + n; ++i) {
    throw_if_stopped();
    const bool keep = i >= warmup;
    const std::string dst = "/w" + std::to_string(i);
    const fs::path back = work / ("back" + std::to_string(i));
    auto ours = [&] {
      std::uint64_t t0 = now_ns();
      check(sandlet_sandbox_copy_in(sb.get(), src.c_str(), (dst + "/ours").c_str(), nullptr, &stats), "copy_in");
      std::uint64_t t1 = now_ns();
      check(sandlet_sandbox_copy_out(sb.get(), (dst + "/ours").c_str(), (back / "ours").c_str(), nullptr, nullptr),
            "copy_out");
      std::uint64_t t2 = now_ns();
      if (keep) {
        in_ns.push_back(t1 - t0);
        out_ns.push_back(t2 - t1);
      }
    };
    auto peer = [&] {
      if (!ctx.opt.peer) return;
      const fs::path tar = work / "in.tar";
      std::uint64_t t0 = now_ns();
      Command({"/usr/bin/tar", "-cf", tar.string(), "-C", src.string(), "."}).run_ok();
      const std::string peer_dst = dst + "/peer";
      exec_piped(sb, {"/bin/sh", "-c", ("mkdir -p " + peer_dst + " && tar -xf - -C " + peer_dst).c_str()},
                 slurp_file(tar));
      std::uint64_t t1 = now_ns();
      const std::string out = exec_piped(sb, {"/bin/tar", "-cf", "-", "-C", peer_dst.c_str(), "."}, "");
      fs::create_directories(back / "peer");
      spill(work / "out.tar", out);
      Command({"/usr/bin/tar", "-xf", (work / "out.tar").string(), "-C", (back / "peer").string()}).run_ok();
      std::uint64_t t2 = now_ns();
      fs::remove(tar);
      fs::remove(work / "out.tar");
      if (keep) {
        peer_in_ns.push_back(t1 - t0);
        peer_out_ns.push_back(t2 - t1);
      }
    };
    if (i % 2) {
      peer();
      ours();
    } else {
      ours();
      peer();
    }
    exec_ok(sb, {"/bin/rm", "-rf", dst.c_str()});
    remove_tree_one_fs(back);
  }
  sb.destroy();
  remove_tree_one_fs(work);

  json::object out;
  out["tree_mb"] = mb;
  out["tree_files"] = files;
  out["tree_entries"] = stats.entries;
  out["copy_in"] = side(in_ns, mb);
  out["copy_out"] = side(out_ns, mb);
  if (ctx.opt.peer) {
    json::object peers;
    json::object pin = side(peer_in_ns, mb), pout = side(peer_out_ns, mb);
    pin["command"] = "tar -cf T -C SRC . ; exec -i sh -c 'tar -xf - -C DST' < T";
    pout["command"] = "exec tar -cf - -C DST . > T ; tar -xf T -C BACK";
    pin["p50_over_ours"] = round3(summarize(peer_in_ns).p50_ms / summarize(in_ns).p50_ms);
    pout["p50_over_ours"] = round3(summarize(peer_out_ns).p50_ms / summarize(out_ns).p50_ms);
    peers["tar_through_exec_in"] = pin;
    peers["tar_through_exec_out"] = pout;
    out["peers"] = peers;
  }
  return out;
}

}  // namespace bench
