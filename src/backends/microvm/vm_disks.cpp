#include "backends/microvm/vm_disks.hpp"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/error.hpp"
#include "sys/fd.hpp"

extern char** environ;

namespace sandlet::microvm {

void run_tool(const std::vector<std::string>& argv) {
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) throw_errno("pipe");
  sys::UniqueFd rd(p[0]), wr(p[1]);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, wr.get(), 1);
  posix_spawn_file_actions_adddup2(&fa, wr.get(), 2);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  int rc = posix_spawnp(&pid, args[0], &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) throw Error(Code::kUnavailable, "cannot run " + argv[0] + ": " + std::strerror(rc), rc);
  wr.reset();
  std::string out;
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(rd.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
    if (out.size() > 8192) out.erase(0, out.size() - 8192);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return;
  while (!out.empty() && out.back() == '\n') out.pop_back();
  throw Error(Code::kInternal, argv[0] + " failed (" +
                                   (WIFEXITED(status) ? "exit status " + std::to_string(WEXITSTATUS(status))
                                                      : "signal " + std::to_string(WTERMSIG(status))) +
                                   ")" + (out.empty() ? "" : ": " + out.substr(out.rfind('\n') == std::string::npos ? 0 : out.rfind('\n') + 1)));
}

void pack_directory(const std::string& dir, const std::string& image) {
  run_tool({"mkfs.erofs", "--quiet", "-x-1", image, dir});
}

void make_writable_disk(const std::string& path, uint64_t bytes) {
  sys::UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
  if (!fd) throw_errno("create the writable disk " + path);
  if (::ftruncate(fd.get(), static_cast<off_t>(bytes)) != 0) throw_errno("size the writable disk " + path);
  fd.reset();
  // No journal: nothing survives the VM's end anyway. lazy_itable_init: the inode tables are not zeroed
  // now (the guest kernel does it in the background when it needs to).
  run_tool({"mkfs.ext4", "-q", "-F", "-O", "^has_journal", "-E", "lazy_itable_init=1,nodiscard", "-m", "0", path});
}

}  // namespace sandlet::microvm
