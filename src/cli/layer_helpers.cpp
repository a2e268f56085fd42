#include "layer_helpers.hpp"

#include <unistd.h>

#include <cstdio>
#include <memory>

namespace sandlet::cli {
namespace {

constexpr std::string_view kRootHelp =
    "      --root DIR      State directory (default: $SANDLET_ROOT, else /var/lib/sandlet)\n"
    "  -h, --help          Print this help\n";

struct CFree {
  void operator()(char* p) const noexcept { sandlet_free(p); }
};

}  // namespace

std::string group_usage(std::string_view group, std::string_view synopsis, std::string_view text,
                        std::string_view options) {
  std::string u = "Usage: sandlet ";
  u += group;
  u += " ";
  u += synopsis;
  u += "\n\n";
  u += text;
  u += "\nOptions:\n";
  u += options;
  u += kRootHelp;
  return u;
}

int dispatch_sub(CommandContext& ctx, const std::vector<std::string>& args, std::string_view usage,
                 std::initializer_list<Sub> subs) {
  if (args.empty()) {
    write_all(STDERR_FILENO, usage);
    return kExitUsage;
  }
  // Options before the subcommand: only --help and --root.
  size_t i = 0;
  for (; i < args.size() && !args[i].empty() && args[i][0] == '-'; ++i) {
    if (args[i] == "-h" || args[i] == "--help") {
      write_all(STDOUT_FILENO, usage);
      return 0;
    }
    if (args[i] == "--root" && i + 1 < args.size()) {
      ctx.global.root = args[++i];
    } else if (args[i].rfind("--root=", 0) == 0) {
      ctx.global.root = args[i].substr(7);
    } else {
      throw UsageError("unknown option '" + args[i] + "'");
    }
  }
  if (i >= args.size()) {
    write_all(STDERR_FILENO, usage);
    return kExitUsage;
  }
  for (const auto& s : subs) {
    if (s.name != args[i]) continue;
    ctx.help_for = ctx.name + " " + args[i];
    return s.fn(ctx, std::vector<std::string>(args.begin() + static_cast<long>(i) + 1, args.end()));
  }
  throw UsageError("unknown command '" + args[i] + "'");
}

json::bj::value take_json(char* raw) {
  std::unique_ptr<char, CFree> owned(raw);
  if (raw == nullptr) return {};
  return json::parse(raw);
}

json::bj::value parse_result(const std::string& text) { return text.empty() ? json::bj::value() : json::parse(text); }

std::string human_size(double bytes) {
  static const char* const kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024 && u < 4) {
    bytes /= 1024;
    ++u;
  }
  char buf[32];
  if (u == 0)
    std::snprintf(buf, sizeof buf, "%.0f %s", bytes, kUnits[u]);
  else
    std::snprintf(buf, sizeof buf, "%.1f %s", bytes, kUnits[u]);
  return buf;
}

// The first 12 hex digits: enough to be unique in any real store, and what `layer ls` shows.
std::string short_digest(const std::string& digest) {
  const size_t colon = digest.find(':');
  return digest.substr(colon == std::string::npos ? 0 : colon + 1, 12);
}

std::string full_digest(const std::string& digest) {
  return digest.find(':') == std::string::npos ? "sha256:" + digest : digest;
}

void require_no_operands(const ParsedArgs& a) {
  if (!a.operands.empty()) throw UsageError("unexpected argument '" + a.operands[0] + "'");
}

}  // namespace sandlet::cli
