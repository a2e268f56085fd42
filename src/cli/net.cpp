// `sandlet net update` and `sandlet net stats`: a running sandbox's network allowlist.
#include <unistd.h>

#include <string>
#include <vector>

#include "cli.hpp"
#include "json.hpp"

namespace sandlet::cli {
namespace {

constexpr std::string_view kNetUsage =
    "Usage: sandlet net update ID (--allow RULE)... [--dns ADDR]... | --deny-all\n"
    "       sandlet net stats ID\n"
    "\n"
    "update: replace a running sandbox's network allowlist in one step. Open connections stay open, but\n"
    "every packet they send is checked against the new rules (docs/NETWORK.md). RULE is\n"
    "[PROTO:]CIDR[:PORTS] with PROTO tcp, udp, icmp or any and PORTS N or N-M, IPv6 in brackets when\n"
    "ports follow: tcp:10.0.0.0/8:443, udp:[fd00::/8]:53, 192.0.2.7; or a DNS name in place of the CIDR\n"
    "(tcp:pypi-mirror.internal:443, tcp:*.example.com:443), which needs --dns. Without --dns the sandbox's\n"
    "resolver is closed.\n"
    "stats: print the sandbox's network denial counters and its resolver's decisions as JSON.\n"
    "\n"
    "Options:\n"
    "      --allow RULE    An allowed destination (repeatable)\n"
    "      --dns ADDR      An upstream resolver (IP address) for the rules by name (repeatable, <= 4)\n"
    "      --deny-all      Allow nothing but the sandbox's own loopback\n"
    "      --root DIR      State directory (default: $SANDLET_ROOT, else /var/lib/sandlet)\n"
    "  -h, --help          Print this help\n";

}  // namespace

int cmd_net(CommandContext& ctx, const std::vector<std::string>& args) {
  static const std::vector<OptionDef> kDefs = {{"allow", 0, true}, {"dns", 0, true}, {"deny-all", 0, false}};
  help_for_verb(ctx, kDefs, args, {"update", "stats"});
  ParsedArgs a;
  if (!parse_command(ctx, kDefs, args, OperandMode::kPermute, kNetUsage, &a)) return 0;
  if (a.operands.size() != 2) throw UsageError("expected 'update ID' or 'stats ID'");
  const std::string& verb = a.operands[0];
  const std::string& id = a.operands[1];
  if (verb == "stats") {
    if (a.has("allow") || a.has("dns") || a.has("deny-all")) throw UsageError("stats takes no --allow, --dns or --deny-all");
    Runtime rt = open_runtime(ctx.global, /*sweep=*/false);
    write_all(STDOUT_FILENO, rt.attach(id).net_stats_json() + "\n");
    return 0;
  }
  if (verb != "update") throw UsageError("unknown net command '" + verb + "' (update or stats)");
  const bool deny_all = a.has("deny-all");
  if (deny_all == a.has("allow")) throw UsageError("update needs --allow RULE... or --deny-all (not both)");
  if (deny_all && a.has("dns")) throw UsageError("--deny-all takes no --dns");
  json::bj::array allow, dns;
  if (!deny_all)
    for (const std::string& rule : a.all("allow")) allow.emplace_back(rule);  // the library reads the short form
  for (const std::string& d : a.all("dns")) dns.emplace_back(d);
  json::bj::object policy{{"allow", std::move(allow)}};
  if (!dns.empty()) policy["dns"] = std::move(dns);
  Runtime rt = open_runtime(ctx.global, /*sweep=*/false);
  rt.attach(id).net_update(json::serialize(policy));
  write_all(STDOUT_FILENO, id + "\n");
  return 0;
}

}  // namespace sandlet::cli
