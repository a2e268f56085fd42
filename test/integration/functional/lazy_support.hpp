// Shared by the lazy-layer tests (lazy_test.cpp, lazy_microvm_test.cpp): a source root that pushes a tree
// to a directory store and a node root that pulls it lazily, and the probes they use.
#pragma once
#include <signal.h>
#include <fcntl.h>
#include <sys/fanotify.h>
#include <sys/stat.h>

#include <boost/json.hpp>
#include <algorithm>
#include <functional>
#include <future>
#include <optional>

#include "integration/harness.hpp"
#include "support/fault_proxy.hpp"
#include "support/store_servers.hpp"


namespace lazy_support {

namespace json = boost::json;

// Probed, never read off the kernel's version: a pre-content group and a FAN_PRE_ACCESS mark on a file.
inline std::string precontent_missing() {
  static std::string why = [] {
    int g = ::fanotify_init(0x08 /* FAN_CLASS_PRE_CONTENT */ | FAN_CLOEXEC, O_RDWR);
    if (g < 0) return std::string("fanotify_init(FAN_CLASS_PRE_CONTENT): ") + std::strerror(errno);
    char path[] = "/tmp/sandlet-precontent-XXXXXX";
    int f = ::mkstemp(path);
    std::string out;
    if (f < 0 || ::fanotify_mark(g, FAN_MARK_ADD, 0x00100000 /* FAN_PRE_ACCESS */, f, nullptr) != 0)
      out = std::string("the kernel has no fanotify pre-content events: ") + std::strerror(errno);
    if (f >= 0) {
      ::unlink(path);
      ::close(f);
    }
    ::close(g);
    return out;
  }();
  return why;
}

inline json::object parse(const std::string& s) { return json::parse(s).as_object(); }

// A loader holder process serving `root` (its argv: ... holder --root ROOT ...).
inline bool loader_running(const std::string& root) {
  std::error_code ec;
  for (auto& e : fs::directory_iterator("/proc", ec)) {
    std::string cmd = slurp(e.path().string() + "/cmdline");
    std::replace(cmd.begin(), cmd.end(), '\0', ' ');
    if (cmd.find("sandlet-loader") != std::string::npos && cmd.find(" holder --root " + root + " ") != std::string::npos)
      return true;
  }
  return false;
}

// A process that has exited (a zombie, or reaped): its descriptors are closed.
inline bool exited(pid_t pid) {
  std::string stat = slurp("/proc/" + std::to_string(pid) + "/stat");
  auto paren = stat.rfind(')');
  return paren == std::string::npos || paren + 2 >= stat.size() || stat[paren + 2] == 'Z' || stat[paren + 2] == 'X';
}

inline uint64_t u64(const json::value& v) { return v.is_uint64() ? v.as_uint64() : static_cast<uint64_t>(v.as_int64()); }

// A source root that imports a tree and pushes it to a directory store, and a node root that pulls it.
struct LazyFixture {
  std::string tmp, store, src_root, node_root;
  sandlet::Runtime src, node;
  explicit LazyFixture(uint32_t fill_timeout_ms = 60000, uint64_t cache_max = 0) {
    char tmpl[] = "/tmp/sandlet-lazy-XXXXXX";
    tmp = ::mkdtemp(tmpl);
    store = tmp + "/store";
    src_root = tmp + "/src";
    node_root = tmp + "/node";
    src = sandlet::Runtime::open(src_root);
    sandlet::RuntimeOptions o;
    o.fill_timeout_ms = fill_timeout_ms;
    o.cache_max_bytes = cache_max;
    o.disable_warm_pool = true;  // a pooled sandbox keeps its layers mounted (and attached)
    node = sandlet::Runtime::open(node_root, o);
  }
  ~LazyFixture() {
    src.close();
    node.close();  // its sandboxes reclaimed, their layers released and detached from the loader
    {
      auto again = sandlet::Runtime::open(node_root);
      again.gc();  // stops the loader: nothing is attached any more
    }
    // No loader of this root is left running.
    CHECK(wait_until([&] { return !loader_running(node_root); }, 5));
    test_support::sweep_and_remove_root(src_root);
    test_support::sweep_and_remove_root(node_root);
    std::error_code ec;
    fs::remove_all(tmp, ec);
  }
  // Imports `dir` into the source, pushes it; returns its digest.
  std::string publish(const std::string& dir, const std::string& name) {
    sandlet::LayerImportOptions io;
    io.name = name;
    auto imported = parse(src.layer_import(dir, io));
    std::string digest(imported.at("layers").as_array().back().as_object().at("digest").as_string());
    auto pushed = parse(src.layer_push(digest, store));
    REQUIRE(std::string(pushed.at("digest").as_string()) == digest);
    return digest;
  }
  json::object status() { return parse(node.loader_status()); }
  std::string loader_log() { return slurp(node_root + "/loader/loader.log"); }
  json::object layer_status(const std::string& digest) {
    json::object st = status();  // (a temporary's array would dangle in the loop)
    for (const auto& l : st.at("layers").as_array())
      if (l.as_object().at("digest").as_string() == digest) return l.as_object();
    return {};
  }
};

// A tree with files of every size class and known content, under `dir`.
inline void make_tree(const std::string& dir, int files, size_t big) {
  fs::create_directories(dir + "/bin");
  fs::copy(SANDLET_TEST_ROOTFS, dir, fs::copy_options::recursive | fs::copy_options::copy_symlinks |
                                         fs::copy_options::overwrite_existing);
  fs::create_directories(dir + "/data");
  for (int i = 0; i < files; ++i) {
    std::ofstream f(dir + "/data/f" + std::to_string(i));
    size_t n = (i % 4 == 0) ? big + static_cast<size_t>(i) * 4099 : 3000 + static_cast<size_t>(i) * 977;
    std::string s(n, '\0');
    for (size_t k = 0; k < n; ++k) s[k] = static_cast<char>((k * 131 + static_cast<size_t>(i) * 7) % 251);
    f << s;
  }
}

inline constexpr const char* kSums = "cd /data && sha256sum * | sha256sum";


}  // namespace lazy_support
