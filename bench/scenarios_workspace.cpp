// workspace-provision: N sandboxes each seeing the same M MB repo-like workspace on top of the rootfs.
//   peer "untar": per sandbox, `tar -xzf` the workspace tarball into a fresh directory, then a sandbox
//   with [rootfs, that directory]; ours: one sandlet_layer_import of the workspace, then N sandboxes
//   with [rootfs, the layer digest]. Both create + exec /bin/true; both at concurrency = cores.
// import: MB/s of sandlet_layer_import of the workspace directory into a fresh store, vs mkfs.erofs.
//
// The workspace (a deterministic tree and its tar.gz) is generated once and cached under
// /var/cache/sandlet/bench-workspace-<M>mb/ (STAMP marks it complete).
#include "capi.hpp"
#include "proc.hpp"
#include "report.hpp"
#include "rootfs.hpp"
#include "runner.hpp"
#include "scenarios.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <memory>
#include <mutex>
#include <numeric>
#include <optional>
#include <sstream>

namespace bench {
namespace fs = std::filesystem;
namespace json = boost::json;

namespace {
constexpr std::uint64_t kMiB = 1ull << 20;
constexpr const char *kStampVersion = "sandlet-bench workspace v1";

// ---------------------------------------------------------------------------------------------------
// Deterministic workspace generation.
struct Rng {
  std::uint64_t s;
  std::uint64_t next() {  // splitmix64
    std::uint64_t z = (s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  std::uint64_t below(std::uint64_t n) { return next() % n; }
  double unit() { return static_cast<double>(next() >> 11) / 9007199254740992.0; }
};

const char *const kWords[] = {
    "const",   "auto",     "return",  "if",      "else",    "for",      "while",   "struct",  "class",
    "static",  "void",     "int",     "size_t",  "string",  "vector",   "self",    "def",     "import",
    "from",    "None",     "true",    "false",   "nullptr", "buffer",   "count",   "index",   "result",
    "error",   "config",   "request", "response", "handler", "context", "options", "value",   "key",
    "items",   "offset",   "length",  "parse",   "render",  "update",   "create",  "delete",  "fetch",
    "session", "user_id",  "token",   "cache",   "layer",   "sandbox",  "manifest", "digest", "payload",
    "await",   "async",    "export",  "function", "let",    "var",      "this",    "new",     "throw",
    "catch",   "try",      "assert",  "yield",   "lambda",  "namespace", "template", "typename", "public",
    "private", "0",        "1",       "42",      "1024",    "0xff",     "i",       "j",       "n"};
const char *const kPunct[] = {" = ", "(", ")", ", ", ".", "->", "::", " + ", " == ", "[", "]", " && ", ": ", " "};
const char *const kExt[] = {".cpp", ".hpp", ".py", ".ts", ".go", ".rs", ".md", ".json", ".c", ".h"};
const char *const kTop[] = {"src", "lib", "tests", "docs", "tools", "include", "scripts", "web", "pkg", "internal"};

void append_text(std::string &out, std::size_t size, Rng &rng) {
  out.clear();
  int indent = 0;
  while (out.size() < size) {
    if (rng.below(12) == 0) {  // comment line
      out.append(static_cast<std::size_t>(indent) * 2, ' ');
      out += "// ";
    } else {
      out.append(static_cast<std::size_t>(indent) * 2, ' ');
    }
    const auto tokens = 2 + rng.below(10);
    for (std::uint64_t t = 0; t < tokens; ++t) {
      out += kWords[rng.below(std::size(kWords))];
      if (rng.below(3) == 0) out += std::to_string(rng.below(100));  // identifiers like buffer17
      out += kPunct[rng.below(std::size(kPunct))];
    }
    const auto r = rng.below(8);
    if (r == 0 && indent < 6) {
      out += " {\n";
      ++indent;
    } else if (r == 1 && indent > 0) {
      out += ";\n";
      --indent;
      out.append(static_cast<std::size_t>(indent) * 2, ' ');
      out += "}\n";
    } else {
      out += ";\n";
    }
  }
  out.resize(size);
  out.back() = '\n';
}

// Binary-ish: 4 KiB blocks, 60% random (already compressed data), 40% a repeated record with noise.
void append_binary(std::string &out, std::size_t size, Rng &rng) {
  out.resize(size);
  for (std::size_t off = 0; off < size; off += 4096) {
    const std::size_t n = std::min<std::size_t>(4096, size - off);
    if (rng.below(10) < 6) {
      for (std::size_t i = 0; i < n; i += 8) {
        const std::uint64_t v = rng.next();
        std::memcpy(out.data() + off + i, &v, std::min<std::size_t>(8, n - i));
      }
    } else {
      const std::uint64_t rec = rng.next();
      for (std::size_t i = 0; i < n; i += 8) {
        std::uint64_t v = rec + (rng.below(16) == 0 ? rng.next() & 0xff : i);
        std::memcpy(out.data() + off + i, &v, std::min<std::size_t>(8, n - i));
      }
    }
  }
}

void write_file(const fs::path &p, const std::string &data) {
  fs::create_directories(p.parent_path());
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f.write(data.data(), static_cast<std::streamsize>(data.size()));
  if (!f) throw BenchError("write " + p.string() + " failed");
}

struct TreeStats {
  std::uint64_t bytes = 0, text_bytes = 0, files = 0;
};

TreeStats generate_tree(const fs::path &dir, std::uint64_t total, std::uint64_t seed) {
  Rng rng{seed};
  TreeStats st;
  std::string buf;
  const std::uint64_t text_target = total * 7 / 10;
  const double lo = std::log(1024.0), hi = std::log(200.0 * 1024.0);
  std::uint64_t dir_no = 0, in_dir = 0, per_dir = 0;
  fs::path cur;
  while (st.text_bytes < text_target) {
    if (in_dir >= per_dir) {  // a new directory of 5..60 files
      const char *top = kTop[rng.below(std::size(kTop))];
      cur = dir / top / ("module_" + std::to_string(dir_no / 8)) / ("part_" + std::to_string(dir_no));
      ++dir_no;
      in_dir = 0;
      per_dir = 5 + rng.below(56);
    }
    std::size_t size = static_cast<std::size_t>(std::exp(lo + (hi - lo) * rng.unit()));
    size = std::min<std::uint64_t>(size, text_target - st.text_bytes + 1024);
    append_text(buf, size, rng);
    write_file(cur / ("file_" + std::to_string(st.files) + kExt[rng.below(std::size(kExt))]), buf);
    st.text_bytes += size;
    st.bytes += size;
    ++st.files;
    ++in_dir;
  }
  const char *const bin_names[] = {"assets/blob_", "vendor/lib/libdep_", "data/fixture_", "build/cache/obj_"};
  for (std::uint64_t k = 0; st.bytes < total; ++k) {
    std::size_t size = (2 + rng.below(15)) * kMiB;  // 2..16 MiB
    size = std::min<std::uint64_t>(size, total - st.bytes);
    append_binary(buf, size, rng);
    write_file(dir / (std::string(bin_names[k % 4]) + std::to_string(k) + ".bin"), buf);
    st.bytes += size;
    ++st.files;
  }
  return st;
}

struct Workspace {
  fs::path tree, tarball;
  TreeStats stats;
  std::uint64_t tarball_bytes = 0;
  bool generated = false;  // false: reused from the cache
  double generate_s = 0;
};

std::string read_text(const fs::path &p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// The cached workspace of `mb` MiB, generated (tree, then tar.gz, then STAMP) if missing.
Workspace workspace(unsigned mb) {
  const fs::path cache = fs::path("/var/cache/sandlet") / ("bench-workspace-" + std::to_string(mb) + "mb");
  Workspace w;
  w.tree = cache / "tree";
  w.tarball = cache / "workspace.tar.gz";
  const std::string stamp_head = std::string(kStampVersion) + " mb=" + std::to_string(mb) + "\n";
  const std::string stamp = read_text(cache / "STAMP");
  if (stamp.rfind(stamp_head, 0) == 0 && fs::is_directory(w.tree) && fs::is_regular_file(w.tarball)) {
    std::istringstream in(stamp.substr(stamp_head.size()));
    in >> w.stats.bytes >> w.stats.text_bytes >> w.stats.files;
    w.tarball_bytes = fs::file_size(w.tarball);
    return w;
  }
  const auto t0 = now_ns();
  std::error_code ec;
  fs::remove_all(cache, ec);  // a partial or older one
  fs::create_directories(cache);
  struct statvfs vfs {};
  if (statvfs(cache.c_str(), &vfs) == 0 &&
      static_cast<std::uint64_t>(vfs.f_bavail) * vfs.f_frsize < 2ull * mb * kMiB + kMiB * 64)
    throw BenchError("not enough free space in " + cache.string() + " for the " + std::to_string(mb) +
                     " MiB workspace and its tarball");
  std::fprintf(stderr, "sandlet-bench: generating the %u MiB workspace in %s (once)\n", mb, cache.c_str());
  w.stats = generate_tree(w.tree, static_cast<std::uint64_t>(mb) * kMiB, 0x5eed0000ull + mb);
  Command({"/usr/bin/tar", "--sort=name", "--mtime=@1700000000", "--owner=0", "--group=0", "--numeric-owner",
           "-czf", w.tarball.string(), "-C", w.tree.string(), "."})
      .run_ok();
  std::ofstream(cache / "STAMP") << stamp_head << w.stats.bytes << ' ' << w.stats.text_bytes << ' ' << w.stats.files
                                 << '\n';
  w.tarball_bytes = fs::file_size(w.tarball);
  w.generated = true;
  w.generate_s = static_cast<double>(now_ns() - t0) / 1e9;
  return w;
}

// Reads every file once so both sides start from a warm page cache.
void warm(const fs::path &p) {
  std::vector<char> buf(1 << 20);
  const auto read_all = [&](const fs::path &f) {
    const int fd = open(f.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    while (read(fd, buf.data(), buf.size()) > 0) {
    }
    close(fd);
  };
  if (fs::is_regular_file(p)) return read_all(p);
  for (const auto &e : fs::recursive_directory_iterator(p))
    if (e.is_regular_file()) read_all(e.path());
}

// ---------------------------------------------------------------------------------------------------
// Bytes written: per process (/proc/PID/io write_bytes) and per block device (sectors written).
std::uint64_t proc_write_bytes(const std::string &pid) {
  std::ifstream f("/proc/" + pid + "/io");
  for (std::string line; std::getline(f, line);)
    if (line.rfind("write_bytes:", 0) == 0) return std::stoull(line.substr(12));
  return 0;
}

class Device final {
 public:
  explicit Device(const fs::path &on) : root_(on) {
    struct stat st {};
    if (stat(on.c_str(), &st) != 0) return;
    name_ = std::to_string(major(st.st_dev)) + ":" + std::to_string(minor(st.st_dev));
    const fs::path p = fs::path("/sys/dev/block") / name_ / "stat";
    if (fs::exists(p)) stat_ = p;
  }
  bool ok() const { return !stat_.empty(); }
  std::string name() const { return name_; }
  // Flushes the filesystem first (syncfs), so what was written so far has reached the device.
  std::uint64_t written() const {
    const int fd = open(root_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
      syncfs(fd);
      close(fd);
    }
    if (stat_.empty()) return 0;
    std::istringstream in(read_text(stat_));
    std::uint64_t v[7] = {};
    for (auto &x : v) in >> x;
    return v[6] * 512;  // field 7: sectors written
  }

 private:
  fs::path root_, stat_;
  std::string name_;
};

// A spec of several layers (one per thread: a spec is used from one thread at a time).
struct LayeredSpec {
  sandlet_spec_t *spec = nullptr;
  explicit LayeredSpec(const std::vector<std::string> &layers) {
    check(sandlet_spec_new(&spec), "sandlet_spec_new");
    for (const auto &l : layers) {
      sandlet_error_t *e = sandlet_spec_add_layer(spec, l.c_str());
      if (e != nullptr) {
        sandlet_spec_delete(spec);
        check(e, "sandlet_spec_add_layer(" + l + ")");
      }
    }
  }
  ~LayeredSpec() { sandlet_spec_delete(spec); }
  LayeredSpec(const LayeredSpec &) = delete;
  LayeredSpec &operator=(const LayeredSpec &) = delete;
};

Sandbox create_layered(sandlet_runtime_t *rt, const LayeredSpec &spec) {
  sandlet_sandbox_t *sb = nullptr;
  check(sandlet_sandbox_create(rt, spec.spec, &sb), "sandlet_sandbox_create");
  Sandbox owned(sb);
  if (const char *id = sandlet_sandbox_id(sb); id != nullptr && *id != '\0') SandboxRegistry::instance().add(id);
  return owned;
}

void destroy_all(std::vector<Sandbox> &sbs, unsigned threads) {
  run_parallel(sbs.size(), threads, [&](std::size_t i, unsigned) {
    if (sbs[i]) {
      sbs[i].destroy();
      sbs[i].reset();
    }
  });
}

unsigned cores() { return std::max(1L, sysconf(_SC_NPROCESSORS_ONLN)); }

struct Imported {
  std::string digest;
  std::uint64_t stored_bytes = 0;
  std::uint64_t ns = 0;
};

Imported import_layer(sandlet_runtime_t *rt, const fs::path &dir, const char *role) {
  sandlet_layer_import_options_t o = SANDLET_LAYER_IMPORT_OPTIONS_INIT;
  o.role = role;
  o.no_dedupe = 0;
  char *res = nullptr;
  const auto t0 = now_ns();
  check(sandlet_layer_import(rt, dir.c_str(), &o, &res), "sandlet_layer_import(" + dir.string() + ")");
  Imported out;
  out.ns = now_ns() - t0;
  const json::value v = json::parse(res);
  sandlet_free(res);
  const auto &layer = v.at("layers").as_array().at(0).as_object();
  out.digest = json::value_to<std::string>(layer.at("digest"));
  if (const auto *sb = layer.if_contains("stored_bytes"); sb != nullptr && sb->is_number())
    out.stored_bytes = sb->to_number<std::uint64_t>();
  return out;
}

json::object workspace_json(const Workspace &w) {
  json::object o;
  o["tree"] = w.tree.string();
  o["tarball"] = w.tarball.string();
  o["bytes"] = w.stats.bytes;
  o["text_bytes"] = w.stats.text_bytes;
  o["files"] = w.stats.files;
  o["tarball_bytes"] = w.tarball_bytes;
  o["generated_this_run"] = w.generated;
  if (w.generated) o["generate_s"] = round3(w.generate_s);
  return o;
}

double ratio(double a, double b) { return b > 0 ? round3(a / b) : 0.0; }

// Removes directories that may hold several 100 MB each; serially (remove_tree_one_fs is not reentrant).
struct DirsGuard {
  fs::path base;
  ~DirsGuard() {
    if (!base.empty() && !remove_tree_one_fs(base))
      std::fprintf(stderr, "sandlet-bench: warning: could not remove all of %s\n", base.c_str());
  }
};
}  // namespace

// -----------------------------------------------------------------------------------------------------
json::object scenario_workspace_provision(const Context &ctx) {
  const std::size_t n = ctx.opt.sandboxes ? ctx.opt.sandboxes : 64;
  const unsigned mb = ctx.opt.workspace_mb ? ctx.opt.workspace_mb : 500;
  const unsigned c = cores();

  struct statvfs vfs {};
  if (statvfs(ctx.root.c_str(), &vfs) != 0) throw BenchError("statvfs(" + ctx.root.string() + ") failed");
  const double free_mib = static_cast<double>(vfs.f_bavail) * vfs.f_frsize / kMiB;
  const double need_mib = static_cast<double>(n) * mb * 1.2;
  if (ctx.opt.peer && free_mib < need_mib)
    throw BenchError("not enough free disk under " + ctx.root.string() + ": the untar peer needs " +
                     std::to_string(static_cast<long>(need_mib)) + " MiB (N x M x 1.2), " +
                     std::to_string(static_cast<long>(free_mib)) + " MiB free; lower --sandboxes/--workspace-mb");

  const Workspace w = workspace(mb);
  warm(w.tree);
  warm(w.tarball);
  const Device dev(ctx.root);
  const std::string rootfs = ctx.rootfs.string();

  DirsGuard untar_dirs;  // declared first: removed after the runtime closed
  std::optional<Runtime> rt;
  rt.emplace(ctx.root, ctx.opt.workers, ctx.opt.warm_pool);
  std::vector<Sandbox> sbs(n);
  json::object out;

  // --- ours: import once, then N sandboxes on [rootfs, layer].
  const std::uint64_t self_w0 = proc_write_bytes("self");
  const std::uint64_t dev_w0 = dev.written();
  const Imported imp = import_layer(rt->get(), w.tree, "workspace");
  const std::uint64_t self_w1 = proc_write_bytes("self");
  const std::uint64_t dev_w1 = dev.written();
  {
    std::vector<std::unique_ptr<LayeredSpec>> specs;
    for (unsigned t = 0; t < c; ++t)
      specs.push_back(std::make_unique<LayeredSpec>(std::vector<std::string>{rootfs, imp.digest}));
    std::vector<std::uint64_t> lat(n);
    const auto t0 = now_ns();
    run_parallel(n, c, [&](std::size_t i, unsigned t) {
      const auto s0 = now_ns();
      sbs[i] = create_layered(rt->get(), *specs[t]);
      exec_ok(sbs[i], {"/bin/true"});
      lat[i] = now_ns() - s0;
    });
    const auto all_ns = now_ns() - t0;
    const std::uint64_t self_w2 = proc_write_bytes("self");
    const std::uint64_t dev_w2 = dev.written();
    destroy_all(sbs, c);

    put_latency(out, summarize(lat), n / (all_ns / 1e9));
    out["all_ready_ms"] = round3(ns_to_ms(all_ns));
    out["import_ms"] = round3(ns_to_ms(imp.ns));
    out["all_ready_plus_import_ms"] = round3(ns_to_ms(all_ns + imp.ns));
    out["layer"] = imp.digest;
    out["layer_stored_bytes"] = imp.stored_bytes;
    json::object b;
    b["import_process_write_bytes"] = self_w1 - self_w0;
    b["provision_process_write_bytes"] = self_w2 - self_w1;
    if (dev.ok()) {
      b["import_device_write_bytes"] = dev_w1 - dev_w0;
      b["provision_device_write_bytes"] = dev_w2 - dev_w1;
    }
    out["bytes_written"] = b;
  }

  // --- peer: N x (mkdir, tar -xzf, sandbox on [rootfs, dir]).
  if (ctx.opt.peer) {
    untar_dirs.base = ctx.root / "bench-untar";
    fs::create_directories(untar_dirs.base);
    std::vector<std::uint64_t> lat(n), tar_w(n);
    const std::uint64_t dev_p0 = dev.written();
    const auto t0 = now_ns();
    run_parallel(n, c, [&](std::size_t i, unsigned) {
      const auto s0 = now_ns();
      const fs::path d = untar_dirs.base / std::to_string(i);
      fs::create_directory(d);
      const Command tar({"/usr/bin/tar", "-xzf", w.tarball.string(), "-C", d.string()});
      const pid_t pid = tar.spawn();
      // Read its I/O account as a zombie (WNOWAIT), then reap it; it includes its reaped gzip child.
      siginfo_t si{};
      while (waitid(P_PID, static_cast<id_t>(pid), &si, WEXITED | WNOWAIT) != 0 && errno == EINTR) {
      }
      tar_w[i] = proc_write_bytes(std::to_string(pid));
      const int status = wait_child(pid);
      if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        throw BenchError("`" + tar.str() + "` " + describe_status(status));
      const LayeredSpec spec({rootfs, d.string()});
      sbs[i] = create_layered(rt->get(), spec);
      exec_ok(sbs[i], {"/bin/true"});
      lat[i] = now_ns() - s0;
    });
    const auto all_ns = now_ns() - t0;
    const std::uint64_t dev_p1 = dev.written();
    destroy_all(sbs, c);

    std::uint64_t tar_total = 0;
    for (auto x : tar_w) tar_total += x;
    json::object p = peer_json("untar", "tar -xzf " + w.tarball.string() + " -C DIR; sandbox layers [rootfs, DIR]",
                               summarize(lat), n / (all_ns / 1e9));
    p["all_ready_ms"] = round3(ns_to_ms(all_ns));
    json::object pb;
    pb["tar_process_write_bytes"] = tar_total;
    if (dev.ok()) pb["device_write_bytes"] = dev_p1 - dev_p0;
    p["bytes_written"] = pb;
    out["peer"] = p;

    const double ours_all = out["all_ready_ms"].as_double(), ours_imp = out["all_ready_plus_import_ms"].as_double();
    const double peer_all = ns_to_ms(all_ns);
    out["ratio_vs_peer"] = ratio(ours_all, peer_all);  // ours / peer, all_ready
    out["speedup"] = ratio(peer_all, ours_all);
    out["speedup_incl_import"] = ratio(peer_all, ours_imp);
    const auto &b = out["bytes_written"].as_object();
    json::object br;  // peer bytes / ours bytes
    const auto ours_proc = b.at("provision_process_write_bytes").to_number<std::uint64_t>();
    const auto ours_proc_imp = ours_proc + b.at("import_process_write_bytes").to_number<std::uint64_t>();
    br["process_peer_over_ours"] = ours_proc ? json::value(ratio(tar_total, ours_proc)) : json::value(nullptr);
    br["process_peer_over_ours_incl_import"] = ratio(tar_total, ours_proc_imp);
    if (dev.ok()) {
      const auto ours_dev = b.at("provision_device_write_bytes").to_number<std::uint64_t>();
      const auto ours_dev_imp = ours_dev + b.at("import_device_write_bytes").to_number<std::uint64_t>();
      br["device_peer_over_ours"] = ours_dev ? json::value(ratio(dev_p1 - dev_p0, ours_dev)) : json::value(nullptr);
      br["device_peer_over_ours_incl_import"] = ratio(dev_p1 - dev_p0, ours_dev_imp);
    }
    out["bytes_ratio"] = br;
  }
  sbs.clear();
  {  // drop the workspace layer, then close the runtime before the untar dirs go
    sandlet_error_t *e = sandlet_layer_remove(rt->get(), imp.digest.c_str());
    if (e != nullptr) sandlet_error_delete(e);
    char *rep = nullptr;
    check(sandlet_layer_gc(rt->get(), &rep), "sandlet_layer_gc");
    sandlet_free(rep);
  }
  rt.reset();

  out["iterations"] = n;
  out["sandboxes"] = n;
  out["workspace_mb"] = mb;
  out["concurrency"] = c;
  out["workspace"] = workspace_json(w);
  if (dev.ok()) out["device"] = dev.name();
  out["free_disk_mib_before"] = static_cast<std::uint64_t>(free_mib);
  out["note"] =
      "latencies are per sandbox, from its start (peer: mkdir+untar) to `true` exiting in it; all_ready_ms is "
      "the wall time until all N are ready, provisioned cores-at-a-time (concurrency). Source tree and tarball warmed in the page "
      "cache first. process bytes = /proc/PID/io write_bytes (tar incl. its gzip; ours: this process, all "
      "threads); device bytes = sectors-written delta of the device after syncfs (includes any other writer "
      "on it). Ours ran first, then the peer.";
  return out;
}

json::object scenario_import(const Context &ctx) {
  const unsigned mb = ctx.opt.workspace_mb ? ctx.opt.workspace_mb : 500;
  const std::size_t k = iterations_of(ctx);
  const Workspace w = workspace(mb);
  warm(w.tree);
  const Device dev(ctx.root);
  std::vector<std::uint64_t> ours_ns, peer_ns, peer_sync_ns;
  std::uint64_t stored = 0, image_bytes = 0;
  const fs::path img = ctx.root / "mkfs-erofs.img";
  const Command mkfs({"/usr/bin/mkfs.erofs", "--quiet", img.string(), w.tree.string()});

  const auto run_ours = [&](std::size_t i) {
    const fs::path store = ctx.root / ("store-" + std::to_string(i));
    fs::create_directories(store);
    {
      Runtime rt(store, ctx.opt.workers, false);
      const Imported imp = import_layer(rt.get(), w.tree, "workspace");
      ours_ns.push_back(imp.ns);
      stored = imp.stored_bytes;
    }
    if (!remove_tree_one_fs(store)) throw BenchError("could not remove " + store.string());
    dev.written();  // flush the store's deletion before the next timed step
  };
  const auto run_peer = [&] {
    const auto t0 = now_ns();
    mkfs.run_ok();
    const auto t1 = now_ns();
    const int fd = open(img.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
      syncfs(fd);
      close(fd);
    }
    const auto t2 = now_ns();
    peer_ns.push_back(t1 - t0);
    peer_sync_ns.push_back(t2 - t0);
    image_bytes = fs::file_size(img);
    fs::remove(img);
    dev.written();
  };
  dev.written();
  for (std::size_t i = 0; i < k; ++i) {  // alternate the order against drift
    throw_if_stopped();
    if (i % 2 == 0) {
      run_ours(i);
      if (ctx.opt.peer) run_peer();
    } else {
      if (ctx.opt.peer) run_peer();
      run_ours(i);
    }
  }

  const double mbytes = static_cast<double>(w.stats.bytes) / 1e6;
  const auto mbps = [&](const std::vector<std::uint64_t> &v) {
    std::vector<double> r;
    for (auto ns : v) r.push_back(mbytes / (ns / 1e9));
    return round3(median(r));
  };
  json::object out;
  put_latency(out, summarize(ours_ns), k / (std::accumulate(ours_ns.begin(), ours_ns.end(), 0.0) / 1e9));
  out["mb_per_s"] = mbps(ours_ns);
  out["stored_bytes"] = stored;
  if (ctx.opt.peer) {
    json::object p = peer_json("mkfs.erofs", mkfs.str(), summarize(peer_ns),
                               k / (std::accumulate(peer_ns.begin(), peer_ns.end(), 0.0) / 1e9));
    p["version"] = capture_output("dpkg-query -W -f '${Version}' erofs-utils");
    p["mb_per_s"] = mbps(peer_ns);
    p["mb_per_s_incl_syncfs"] = mbps(peer_sync_ns);
    p["image_bytes"] = image_bytes;
    out["peer"] = p;
    out["ratio_vs_peer"] = round3(paired_ratio_median(ours_ns, peer_ns));  // ours time / mkfs time
    out["ratio_vs_peer_incl_syncfs"] = round3(paired_ratio_median(ours_ns, peer_sync_ns));
    out["mb_per_s_ratio_vs_peer"] = ratio(out["mb_per_s"].as_double(), p["mb_per_s"].as_double());
  }
  out["iterations"] = k;
  out["workspace_mb"] = mb;
  out["workspace"] = workspace_json(w);
  out["note"] =
      "MB = 1e6 bytes of the source tree's file contents. The source tree was read once before timing and kept "
      "warm in the page cache for both sides (no cache drop). Ours: sandlet_layer_import (role workspace, dedupe "
      "on) into a fresh store (new runtime root) each iteration, timed around the call. Peer: mkfs.erofs with "
      "default options into a file on the same filesystem, removed after each run; mb_per_s_incl_syncfs adds a "
      "syncfs after it. Order alternates between iterations.";
  return out;
}

}  // namespace bench
