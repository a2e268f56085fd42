// Minimal RAII over the sandlet C ABI (the bench uses sandlet.h only, like any C user would).
#pragma once

#include <sandlet/sandlet.h>

#include <filesystem>
#include <mutex>
#include <set>
#include <string>
#include <vector>

namespace bench {

// Throws BenchError "<what>: CODE: message (errno N)" and frees `err`; does nothing for NULL.
void check(sandlet_error_t *err, const std::string &what);

class Runtime final {
 public:
  // `fetch_unit`: the node loader's, if this runtime starts it (0 = the library's default).
  Runtime(const std::filesystem::path &root, unsigned workers, bool warm_pool, uint32_t fetch_unit = 0);
  ~Runtime() { sandlet_runtime_close(rt_); }
  Runtime(const Runtime &) = delete;
  Runtime &operator=(const Runtime &) = delete;
  sandlet_runtime_t *get() const { return rt_; }

 private:
  sandlet_runtime_t *rt_ = nullptr;
};

class Spec final {
 public:
  explicit Spec(const std::filesystem::path &rootfs);  // one read-only layer, defaults otherwise
  void add_layer(const std::filesystem::path &dir);   // one more, on top
  void set_network_json(const std::string &json);     // "none" or a policy object (docs/NETWORK.md)
  void set_backend(const std::string &name);
  ~Spec() { sandlet_spec_delete(spec_); }
  Spec(const Spec &) = delete;
  Spec &operator=(const Spec &) = delete;
  const sandlet_spec_t *get() const { return spec_; }

 private:
  sandlet_spec_t *spec_ = nullptr;
};

// Owns one handle. destroy() is explicit (it is part of what lifecycle measures); the destructor only
// closes, which for an `owned` sandbox destroys it too.
class Sandbox final {
 public:
  Sandbox() = default;
  explicit Sandbox(sandlet_sandbox_t *sb) : sb_(sb) {}
  Sandbox(Sandbox &&o) noexcept : sb_(o.sb_) { o.sb_ = nullptr; }
  Sandbox &operator=(Sandbox &&o) noexcept {
    if (this != &o) { reset(); sb_ = o.sb_; o.sb_ = nullptr; }
    return *this;
  }
  ~Sandbox() { reset(); }
  void reset() { sandlet_sandbox_close(sb_); sb_ = nullptr; }
  sandlet_sandbox_t *get() const { return sb_; }
  explicit operator bool() const { return sb_ != nullptr; }
  void destroy();

 private:
  sandlet_sandbox_t *sb_ = nullptr;
};

// Creates a sandbox and records its id (for the leftover check at exit).
Sandbox create_sandbox(sandlet_runtime_t *rt, const Spec &spec);

// Runs argv in the sandbox and throws unless it exits 0. *run_ns (may be NULL) gets the in-sandbox
// spawn-to-exit time the library reports.
void exec_ok(const Sandbox &sb, const std::vector<const char *> &argv, std::uint64_t *run_ns = nullptr);

// As exec_ok, and returns the command's stdout.
std::string exec_stdout(const Sandbox &sb, const std::vector<const char *> &argv, double timeout_s = 60);

// sandlet_sandbox_write_file; throws on failure.
void write_file(const Sandbox &sb, const std::string &path, const std::string &data, std::uint32_t mode);

// One-shot run (sandlet_run) of argv in a new sandbox, output to /dev/null; throws unless it exits 0.
// *run_ns (may be NULL) gets the in-sandbox spawn-to-exit time.
void run_ok(sandlet_runtime_t *rt, const Spec &spec, const std::vector<const char *> &argv,
            std::uint64_t *run_ns = nullptr);

// Ids of every sandbox this process created (the leftover check looks for them at exit).
class SandboxRegistry final {
 public:
  static SandboxRegistry &instance();
  void add(const std::string &id);
  std::set<std::string> ids() const;

 private:
  mutable std::mutex mu_;
  std::set<std::string> ids_;
};

}  // namespace bench
