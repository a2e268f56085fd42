// The conformance suite's entry point.
//
// SANDLET_CONFORMANCE_BACKENDS: the backends to test, separated by commas or spaces (default "container";
// ctest passes the list of test/CMakeLists.txt, the one place where a new backend adds itself). With one
// backend the Catch2 session runs in this process; with several, this binary runs itself once per backend.
// A backend this build knows but this host cannot run is a skip (exit 77, the reason printed); one this
// build does not know is a failure.
// SANDLET_CONFORMANCE_ROOTFS: the layer every sandbox gets (default: the build's busybox root filesystem).
#define CATCH_CONFIG_RUNNER
#include <spawn.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <iostream>
#include <sstream>

#include "conformance/conformance.hpp"

extern char** environ;

namespace conformance {
namespace {

std::string g_backend;
std::string g_rootfs;
std::string g_self;

std::vector<std::string> backend_list() {
  const char* env = ::getenv("SANDLET_CONFORMANCE_BACKENDS");
  std::string list = env != nullptr && *env != '\0' ? env : "container";
  for (char& c : list)
    if (c == ',') c = ' ';
  std::istringstream in(list);
  std::vector<std::string> out;
  for (std::string b; in >> b;) out.push_back(b);
  return out;
}

// 0 when this host runs `name`; 77 (printed why) when the build knows it but the host cannot; 1 otherwise.
int availability(const std::string& name) {
  char tmpl[] = "/tmp/sandlet-conformance-probe-XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) return 1;
  int rc = 1;
  try {
    sandlet::RuntimeOptions o;
    o.disable_warm_pool = true;
    auto rt = sandlet::Runtime::open(tmpl, o);
    std::string known;
    for (const auto& b : rt.backends()) {
      known += " " + b.name;
      if (b.name != name) continue;
      rc = b.available ? 0 : 77;
      if (!b.available) std::cout << "SKIP: backend " << name << " is not available here: " << b.reason << "\n";
    }
    if (rc == 1) std::cerr << "conformance: this build has no backend '" << name << "' (it has:" << known << ")\n";
  } catch (const sandlet::Error& e) {
    std::cerr << "conformance: cannot open a runtime: " << e.what() << "\n";
  }
  std::error_code ec;
  std::filesystem::remove_all(tmpl, ec);
  return rc;
}

// Runs this binary once per backend; fails if any run failed, skips if every run skipped.
int run_each(const std::vector<std::string>& backends, char** argv) {
  int failed = 0, skipped = 0;
  for (const auto& b : backends) {
    const std::string assignment = "SANDLET_CONFORMANCE_BACKENDS=" + b;
    std::vector<char*> env;
    for (char** e = environ; *e != nullptr; ++e)
      if (std::string(*e).rfind("SANDLET_CONFORMANCE_BACKENDS=", 0) != 0) env.push_back(*e);
    env.push_back(const_cast<char*>(assignment.c_str()));
    env.push_back(nullptr);
    pid_t pid = -1;
    if (::posix_spawn(&pid, g_self.c_str(), nullptr, nullptr, argv, env.data()) != 0) return 1;
    int status = 0;
    ::waitpid(pid, &status, 0);
    const int rc = WIFEXITED(status) ? WEXITSTATUS(status) : 1;
    std::cout << "conformance: backend " << b << ": " << (rc == 0 ? "passed" : rc == 77 ? "skipped" : "FAILED")
              << "\n";
    failed += rc != 0 && rc != 77;
    skipped += rc == 77;
  }
  if (failed) return 1;
  return skipped == static_cast<int>(backends.size()) ? 77 : 0;
}

}  // namespace

const std::string& backend() { return g_backend; }
const std::string& rootfs() { return g_rootfs; }
const std::string& self_exe() { return g_self; }

}  // namespace conformance

int main(int argc, char** argv) {
  using namespace conformance;
  std::error_code ec;
  g_self = std::filesystem::canonical("/proc/self/exe", ec).string();
  const char* rootfs = ::getenv("SANDLET_CONFORMANCE_ROOTFS");
  g_rootfs = rootfs != nullptr && *rootfs != '\0' ? rootfs : SANDLET_TEST_ROOTFS;
  const auto backends = backend_list();
  if (backends.empty()) {
    std::cerr << "conformance: SANDLET_CONFORMANCE_BACKENDS names no backend\n";
    return 1;
  }
  g_backend = backends.front();
  if (argc > 1 && std::string(argv[1]) == "--owner") return owner_main(argc - 2, argv + 2);
  if (backends.size() > 1) return run_each(backends, argv);
  if (const int rc = availability(g_backend); rc != 0) return rc;
  std::cout << "conformance: backend " << g_backend << ", layer " << g_rootfs << "\n";
  return Catch::Session().run(argc, argv);
}
