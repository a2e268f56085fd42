#include "cold_start.hpp"

#include "proc.hpp"
#include "report.hpp"
#include "rootfs.hpp"
#include "stats.hpp"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <thread>

#ifndef SANDLET_BENCH_SOURCE_DIR
#define SANDLET_BENCH_SOURCE_DIR ""
#endif

extern char **environ;

namespace bench {
namespace fs = std::filesystem;
namespace json = boost::json;

namespace {
std::string read_text(const fs::path &p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// A store call's error as a reason to skip: "CODE: message"; throws for anything but UNIMPLEMENTED.
std::string unimplemented_or_throw(sandlet_error_t *err, const std::string &what) {
  if (err == nullptr) return "";
  if (sandlet_error_code(err) == SANDLET_UNIMPLEMENTED) {
    std::string why = what + ": UNIMPLEMENTED: " + sandlet_error_message(err);
    sandlet_error_delete(err);
    return why;
  }
  check(err, what);
  return "";
}

json::object parse_and_free(char *text) {
  if (text == nullptr) return {};
  json::value v = json::parse(text);
  sandlet_free(text);
  return v.is_object() ? v.as_object() : json::object{};
}
}  // namespace

std::string Workload::describe() const {
  std::string s;
  for (const auto &[k, v] : env) s += k + "=" + v + " ";
  for (const auto &a : argv) s += a + " ";
  if (!s.empty()) s.pop_back();
  return s;
}

WorkloadSpec::WorkloadSpec(const std::string &layer, const Workload &w) {
  check(sandlet_spec_new(&spec_), "sandlet_spec_new");
  try {
    check(sandlet_spec_add_layer(spec_, layer.c_str()), "sandlet_spec_add_layer(" + layer + ")");
    for (const auto &[k, v] : w.env) check(sandlet_spec_set_env(spec_, k.c_str(), v.c_str()), "sandlet_spec_set_env(" + k + ")");
  } catch (...) {
    sandlet_spec_delete(spec_);
    throw;
  }
}

Sandbox WorkloadSpec::create(sandlet_runtime_t *rt) const {
  sandlet_sandbox_t *sb = nullptr;
  check(sandlet_sandbox_create(rt, spec_, &sb), "sandlet_sandbox_create");
  Sandbox owned(sb);
  if (const char *id = sandlet_sandbox_id(sb); id != nullptr && *id != '\0') SandboxRegistry::instance().add(id);
  return owned;
}

std::string run_workload(const Sandbox &sb, const Workload &w, double timeout_s) {
  if (!w.inject_path.empty())
    check(sandlet_sandbox_write_file(sb.get(), w.inject_path.c_str(), w.inject_data.data(), w.inject_data.size(), 0644),
          "sandlet_sandbox_write_file(" + w.inject_path + ")");
  std::vector<const char *> argv;
  for (const auto &a : w.argv) argv.push_back(a.c_str());
  argv.push_back(nullptr);
  sandlet_exec_options_t opts = SANDLET_EXEC_OPTIONS_INIT;
  opts.argv = argv.data();
  opts.timeout_s = timeout_s;
  sandlet_exec_result_t *res = nullptr;
  check(sandlet_sandbox_exec(sb.get(), &opts, &res), "sandlet_sandbox_exec(" + w.argv[0] + ")");
  const int code = sandlet_exec_result_exit_code(res), sig = sandlet_exec_result_signal(res);
  const bool timed_out = sandlet_exec_result_timed_out(res) != 0;
  size_t len = 0;
  const char *o = sandlet_exec_result_stdout(res, &len);
  std::string out(o != nullptr ? o : "", o != nullptr ? len : 0);
  std::string err;
  if (const char *e = sandlet_exec_result_stderr(res, &len); e != nullptr) err.assign(e, std::min<size_t>(len, 2000));
  sandlet_exec_result_delete(res);
  if (code != 0 || sig != 0 || timed_out)
    throw BenchError("workload: exit " + std::to_string(code) + ", signal " + std::to_string(sig) +
                     (timed_out ? ", timed out" : "") + (err.empty() ? "" : ", stderr: " + err.substr(err.size() > 600 ? err.size() - 600 : 0)));
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  return out;
}

// ---------------------------------------------------------------------------------------------------
ColdStart::ColdStart(const Context &ctx) {
  n_ = ctx.opt.sandboxes ? ctx.opt.sandboxes : 32;
  rate_mbps_ = ctx.opt.rate_mbps > 0 ? ctx.opt.rate_mbps : 200;
  store_kind_ = ctx.opt.store_kind.empty() ? "dir" : ctx.opt.store_kind;
  if (store_kind_ != "dir" && store_kind_ != "http") throw BenchError("--store-kind wants http or dir, got " + store_kind_);
  warm_rounds_ = ctx.opt.warm_rounds ? ctx.opt.warm_rounds : 1;
  fetch_unit_ = ctx.opt.fetch_unit;
  setup_["fetch_unit"] = fetch_unit_;
  workers_ = ctx.opt.workers;
  std::stringstream arms(ctx.opt.arms.empty() ? "eager,untar,lazy,warm" : ctx.opt.arms);
  for (std::string a; std::getline(arms, a, ',');) {
    if (a != "eager" && a != "untar" && a != "lazy" && a != "warm") throw BenchError("--arms: unknown arm '" + a + "'");
    arms_.push_back(a);
  }
  source_dir_ = SANDLET_BENCH_SOURCE_DIR;
  if (source_dir_.empty() || !fs::exists(source_dir_ / "throttle_proxy.py")) source_dir_ = ctx.exe_dir / ".." / "bench";
  if (!fs::exists(source_dir_ / "throttle_proxy.py"))
    throw BenchError("cannot find bench/throttle_proxy.py (looked in " + source_dir_.string() + ")");

  locate_image(ctx);
  scratch_ = ctx.root / "cold-start";
  www_ = scratch_ / "www";
  fs::create_directories(www_ / "store");
  fs::create_directories(scratch_ / "arms");
  make_tarball();
  fs::create_symlink(tarball_, www_ / "image.tar");

  device_ = std::make_unique<BlockDevice>(ctx.root);
  nginx_ = std::make_unique<Nginx>(scratch_ / "nginx", www_);
  proxy_ = std::make_unique<ThrottleProxy>(source_dir_ / "throttle_proxy.py", nginx_->port(), rate_mbps_, 4 * 3600.0);
  pull_url_ = "http://127.0.0.1:" + std::to_string(proxy_->port()) + "/store";

  // What else writes to the disk while nothing of ours runs (other tenants, journal commits).
  const std::uint64_t b0 = device_->written_bytes();
  const auto t0 = now_ns();
  std::this_thread::sleep_for(std::chrono::seconds(3));
  background_bps_ = static_cast<double>(device_->written_bytes() - b0) / (static_cast<double>(now_ns() - t0) / 1e9);

  push_ = &sandlet_layer_push;
  pull_ = &sandlet_layer_pull;
  status_ = &sandlet_loader_status;
  const bool needs_store = std::any_of(arms_.begin(), arms_.end(), [](const std::string &a) { return a != "untar"; });
  if (needs_store && push_reason_.empty() && pull_reason_.empty()) push_image(ctx);

  setup_["image"] = image_.string();
  setup_["image_bytes"] = image_bytes_;
  setup_["image_allocated_bytes"] = image_allocated_;
  setup_["tarball"] = tarball_.string();
  setup_["tarball_bytes"] = tarball_bytes_;
  setup_["tarball_cached"] = tarball_cached_;
  setup_["rate_mb_per_s"] = rate_mbps_;
  setup_["store_kind"] = store_kind_;
  setup_["pull_url"] = pull_url_;
  setup_["nginx"] = nginx_->version();
  setup_["workload"] = workload_.describe();
  setup_["sandboxes"] = n_;
  json::array a;
  for (const auto &x : arms_) a.push_back(json::value(x));
  setup_["arms_run"] = a;
  setup_["device"] = device_->ok() ? device_->name() : "";
  setup_["device_background_write_bytes_per_s"] = round3(background_bps_);
  if (!digest_.empty()) setup_["layer"] = digest_;
}

ColdStart::~ColdStart() {
  proxy_.reset();
  nginx_.reset();
  if (!scratch_.empty() && fs::exists(scratch_) && !remove_tree_one_fs(scratch_))
    std::fprintf(stderr, "sandlet-bench: warning: could not remove all of %s\n", scratch_.c_str());
}

void ColdStart::locate_image(const Context &ctx) {
  if (!ctx.opt.image.empty()) {
    image_ = fs::absolute(ctx.opt.image);
  } else {  // the image, built once and cached by the script
    const std::string script = (source_dir_ / "cold_start_image.sh").string();
    std::string path = capture_output(script + " --print-path");
    while (!path.empty() && (path.back() == '\n' || path.back() == ' ')) path.pop_back();
    if (path.empty()) throw BenchError(script + " failed (run it by hand to see why)");
    image_ = path;
  }
  if (!fs::is_directory(image_)) throw BenchError("--image " + image_.string() + " is not a directory");
  image_bytes_ = apparent_bytes(image_);
  image_allocated_ = allocated_bytes(image_);
  if (fs::exists(image_ / "usr/bin/python3")) {
    workload_.env = {{"HOME", "/root"}, {"OMP_NUM_THREADS", "1"}, {"OPENBLAS_NUM_THREADS", "1"},
                     {"MKL_NUM_THREADS", "1"}, {"NUMBA_NUM_THREADS", "1"}, {"POLARS_MAX_THREADS", "1"},
                     {"MPLBACKEND", "Agg"}, {"PYTHONDONTWRITEBYTECODE", "1"}};
    if (fs::exists(image_ / "opt/bench/workload.py")) {
      workload_.argv = {"/usr/bin/python3", "/opt/bench/workload.py"};
    } else {
      workload_.inject_path = "/tmp/cold_start_workload.py";
      workload_.inject_data = read_text(source_dir_ / "cold_start_workload.py");
      workload_.argv = {"/usr/bin/python3", workload_.inject_path};
    }
  } else {  // a small image without Python (the busybox test rootfs): read its biggest file
    workload_.argv = {"/bin/sh", "-c", "md5sum /bin/busybox"};
  }
}

// The image as one tar, made once. Cached beside an image the script built (keyed by its stamp), else in
// the scratch directory for this run only.
void ColdStart::make_tarball() {
  const fs::path stamp = image_.parent_path() / "complete";
  const bool cacheable = image_.filename() == "rootfs" && fs::exists(stamp);
  tarball_ = cacheable ? image_.parent_path() / "image.tar" : scratch_ / "image.tar";
  const fs::path tar_stamp = tarball_.string() + ".stamp";
  const std::string want = cacheable ? read_text(stamp) : "";
  if (cacheable && fs::exists(tarball_) && read_text(tar_stamp) == want) {
    tarball_cached_ = true;
  } else {
    std::fprintf(stderr, "sandlet-bench: cold-start: tar of %s into %s\n", image_.c_str(), tarball_.c_str());
    const fs::path tmp = tarball_.string() + ".tmp";
    Command({"/usr/bin/tar", "--sort=name", "--numeric-owner", "-C", image_.string(), "-cf", tmp.string(), "."}).run_ok();
    fs::rename(tmp, tarball_);
    if (cacheable) std::ofstream(tar_stamp, std::ios::trunc) << want;
  }
  tarball_bytes_ = fs::file_size(tarball_);
}

// Import the image into a source runtime (the build machine's side) and push it to the store.
void ColdStart::push_image(const Context &ctx) {
  const fs::path root = scratch_ / "source";
  fs::create_directories(root);
  Runtime rt(root, ctx.opt.workers, false);
  sandlet_layer_import_options_t o = SANDLET_LAYER_IMPORT_OPTIONS_INIT;
  o.role = "base";
  o.name = "cold-start-image";
  char *res = nullptr;
  const auto t0 = now_ns();
  check(sandlet_layer_import(rt.get(), image_.c_str(), &o, &res), "sandlet_layer_import(" + image_.string() + ")");
  const json::object imp = parse_and_free(res);
  setup_["import_s"] = round3(static_cast<double>(now_ns() - t0) / 1e9);
  const auto &layer = imp.at("layers").as_array().at(0).as_object();
  digest_ = json::value_to<std::string>(layer.at("digest"));
  setup_["layer_size"] = layer.at("size");
  setup_["layer_stored_bytes"] = layer.at("stored_bytes");
  const std::string url = store_kind_ == "dir" ? "file://" + (www_ / "store").string()
                                               : "http://127.0.0.1:" + std::to_string(nginx_->port()) + "/store";
  setup_["push_url"] = url;
  char *pres = nullptr;
  const auto t1 = now_ns();
  push_reason_ = unimplemented_or_throw(push_(rt.get(), digest_.c_str(), url.c_str(), &pres), "sandlet_layer_push");
  if (push_reason_.empty()) {
    setup_["push_s"] = round3(static_cast<double>(now_ns() - t1) / 1e9);
    setup_["push_result"] = parse_and_free(pres);
    setup_["store_bytes"] = apparent_bytes(www_ / "store");
  }
}

std::string ColdStart::unavailable(const std::string &arm) const {
  if (arm == "untar") return "";
  if (!push_reason_.empty()) return push_reason_;
  if (!pull_reason_.empty()) return pull_reason_;
  if (digest_.empty()) return "the image was not pushed";
  return "";
}

fs::path ColdStart::arm_root(const std::string &name, bool fresh) const {
  const fs::path p = scratch_ / "arms" / name;
  if (fresh) {
    if (fs::exists(p) && !remove_tree_one_fs(p)) throw BenchError("cannot empty " + p.string());
    fs::create_directories(p);
  }
  return p;
}

json::object ColdStart::pull(sandlet_runtime_t *rt, bool lazy) const {
  char *res = nullptr;
  check(pull_(rt, digest_.c_str(), pull_url_.c_str(), lazy ? SANDLET_PULL_LAZY : 0u, &res),
        std::string("sandlet_layer_pull(") + (lazy ? "LAZY" : "0") + ")");
  return parse_and_free(res);
}

std::string ColdStart::untar(json::object &arm) const {
  const fs::path dir = scratch_ / "arms" / "untar" / "image";
  fs::create_directories(dir);
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) throw BenchError("pipe2 failed");
  const std::vector<std::string> args{"/usr/bin/tar", "--numeric-owner", "-xf", "-", "-C", dir.string()};
  std::vector<char *> argv;
  for (const auto &a : args) argv.push_back(const_cast<char *>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, p[0], 0);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  close(p[0]);
  if (rc != 0) {
    close(p[1]);
    throw BenchError("posix_spawn tar failed");
  }
  std::uint64_t body = 0;
  std::string get_error;
  try {
    body = http_get_to_fd(proxy_->port(), "/image.tar", p[1]);
  } catch (const std::exception &e) {
    get_error = e.what();
  }
  close(p[1]);
  const int status = wait_child(pid);
  if (!get_error.empty()) throw BenchError(get_error);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) throw BenchError("tar -x " + describe_status(status));
  arm["http_body_bytes"] = body;
  arm["layer_kind"] = "host directory (sandlet_spec_add_layer with the absolute path of the untarred tree)";
  return dir.string();
}

