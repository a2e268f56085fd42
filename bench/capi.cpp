#include "capi.hpp"

#include "common.hpp"


namespace bench {

void check(sandlet_error_t *err, const std::string &what) {
  if (err == nullptr) return;
  std::string msg = what + ": " + sandlet_code_name(sandlet_error_code(err)) + ": " + sandlet_error_message(err);
  if (int e = sandlet_error_errno(err); e != 0 && msg.find("errno") == std::string::npos)
    msg += " (errno " + std::to_string(e) + ")";
  sandlet_error_delete(err);
  throw BenchError(msg);
}

Runtime::Runtime(const std::filesystem::path &root, unsigned workers, bool warm_pool, uint32_t fetch_unit) {
  sandlet_runtime_options_t opts = SANDLET_RUNTIME_OPTIONS_INIT;
  opts.fetch_unit = fetch_unit;
  opts.worker_threads = workers;
  opts.disable_warm_pool = warm_pool ? 0 : 1;
  check(sandlet_runtime_open(root.c_str(), &opts, &rt_), "sandlet_runtime_open(" + root.string() + ")");
}

Spec::Spec(const std::filesystem::path &rootfs) {
  check(sandlet_spec_new(&spec_), "sandlet_spec_new");
  try {
    check(sandlet_spec_add_layer(spec_, rootfs.c_str()), "sandlet_spec_add_layer(" + rootfs.string() + ")");
  } catch (...) {
    sandlet_spec_delete(spec_);
    throw;
  }
}

void Spec::add_layer(const std::filesystem::path &dir) {
  check(sandlet_spec_add_layer(spec_, dir.c_str()), "sandlet_spec_add_layer(" + dir.string() + ")");
}

void Spec::set_backend(const std::string &name) {
  check(sandlet_spec_set_backend(spec_, name.c_str()), "sandlet_spec_set_backend(" + name + ")");
}

void Spec::set_network_json(const std::string &json) {
  check(sandlet_spec_set_network_json(spec_, json.c_str()), "sandlet_spec_set_network_json(" + json + ")");
}

void Sandbox::destroy() {
  check(sandlet_sandbox_destroy(sb_), std::string("sandlet_sandbox_destroy(") + sandlet_sandbox_id(sb_) + ")");
}

Sandbox create_sandbox(sandlet_runtime_t *rt, const Spec &spec) {
  sandlet_sandbox_t *sb = nullptr;
  check(sandlet_sandbox_create(rt, spec.get(), &sb), "sandlet_sandbox_create");
  Sandbox owned(sb);
  if (const char *id = sandlet_sandbox_id(sb); id != nullptr && *id != '\0') SandboxRegistry::instance().add(id);
  return owned;
}

namespace {
void exec_checked(const Sandbox &sb, const std::vector<const char *> &argv, double timeout_s, std::uint64_t *run_ns,
                  std::string *out) {
  std::vector<const char *> args(argv);
  if (args.empty() || args.back() != nullptr) args.push_back(nullptr);
  sandlet_exec_options_t opts = SANDLET_EXEC_OPTIONS_INIT;
  opts.argv = args.data();
  opts.timeout_s = timeout_s;
  sandlet_exec_result_t *res = nullptr;
  check(sandlet_sandbox_exec(sb.get(), &opts, &res), std::string("sandlet_sandbox_exec(") + args[0] + ")");
  const int code = sandlet_exec_result_exit_code(res);
  const int sig = sandlet_exec_result_signal(res);
  const bool timed_out = sandlet_exec_result_timed_out(res) != 0;
  if (run_ns != nullptr) *run_ns = sandlet_exec_result_run_ns(res);
  if (out != nullptr) {
    size_t len = 0;
    const char *o = sandlet_exec_result_stdout(res, &len);
    out->assign(o != nullptr ? o : "", o != nullptr ? len : 0);
  }
  std::string err_text;
  if (code != 0 || sig != 0 || timed_out) {
    size_t len = 0;
    const char *e = sandlet_exec_result_stderr(res, &len);
    if (e != nullptr) err_text.assign(e, std::min<size_t>(len, 500));
  }
  sandlet_exec_result_delete(res);
  if (code != 0 || sig != 0 || timed_out)
    throw BenchError(std::string("exec ") + args[0] + " in sandbox: exit " + std::to_string(code) + ", signal " +
                     std::to_string(sig) + (timed_out ? ", timed out" : "") +
                     (err_text.empty() ? "" : ", stderr: " + err_text));
}
}  // namespace

void exec_ok(const Sandbox &sb, const std::vector<const char *> &argv, std::uint64_t *run_ns) {
  exec_checked(sb, argv, 60, run_ns, nullptr);
}

std::string exec_stdout(const Sandbox &sb, const std::vector<const char *> &argv, double timeout_s) {
  std::string out;
  exec_checked(sb, argv, timeout_s, nullptr, &out);
  return out;
}

void write_file(const Sandbox &sb, const std::string &path, const std::string &data, std::uint32_t mode) {
  check(sandlet_sandbox_write_file(sb.get(), path.c_str(), data.data(), data.size(), mode),
        "sandlet_sandbox_write_file(" + path + ")");
}

void run_ok(sandlet_runtime_t *rt, const Spec &spec, const std::vector<const char *> &argv, std::uint64_t *run_ns) {
  std::vector<const char *> args(argv);
  if (args.empty() || args.back() != nullptr) args.push_back(nullptr);
  sandlet_run_options_t opts = SANDLET_RUN_OPTIONS_INIT;
  opts.argv = args.data();
  opts.timeout_s = 60;
  sandlet_exec_result_t *res = nullptr;
  check(sandlet_run(rt, spec.get(), &opts, &res), std::string("sandlet_run(") + args[0] + ")");
  const int code = sandlet_exec_result_exit_code(res);
  const int sig = sandlet_exec_result_signal(res);
  if (run_ns != nullptr) *run_ns = sandlet_exec_result_run_ns(res);
  sandlet_exec_result_delete(res);
  if (code != 0 || sig != 0)
    throw BenchError(std::string("run ") + args[0] + ": exit " + std::to_string(code) + ", signal " + std::to_string(sig));
}

SandboxRegistry &SandboxRegistry::instance() {
  static SandboxRegistry registry;
  return registry;
}

void SandboxRegistry::add(const std::string &id) {
  std::lock_guard lock(mu_);
  ids_.insert(id);
}

std::set<std::string> SandboxRegistry::ids() const {
  std::lock_guard lock(mu_);
  return ids_;
}

}  // namespace bench
