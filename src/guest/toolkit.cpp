#include "guest/toolkit.hpp"

#include <elf.h>
#include <fcntl.h>
#include <linux/mount.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstring>

#include "guest/file_rules.hpp"
#include "proto/init_protocol.hpp"

namespace sandlet::guest {
namespace {

bool g_has_toolkit = false;

constexpr const char* kBinDirs[] = {"bin", "usr/bin", "sbin", "usr/sbin"};
constexpr const char* kLibDirs[] = {"lib", "lib64", "usr/lib", "usr/lib64", "lib/x86_64-linux-gnu",
                                    "usr/lib/x86_64-linux-gnu", "lib/aarch64-linux-gnu", "usr/lib/aarch64-linux-gnu"};

// What makes a dynamic loader, a shell or an interpreter load code from elsewhere than the toolkit.
bool loader_influencing(const std::string& kv) {
  static const char* const kPrefixes[] = {"LD_", "GCONV_PATH=", "LOCPATH=", "NLSPATH=", "HOSTALIASES=",
                                          "RESOLV_HOST_CONF=", "GLIBC_TUNABLES=", "MALLOC_", "BASH_ENV=", "ENV=",
                                          "BASH_FUNC_", "SHELLOPTS=", "PS4=", "IFS=", "CDPATH=", "PYTHON",
                                          "PERL5", "PERLLIB=", "RUBYLIB=", "RUBYOPT=", "NODE_OPTIONS=",
                                          "NODE_PATH=", "TMPDIR=", "PATH="};
  for (const char* p : kPrefixes)
    if (kv.compare(0, std::strlen(p), p) == 0) return true;
  return false;
}

// `name` inside the toolkit: symlinks and ".." resolved as if the toolkit were "/", no other mount.
int open_in_toolkit(const char* name, unsigned long flags) {
  struct open_how how = {};
  how.flags = flags | O_CLOEXEC;
  how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV;
  return static_cast<int>(syscall(SYS_openat2, proto::kInitToolkitFd, name, &how, sizeof how));
}

int find_program(const std::string& argv0, std::string* where) {
  if (argv0.find('/') != std::string::npos) {
    *where = argv0;
    return open_in_toolkit(argv0.c_str(), O_RDONLY);
  }
  int saw = ENOENT;
  for (const char* dir : kBinDirs) {
    const std::string candidate = std::string(dir) + "/" + argv0;
    const int fd = open_in_toolkit(candidate.c_str(), O_RDONLY);
    if (fd >= 0) {
      struct stat st;
      if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
        *where = "/" + candidate;
        return fd;
      }
      close(fd);
      saw = EACCES;
    } else if (errno != ENOENT && errno != ENOTDIR) {
      saw = errno;
    }
  }
  errno = saw;
  return -1;
}

std::string toolkit_path_list(const char* const* dirs, size_t n) {
  std::string out;
  for (size_t i = 0; i < n; ++i) {
    if (!out.empty()) out += ':';
    out += std::string(proto::kToolkitPath) + "/" + dirs[i];
  }
  return out;
}

// PT_INTERP of an ELF file ("" for a static one), or "#!" interpreter line; false if neither can be read.
enum class Kind { kStatic, kDynamic, kScript, kUnknown };
Kind inspect(int fd, std::string* interp, std::string* interp_arg) {
  unsigned char head[256];
  const ssize_t n = pread(fd, head, sizeof head, 0);
  if (n >= 2 && head[0] == '#' && head[1] == '!') {
    std::string line(reinterpret_cast<char*>(head) + 2, static_cast<size_t>(n) - 2);
    line = line.substr(0, line.find('\n'));
    size_t b = line.find_first_not_of(" \t");
    if (b == std::string::npos) return Kind::kUnknown;
    size_t e = line.find_first_of(" \t", b);
    *interp = line.substr(b, e == std::string::npos ? std::string::npos : e - b);
    if (e != std::string::npos) {
      size_t a = line.find_first_not_of(" \t", e);
      if (a != std::string::npos) {
        size_t z = line.find_last_not_of(" \t\r");
        *interp_arg = line.substr(a, z - a + 1);
      }
    }
    return Kind::kScript;
  }
  Elf64_Ehdr eh;
  if (pread(fd, &eh, sizeof eh, 0) != static_cast<ssize_t>(sizeof eh) || std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
      eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_phentsize != sizeof(Elf64_Phdr) || eh.e_phnum > 256)
    return Kind::kUnknown;
  for (unsigned i = 0; i < eh.e_phnum; ++i) {
    Elf64_Phdr ph;
    if (pread(fd, &ph, sizeof ph, static_cast<off_t>(eh.e_phoff + i * sizeof ph)) != static_cast<ssize_t>(sizeof ph))
      return Kind::kUnknown;
    if (ph.p_type != PT_INTERP) continue;
    if (ph.p_filesz == 0 || ph.p_filesz > 4096) return Kind::kUnknown;
    interp->resize(ph.p_filesz);
    if (pread(fd, interp->data(), ph.p_filesz, static_cast<off_t>(ph.p_offset)) != static_cast<ssize_t>(ph.p_filesz))
      return Kind::kUnknown;
    interp->resize(std::strlen(interp->c_str()));
    return Kind::kDynamic;
  }
  return Kind::kStatic;
}

Status not_found(const std::string& what, const std::string& name, int e) {
  return make_status(e == ENOENT ? SANDLET_NOT_FOUND : SANDLET_PERMISSION_DENIED, e,
                     "toolkit exec: " + what + " \"" + name + "\" is not in the toolkit (" + std::strerror(e) + ")");
}

}  // namespace