json::value ColdStart::loader_status(const std::string &arm) const {
  try {
    Runtime rt(arm_root(arm, false), workers_, false, fetch_unit_);
    char *res = nullptr;
    check(status_(rt.get(), &res), "sandlet_loader_status");
    return parse_and_free(res);
  } catch (const std::exception &e) {
    return json::object{{"error", e.what()}};
  }
}

void ColdStart::check_output(const std::string &what, const std::string &output, bool identical) {
  if (!identical) throw BenchError(what + ": the sandboxes printed different outputs");
  if (expected_output_.empty()) expected_output_ = output;
  if (output != expected_output_)
    throw BenchError(what + ": printed '" + output + "', earlier arms '" + expected_output_ + "'");
}

json::object ColdStart::stop_loaders() const {
  json::object out;
  for (const char *arm : {"eager", "lazy"}) {
    if (!fs::exists(scratch_ / "arms" / arm)) continue;
    const json::value st = loader_status(arm);
    if (!st.is_object() || !st.as_object().contains("running") || !st.at("running").as_bool()) continue;
    json::object r;
    bool all = true;
    for (const char *k : {"fetcher_pid", "pid"}) {
      const auto *v = st.as_object().if_contains(k);
      if (v == nullptr || !v->is_number()) continue;
      const pid_t pid = v->to_number<pid_t>();
      const bool gone = stop_foreign_process(pid, 3000);
      r[k] = pid;
      all = all && gone;
    }
    r["stopped"] = all;
    out[arm] = r;
  }
  return out;
}

