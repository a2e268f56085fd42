// `sandlet policy stats ID`: what a sandbox's policy refused so far (seccomp and network).
#include <unistd.h>

#include <string>
#include <vector>

#include "cli.hpp"
#include "json.hpp"

namespace sandlet::cli {
namespace {

constexpr std::string_view kPolicyUsage =
    "Usage: sandlet policy stats ID\n"
    "\n"
    "stats: print, as JSON, the system calls the sandbox's seccomp policy refused (\"seccomp\": counts by\n"
    "name and the last 64 denials) and its network denials (\"network\", as `sandlet net stats`).\n"
    "The same denials are written to the audit log when the sandbox ends (docs/AUDIT.md).\n"
    "\n"
    "Options:\n"
    "      --root DIR      State directory (default: $SANDLET_ROOT, else /var/lib/sandlet)\n"
    "  -h, --help          Print this help\n";

}  // namespace

int cmd_policy(CommandContext& ctx, const std::vector<std::string>& args) {
  help_for_verb(ctx, {}, args, {"stats"});
  ParsedArgs a;
  if (!parse_command(ctx, {}, args, OperandMode::kPermute, kPolicyUsage, &a)) return 0;
  if (a.operands.size() != 2 || a.operands[0] != "stats") throw UsageError("expected 'stats ID'");
  Runtime rt = open_runtime(ctx.global, /*sweep=*/false);
  Sandbox sb = rt.attach(a.operands[1]);
  json::bj::object out;
  out["seccomp"] = json::bj::parse(sb.seccomp_stats_json());
  out["network"] = json::bj::parse(sb.net_stats_json());
  write_all(STDOUT_FILENO, json::serialize(out) + "\n");
  return 0;
}

}  // namespace sandlet::cli
