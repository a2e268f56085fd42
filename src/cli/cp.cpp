// `sandlet cp`: copy one regular file into or out of a sandbox.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "cli.hpp"

namespace sandlet::cli {
namespace {

constexpr std::string_view kCpUsage =
    "Usage: sandlet cp SRC ID:DST\n"
    "       sandlet cp ID:SRC DST\n"
    "\n"
    "Copy a regular file into a sandbox (its mode is kept) or out of it. A path ending in '/' (or an\n"
    "existing local directory) names a directory: the file keeps its name. '-' is stdin or stdout.\n"
    "A local path that contains ':' can be written as ./a:b.\n"
    "\n"
    "Options:\n"
    "      --root DIR      State directory (default: $SANDLET_ROOT, else /var/lib/sandlet)\n"
    "  -h, --help          Print this help\n";

struct Location {
  bool in_sandbox = false;
  std::string id;
  std::string path;
};

// "ID:PATH" names a sandbox path when the part before the first ':' is non-empty and has no '/'.
Location parse_location(const std::string& arg) {
  Location loc;
  const size_t colon = arg.find(':');
  if (colon != std::string::npos && colon > 0 && arg.find('/') > colon) {
    loc.in_sandbox = true;
    loc.id = arg.substr(0, colon);
    loc.path = arg.substr(colon + 1);
  } else {
    loc.path = arg;
  }
  return loc;
}

std::string base_name(const std::string& path) {
  std::string p = path;
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  const size_t slash = p.rfind('/');
  return slash == std::string::npos ? p : p.substr(slash + 1);
}

// DST naming a directory ("dir/") receives SRC's file name.
std::string complete_destination(const std::string& dst, const std::string& src, bool dst_is_dir) {
  if (!dst_is_dir) return dst;
  if (src == "-") throw UsageError("cannot copy stdin into directory '" + dst + "': name the file");
  return dst + (dst.empty() || dst.back() == '/' ? "" : "/") + base_name(src);
}

void write_local_file(const std::string& path, const std::string& data) {
  if (path == "-") {
    if (!write_all(STDOUT_FILENO, data)) throw std::runtime_error(std::string("stdout: ") + std::strerror(errno));
    return;
  }
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw std::runtime_error(path + ": " + std::strerror(errno));
  const bool ok = write_all(fd, data);
  const int write_errno = errno;
  if (::close(fd) != 0 && ok) throw std::runtime_error(path + ": " + std::strerror(errno));
  if (!ok) throw std::runtime_error(path + ": " + std::strerror(write_errno));
}

}  // namespace

int cmd_cp(CommandContext& ctx, const std::vector<std::string>& args) {
  ParsedArgs a;
  if (!parse_command(ctx, {}, args, OperandMode::kPermute, kCpUsage, &a)) return 0;
  if (a.operands.size() != 2) throw UsageError("requires exactly two arguments: SRC and DST");
  const Location src = parse_location(a.operands[0]);
  const Location dst = parse_location(a.operands[1]);
  if (src.path.empty() || dst.path.empty()) throw UsageError("SRC and DST must name a path");
  if (src.in_sandbox == dst.in_sandbox)
    throw UsageError("exactly one of SRC and DST must be ID:PATH (copying between sandboxes or between "
                     "local paths is not supported)");

  if (dst.in_sandbox) {
    unsigned mode = 0644;
    const std::string data = read_local_file(src.path, &mode);  // refuses non-regular files
    const std::string to = complete_destination(dst.path, src.path, dst.path.back() == '/');
    Runtime rt = open_runtime(ctx.global, /*sweep=*/false);
    Sandbox sb = rt.attach(dst.id);
    sb.write_file(to, data, mode);
    return 0;
  }

  Runtime rt = open_runtime(ctx.global, /*sweep=*/false);
  Sandbox sb = rt.attach(src.id);
  const std::string data = sb.read_file(src.path);
  struct stat st {};
  const bool dst_is_dir = dst.path != "-" && (dst.path.back() == '/' ||
                                              (::stat(dst.path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)));
  // The ABI does not return the file's mode, so a copy out gets 0644 (minus umask) when created.
  write_local_file(complete_destination(dst.path, src.path, dst_is_dir), data);
  return 0;
}

}  // namespace sandlet::cli
