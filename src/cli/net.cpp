// `sandlet net update` and `sandlet net stats`: a running sandbox's network allowlist.
#include <unistd.h>

#include <string>
#include <vector>

#include "cli.hpp"
#include "json.hpp"

namespace sandlet::cli {
namespace {

constexpr std::string_view kNetUsage =
    "Usage: sandlet net update ID (--allow RULE)... | --deny-all\n"
    "       sandlet net stats ID\n"
    "\n"
    "update: replace a running sandbox's network allowlist in one step. Open connections stay open, but\n"
    "every packet they send is checked against the new rules (docs/NETWORK.md). RULE is\n"
    "[PROTO:]CIDR[:PORTS] with PROTO tcp, udp, icmp or any and PORTS N or N-M, IPv6 in brackets when\n"
    "ports follow: tcp:10.0.0.0/8:443, udp:[fd00::/8]:53, 192.0.2.7.\n"
    "stats: print the sandbox's network denial counters as JSON.\n"
    "\n"
    "Options:\n"
    "      --allow RULE    An allowed destination (repeatable)\n"
    "      --deny-all      Allow nothing but the sandbox's own loopback\n"
    "      --root DIR      State directory (default: $SANDLET_ROOT, else /var/lib/sandlet)\n"
    "  -h, --help          Print this help\n";

}  // namespace

int cmd_net(CommandContext& ctx, const std::vector<std::string>& args) {
  ParsedArgs a;
  if (!parse_command(ctx, {{"allow", 0, true}, {"deny-all", 0, false}}, args, OperandMode::kPermute, kNetUsage, &a))
    return 0;
  if (a.operands.size() != 2) throw UsageError("expected 'update ID' or 'stats ID'");
  const std::string& verb = a.operands[0];
  const std::string& id = a.operands[1];
  if (verb == "stats") {
    if (a.has("allow") || a.has("deny-all")) throw UsageError("stats takes no --allow or --deny-all");
    Runtime rt = open_runtime(ctx.global, /*sweep=*/false);
    write_all(STDOUT_FILENO, rt.attach(id).net_stats_json() + "\n");
    return 0;
  }
  if (verb != "update") throw UsageError("unknown net command '" + verb + "' (update or stats)");
  const bool deny_all = a.has("deny-all");
  if (deny_all == a.has("allow")) throw UsageError("update needs --allow RULE... or --deny-all (not both)");
  json::bj::array allow;
  if (!deny_all)
    for (const std::string& rule : a.all("allow")) allow.emplace_back(rule);  // the library reads the short form
  Runtime rt = open_runtime(ctx.global, /*sweep=*/false);
  rt.attach(id).net_update(json::serialize(json::bj::object{{"allow", std::move(allow)}}));
  write_all(STDOUT_FILENO, id + "\n");
  return 0;
}

}  // namespace sandlet::cli
