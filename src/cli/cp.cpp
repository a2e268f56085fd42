// `sandlet cp`: copy a file or a whole directory into or out of a sandbox, with docker cp's rules for
// where the copy lands, and stdin/stdout as a file's bytes or as a tar stream.
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "cli.hpp"

namespace sandlet::cli {
namespace {

constexpr std::string_view kCpUsage =
    "Usage: sandlet cp [OPTIONS] SRC ID:DST\n"
    "       sandlet cp [OPTIONS] ID:SRC DST\n"
    "\n"
    "Copy a file or a directory with everything under it into a sandbox or out of it, as docker cp does:\n"
    "modes, times, symlinks (never followed), hard links, FIFOs and empty directories are kept.\n"
    "  SRC a directory: a DST that does not exist becomes its copy; an existing directory DST receives it\n"
    "                   as DST/NAME, or receives its contents when SRC ends in \"/.\".\n"
    "  SRC a file:      DST is the copy; an existing directory DST (or DST ending in '/') receives it as\n"
    "                   DST/NAME.\n"
    "Everything made inside belongs to the sandbox's user (--archive: the source's owners). Nothing copied\n"
    "out of a sandbox is written outside DST; it loses set-user/group-ID bits, and its symlinks that would\n"
    "point outside DST are left out (and counted) unless --allow-outside-links.\n"
    "'-' is stdin or stdout: a file's bytes, or with --tar a tar stream (a directory copied to '-' is\n"
    "always one), unpacked at DST / named under SRC's last component. A local path that contains ':' can\n"
    "be written as ./a:b.\n"
    "\n"
    "Options:\n"
    "  -a, --archive       Keep the source's owners (uid and gid)\n"
    "  -L, --follow-link   Follow a symlink named as SRC (links below it are copied as links)\n"
    "      --allow-outside-links  Out of a sandbox: make symlinks that point outside DST, as docker cp does\n"
    "  -r, --recursive     Accepted for familiarity: a directory is always copied whole\n"
    "      --tar           '-' is a tar stream (plain, gzip or zstd in; POSIX tar out)\n"
    "      --user USER     Whose credentials read or write inside (default: the sandbox's user)\n"
    "  -q, --quiet         No progress line (one is shown on a terminal for large trees)\n"
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

bool ends_with(const std::string& s, std::string_view tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

std::string join(const std::string& dir, const std::string& name) {
  return dir + (dir.empty() || dir.back() == '/' ? "" : "/") + name;
}

// Where a copy of `src` lands given `dst` (docker cp's rules): "SRC/." copies contents into DST; an
// existing directory DST (or one named with a trailing '/') receives SRC under its own name.
std::string landing(const std::string& src, const std::string& dst, bool dst_is_dir) {
  if (ends_with(src, "/.") || src == ".") return dst;
  if (dst_is_dir || dst.back() == '/') return join(dst, base_name(src));
  return dst;
}

enum class Kind { kMissing, kDir, kOther, kUnknown };

// What a sandbox path is, through the one call that tells a directory from a file without a stat call: a
// read of at most one byte (a larger file is refused before any data moves). kUnknown (not readable, say):
// the copy itself then says what is wrong.
Kind sandbox_kind(Sandbox& sb, const std::string& path) {
  try {
    sb.read_file(path, 1);
    return Kind::kOther;
  } catch (const Error& e) {
    if (e.err_no() == EISDIR) return Kind::kDir;
    if (e.code() == SANDLET_NOT_FOUND) return Kind::kMissing;
    if (e.code() == SANDLET_OUT_OF_RANGE || e.code() == SANDLET_FAILED_PRECONDITION) return Kind::kOther;
    return Kind::kUnknown;
  }
}

// "copied 1234 entries, 56.7 MiB" on stderr, rewritten in place at most 10 times a second.
class ProgressLine final {
 public:
  explicit ProgressLine(bool enabled) : enabled_(enabled && ::isatty(STDERR_FILENO)) {}
  ~ProgressLine() {
    if (shown_) std::fputc('\n', stderr);
  }
  void update(const sandlet_copy_stats_t& s, bool force = false) {
    if (!enabled_) return;
    const auto now = std::chrono::steady_clock::now();
    // Small copies end before the first line: nothing is printed for them.
    if (!shown_ && now - start_ < std::chrono::milliseconds(500) && !force) return;
    if (!force && now - last_ < std::chrono::milliseconds(100)) return;
    last_ = now;
    shown_ = true;
    std::fprintf(stderr, "\rcopied %llu entries, %.1f MiB", static_cast<unsigned long long>(s.entries),
                 static_cast<double>(s.bytes) / (1 << 20));
    std::fflush(stderr);
  }
  bool shown() const { return shown_; }

 private:
  bool enabled_;
  bool shown_ = false;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now(), last_{};
};

void write_stdout(const std::string& data) {
  if (!write_all(STDOUT_FILENO, data)) throw std::runtime_error(std::string("stdout: ") + std::strerror(errno));
}

}  // namespace

int cmd_cp(CommandContext& ctx, const std::vector<std::string>& args) {
  ParsedArgs a;
  if (!parse_command(ctx,
                     {{"archive", 'a', false}, {"follow-link", 'L', false}, {"recursive", 'r', false}, {"tar", 0, false},
                      {"user", 0, true}, {"quiet", 'q', false}, {"allow-outside-links", 0, false}},
                     args, OperandMode::kPermute, kCpUsage, &a))
    return 0;
  if (a.operands.size() != 2) throw UsageError("requires exactly two arguments: SRC and DST");
  const Location src = parse_location(a.operands[0]);
  const Location dst = parse_location(a.operands[1]);
  if (src.path.empty() || dst.path.empty()) throw UsageError("SRC and DST must name a path");
  if (src.in_sandbox == dst.in_sandbox)
    throw UsageError("exactly one of SRC and DST must be ID:PATH (copying between sandboxes or between "
                     "local paths is not supported)");
  const bool tar = a.has("tar");
  if (tar && src.path != "-" && dst.path != "-") throw UsageError("--tar needs '-' as SRC or DST");

  CopyOptions opts;
  opts.keep_owners = a.has("archive");
  opts.follow_links = a.has("follow-link");
  opts.allow_outside_links = a.has("allow-outside-links");
  if (const std::string* user = a.last("user")) opts.user = *user;
  ProgressLine line(!a.has("quiet"));
  opts.progress = [&line](const sandlet_copy_stats_t& s) { line.update(s); };
  auto done = [&line](const sandlet_copy_stats_t& s) {
    if (line.shown()) line.update(s, true);
    if (s.skipped)
      print_error(std::to_string(s.skipped) + " entries left out: sockets and device nodes (a copy carries none), "
                  "and out of a sandbox symlinks that would point outside the destination (--allow-outside-links)");
    return 0;
  };

  Runtime rt = open_runtime(ctx.global, /*sweep=*/false);
  if (dst.in_sandbox) {
    Sandbox sb = rt.attach(dst.id);
    if (src.path == "-") {
      if (tar) return done(sb.put_archive(STDIN_FILENO, dst.path, opts));
      if (dst.path.back() == '/') throw UsageError("cannot copy stdin into directory '" + dst.path + "': name the file");
      unsigned mode = 0644;
      sb.write_file(dst.path, read_local_file("-", &mode), mode);
      return 0;
    }
    struct stat st {};
    if ((opts.follow_links ? ::stat(src.path.c_str(), &st) : ::lstat(src.path.c_str(), &st)) != 0)
      throw std::runtime_error(src.path + ": " + std::strerror(errno));
    const Kind kind = sandbox_kind(sb, dst.path);
    if (S_ISDIR(st.st_mode) && kind == Kind::kOther && !ends_with(src.path, "/."))
      throw UsageError("cannot copy directory '" + src.path + "' onto '" + dst.path + "', which is not a directory");
    return done(sb.copy_in(src.path, landing(src.path, dst.path, kind == Kind::kDir), opts));
  }

  Sandbox sb = rt.attach(src.id);
  if (dst.path == "-") {
    if (!tar) {
      try {
        write_stdout(sb.read_file(src.path));
        return 0;
      } catch (const Error& e) {
        if (e.err_no() != EISDIR) throw;  // a directory goes out as a tar stream, as docker cp does
      }
    }
    return done(sb.get_archive(src.path, STDOUT_FILENO, opts));
  }
  struct stat st {};
  const bool dst_is_dir = ::stat(dst.path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
  return done(sb.copy_out(src.path, landing(src.path, dst.path, dst_is_dir), opts));
}

}  // namespace sandlet::cli
