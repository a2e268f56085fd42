// `sandlet logs`: what is kept of a sandbox for debugging (sandlet_runtime_logs): a live one, or one
// that expired under on_expiry "keep_logs".
#include <unistd.h>

#include <string>
#include <vector>

#include "cli.hpp"
#include "json.hpp"

namespace sandlet::cli {
namespace {

constexpr std::string_view kLogsUsage =
    "Usage: sandlet logs [OPTIONS] ID\n"
    "\n"
    "Show what is kept of a sandbox: the last output of its commands (the last 16 execs, the last 4000\n"
    "bytes of each stream; kept when its spec has on_expiry keep_logs or keep) and its audit trail. Works\n"
    "for a live sandbox and for one that expired under on_expiry keep_logs, until its keep_s passed (or\n"
    "'sandlet rm ID' drops it). 'sandlet ps --all' lists the expired ones.\n"
    "\n"
    "Options:\n"
    "      --json          Print the JSON document (sandlet.h: sandlet_runtime_logs)\n"
    "      --root DIR      State directory (default: $SANDLET_ROOT, else /var/lib/sandlet)\n"
    "  -h, --help          Print this help\n";

// One exec of "last_output" as a shell-like transcript entry.
std::string exec_entry(const json::bj::value& r) {
  std::string out = "$";
  for (const auto& a : json::items(json::find(r, "argv"))) out += " " + json::text(&a);
  out += "    # " + json::text(json::find(r, "end"));
  if (const json::bj::value* e = json::find(r, "error"))
    out += ", error: " + json::text(json::find(*e, "message"));
  else if (const json::bj::value* t = json::find(r, "timed_out"); t && t->is_bool() && t->as_bool())
    out += ", timed out";
  else if (const json::bj::value* s = json::find(r, "signal"); s && json::number(s) != 0)
    out += ", signal " + json::text(s);
  else
    out += ", exit " + json::text(json::find(r, "exit_code"));
  out += "\n";
  for (const char* stream : {"stdout", "stderr"}) {
    std::string data = json::text(json::find(r, stream));
    if (data.empty()) continue;
    if (data.back() != '\n') data += '\n';
    out += std::string("--- ") + stream + "\n" + data;
  }
  return out;
}

}  // namespace

int cmd_logs(CommandContext& ctx, const std::vector<std::string>& args) {
  static const std::vector<OptionDef> kDefs = {{"json", 0, false}};
  ParsedArgs a;
  if (!parse_command(ctx, kDefs, args, OperandMode::kPermute, kLogsUsage, &a)) return 0;
  if (a.operands.size() != 1) throw UsageError("requires exactly one sandbox ID");
  Runtime rt = open_runtime(ctx.global, /*sweep=*/false);
  const std::string doc = rt.logs(a.operands[0]);
  if (a.has("json")) {
    write_all(STDOUT_FILENO, doc + "\n");
    return 0;
  }
  const json::bj::value v = json::parse(doc);
  std::string out = "sandbox " + json::text(json::find(v, "id")) + ": " + json::text(json::find(v, "state"));
  if (json::find(v, "reason"))
    out += " (" + json::text(json::find(v, "reason")) + " at " + json::text(json::find(v, "ended_at")) +
           "; kept until " + json::text(json::find(v, "keep_until")) + ")";
  out += "\n";
  const auto& execs = json::items(json::find(v, "last_output"));
  out += "\nlast output (" + std::to_string(execs.size()) + " execs):\n";
  for (const auto& r : execs) out += exec_entry(r);
  const auto& audit = json::items(json::find(v, "audit"));
  out += "\naudit trail (" + std::to_string(audit.size()) + " records):\n";
  for (const auto& r : audit) {
    out += json::text(json::find(r, "ts")) + "  " + json::text(json::find(r, "event"));
    if (const json::bj::value* reason = json::find(r, "reason")) out += " reason=" + json::text(reason);
    out += "\n";
  }
  write_all(STDOUT_FILENO, out);
  return 0;
}

}  // namespace sandlet::cli