void ColdStart::finish(json::object &out) {
  if (proxy_) out["proxy_final"] = proxy_->stats();
  proxy_.reset();
  nginx_.reset();
  const bool removed = remove_tree_one_fs(scratch_);
  out["scratch_removed"] = removed;
}

std::string ColdStart::note() const {
  return "Each arm: a fresh runtime root; before it, posix_fadvise(DONTNEED) on every file the server serves "
         "(the store's objects and the tarball), so the server reads them from disk; nothing is dropped "
         "between an arm's fetch and its sandboxes (the files just written stay in the page cache, as on a "
         "real node). Times from the start of the pull / GET to each sandbox's command exiting; the N "
         "sandboxes are created and run at once, one thread each, after the fetch (eager, untar) or right "
         "after the metadata (lazy). bytes_fetched = bytes the throttling proxy passed from the server to "
         "us during the arm (HTTP headers included); fraction = that / image_bytes (du -sb of the image). "
         "bytes_written_local = sectors-written delta of the runtime root's block device, each reading after "
         "syncfs; it includes every other writer on that device (setup measured "
         "device_background_write_bytes_per_s over 3 s: _less_background subtracts that rate times the "
         "arm's duration). root_allocated_bytes = blocks the arm's root holds after its runtime closed. "
         "untar streams the GET into tar -x (no tarball on disk) and stacks the tree as a host-directory "
         "layer. warm: N fresh sandboxes on each arm's layer, eager and lazy alternating per round.";
}

}  // namespace bench
