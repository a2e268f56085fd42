#include "rootfs.hpp"

#include "common.hpp"
#include "proc.hpp"

#include <ftw.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace bench {
namespace fs = std::filesystem;

void TempDir::create(const std::string &prefix) {
  remove();
  std::string tmpl = "/tmp/" + prefix + "XXXXXX";
  if (mkdtemp(tmpl.data()) == nullptr) throw BenchError("mkdtemp(" + tmpl + "): " + std::strerror(errno));
  path_ = tmpl;
}

void TempDir::remove() noexcept {
  if (path_.empty()) return;
  if (!remove_tree_one_fs(path_))
    std::fprintf(stderr, "sandlet-bench: warning: could not remove all of %s (still mounted?)\n", path_.c_str());
  path_.clear();
}

namespace {
bool g_remove_ok = true;
int remove_entry(const char *path, const struct stat *, int type, struct FTW *) {
  const int rc = (type == FTW_DP) ? rmdir(path) : unlink(path);
  if (rc != 0 && errno != ENOENT) g_remove_ok = false;
  return 0;  // keep going: remove as much as possible
}
}  // namespace

bool remove_tree_one_fs(const fs::path &p) noexcept {
  struct stat st;
  if (lstat(p.c_str(), &st) != 0) return errno == ENOENT;
  g_remove_ok = true;
  // FTW_MOUNT: stay on p's filesystem; FTW_PHYS: never follow symlinks; FTW_DEPTH: children first.
  nftw(p.c_str(), remove_entry, 32, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
  return g_remove_ok && lstat(p.c_str(), &st) != 0;
}

namespace {
bool has_busybox(const fs::path &dir) { return access((dir / "bin/busybox").c_str(), X_OK) == 0; }

fs::path absolute_rootfs(const fs::path &dir, const char *source) {
  std::error_code ec;
  fs::path abs = fs::canonical(dir, ec);
  if (ec || !has_busybox(abs))
    throw BenchError(std::string("rootfs ") + dir.string() + " (from " + source + ") has no executable bin/busybox");
  return abs;
}

// make-rootfs.sh: next to the build tree (build/ inside the source tree) or in the source tree this
// file was compiled from.
fs::path find_make_rootfs(const fs::path &exe_dir) {
  const std::vector<fs::path> candidates{
      exe_dir.parent_path() / "test/fixtures/make-rootfs.sh",
      fs::path(__FILE__).parent_path().parent_path() / "test/fixtures/make-rootfs.sh",
  };
  for (const auto &c : candidates)
    if (access(c.c_str(), X_OK) == 0) return c;
  throw BenchError("no rootfs given (--rootfs or SANDLET_BENCH_ROOTFS) and test/fixtures/make-rootfs.sh not found");
}
}  // namespace

fs::path locate_rootfs(const std::string &flag, const fs::path &exe_dir, TempDir &scratch) {
  if (!flag.empty()) return absolute_rootfs(flag, "--rootfs");
  if (const char *env = std::getenv("SANDLET_BENCH_ROOTFS"); env != nullptr && *env != '\0')
    return absolute_rootfs(env, "SANDLET_BENCH_ROOTFS");
  if (has_busybox(exe_dir / "test-rootfs")) return absolute_rootfs(exe_dir / "test-rootfs", "the build tree");

  const fs::path script = find_make_rootfs(exe_dir);
  scratch.create("sandlet-bench-rootfs.");
  const fs::path dir = scratch.path() / "rootfs";
  const Command build({script.string(), dir.string()});
  std::fprintf(stderr, "sandlet-bench: building a rootfs with %s\n", script.c_str());
  build.run_ok();
  return absolute_rootfs(dir, script.c_str());
}

}  // namespace bench