ToolkitLaunch::~ToolkitLaunch() {
  if (exec_fd >= 0) close(exec_fd);
  if (program_fd >= 0) close(program_fd);
}

int toolkit_fd() { return g_has_toolkit ? proto::kInitToolkitFd : -1; }

Status attach_toolkit(int fd) {
  Status st;
  int dot = -1, tmp = -1, fs = -1;
  do {
    if (mkdir("/.sandlet", 0755) != 0 && errno != EEXIST) { st = errno_status(errno, "toolkit: mkdir /.sandlet"); break; }
    struct open_how how = {};
    how.flags = O_PATH | O_DIRECTORY | O_CLOEXEC;
    how.resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
    dot = static_cast<int>(syscall(SYS_openat2, AT_FDCWD, "/.sandlet", &how, sizeof how));
    if (dot < 0) { st = errno_status(errno, "toolkit: open /.sandlet (a symlink or not a directory in the image?)"); break; }
    fs = static_cast<int>(syscall(SYS_fsopen, "tmpfs", FSOPEN_CLOEXEC));
    if (fs < 0 || syscall(SYS_fsconfig, fs, FSCONFIG_SET_STRING, "size", "64k", 0) != 0 ||
        syscall(SYS_fsconfig, fs, FSCONFIG_SET_STRING, "mode", "0755", 0) != 0 ||
        syscall(SYS_fsconfig, fs, FSCONFIG_CMD_CREATE, nullptr, nullptr, 0) != 0) {
      st = errno_status(errno, "toolkit: make the /.sandlet tmpfs");
      break;
    }
    tmp = static_cast<int>(syscall(SYS_fsmount, fs, FSMOUNT_CLOEXEC, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV));
    if (tmp < 0 || mkdirat(tmp, "toolkit", 0755) != 0) { st = errno_status(errno, "toolkit: mount /.sandlet"); break; }
    if (syscall(SYS_move_mount, tmp, "", dot, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) != 0) {
      st = errno_status(errno, "toolkit: attach /.sandlet");
      break;
    }
    if (syscall(SYS_move_mount, fd, "", AT_FDCWD, proto::kToolkitPath, MOVE_MOUNT_F_EMPTY_PATH) != 0) {
      st = errno_status(errno, "toolkit: attach /.sandlet/toolkit");
      break;
    }
    struct mount_attr ro = {};
    ro.attr_set = MOUNT_ATTR_RDONLY;
    if (syscall(SYS_mount_setattr, tmp, "", AT_EMPTY_PATH, &ro, sizeof ro) != 0) {
      st = errno_status(errno, "toolkit: make /.sandlet read-only");
      break;
    }
    if (dup3(fd, proto::kInitToolkitFd, O_CLOEXEC) < 0) { st = errno_status(errno, "toolkit: keep its descriptor"); break; }
    g_has_toolkit = true;
  } while (false);
  for (int f : {dot, tmp, fs, fd})
    if (f >= 0) close(f);
  if (!st.ok()) return st;
  // An empty, read-only /etc/ld.so.preload: made if missing, a symlink replaced by the stand-in's file.
  if (mkdir("/etc", 0755) != 0 && errno != EEXIST) return errno_status(errno, "toolkit: mkdir /etc");
  struct stat sb;
  if (lstat("/etc/ld.so.preload", &sb) != 0 || !S_ISREG(sb.st_mode)) {
    (void)unlink("/etc/ld.so.preload");
    const int f = open("/etc/ld.so.preload", O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (f < 0) return errno_status(errno, "toolkit: create /etc/ld.so.preload");
    close(f);
  }
  return put_stand_in("/etc/ld.so.preload", false);
}

Status toolkit_launch(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                      ToolkitLaunch* out) {
  if (!g_has_toolkit)
    return make_status(SANDLET_FAILED_PRECONDITION, 0,
                       "toolkit exec: this sandbox has no toolkit (set the spec field 'toolkit')");
  std::string where;
  const int prog = find_program(argv[0], &where);
  if (prog < 0) return not_found("command", argv[0], errno);
  std::string interp, interp_arg;
  const Kind kind = inspect(prog, &interp, &interp_arg);
  out->env.clear();
  for (const std::string& kv : env)
    if (!loader_influencing(kv)) out->env.push_back(kv);
  out->env.push_back("PATH=" + toolkit_path_list(kBinDirs, sizeof kBinDirs / sizeof kBinDirs[0]));
  out->argv.clear();
  if (kind == Kind::kStatic || kind == Kind::kUnknown) {  // the kernel says what an unknown format is
    out->exec_fd = prog;
    out->argv = argv;
    return Status::Ok();
  }
  // The program goes to the child as fd 3; the loader or interpreter opens it as /proc/self/fd/3.
  out->program_fd = prog;
  if (kind == Kind::kScript) {
    // One level: the interpreter must be a binary the toolkit has (static, or via the same rules below).
    int ifd = open_in_toolkit(interp.c_str(), O_RDONLY);
    if (ifd < 0) return not_found("interpreter", interp, errno);
    std::string inner, inner_arg;
    const Kind ik = inspect(ifd, &inner, &inner_arg);
    out->argv.push_back(interp);
    if (!interp_arg.empty()) out->argv.push_back(interp_arg);
    out->argv.push_back("/proc/self/fd/3");
    out->argv.insert(out->argv.end(), argv.begin() + 1, argv.end());
    if (ik != Kind::kDynamic) {
      out->exec_fd = ifd;
      return Status::Ok();
    }
    // A dynamic interpreter: exec it by its path in the toolkit through the loader (below).
    close(ifd);
    std::vector<std::string> rest(out->argv.begin() + 1, out->argv.end());
    std::vector<std::string> loader_argv = {std::string(proto::kToolkitPath) + interp};
    interp.swap(inner);
    out->argv = loader_argv;
    out->argv.insert(out->argv.end(), rest.begin(), rest.end());
    // out->argv[0] is now the interpreter's path for the loader
    const int ld = open_in_toolkit(interp.c_str(), O_RDONLY);
    if (ld < 0) return not_found("dynamic loader", interp, errno);
    out->exec_fd = ld;
    std::vector<std::string> a = {interp, "--inhibit-cache", "--library-path",
                                  toolkit_path_list(kLibDirs, sizeof kLibDirs / sizeof kLibDirs[0])};
    a.insert(a.end(), out->argv.begin(), out->argv.end());
    out->argv = std::move(a);
    return Status::Ok();
  }
  const int ld = open_in_toolkit(interp.c_str(), O_RDONLY);
  if (ld < 0) return not_found("dynamic loader", interp, errno);
  out->exec_fd = ld;
  out->argv = {interp, "--inhibit-cache", "--library-path",
               toolkit_path_list(kLibDirs, sizeof kLibDirs / sizeof kLibDirs[0]), "--argv0", argv[0], "/proc/self/fd/3"};
  out->argv.insert(out->argv.end(), argv.begin() + 1, argv.end());
  return Status::Ok();
}

}  // namespace sandlet::guest
