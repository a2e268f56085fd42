// `sandlet ps`, `sandlet rm`, `sandlet gc`.
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "cli.hpp"
#include "json.hpp"
#include "sandlet/sandlet_jobs.h"

namespace sandlet::cli {
namespace {

constexpr std::string_view kPsUsage =
    "Usage: sandlet ps [OPTIONS]\n"
    "\n"
    "List the sandboxes under the state directory (from every process).\n"
    "\n"
    "Options:\n"
    "  -a, --all           Also those that expired under on_expiry keep_logs (state \"expired\";\n"
    "                      'sandlet logs ID' shows what is kept)\n"
    "      --json          Print a JSON array of the full records\n"
    "  -q, --quiet         Print only the ids\n"
    "      --label K=V     Only sandboxes carrying this label\n"
    "      --root DIR      State directory (default: $SANDLET_ROOT, else /var/lib/sandlet)\n"
    "  -h, --help          Print this help\n";

constexpr std::string_view kRmUsage =
    "Usage: sandlet rm ID [ID...]\n"
    "\n"
    "Destroy sandboxes: kill every process in them and remove their state. Prints each removed id;\n"
    "an id that fails is reported and the exit status is 1. The id of one that expired under on_expiry\n"
    "keep_logs drops what is kept of it.\n"
    "\n"
    "Options:\n"
    "      --root DIR      State directory (default: $SANDLET_ROOT, else /var/lib/sandlet)\n"
    "  -h, --help          Print this help\n";

constexpr std::string_view kPauseUsage =
    "Usage: sandlet pause ID [ID...]\n"
    "       sandlet pause --label KEY=VALUE [--label KEY2=VALUE2...]\n"
    "\n"
    "Freeze every process of sandboxes: their memory, files and connections stay, they use no CPU. The\n"
    "next exec or cp (or 'sandlet resume') lets them run on. Prints each paused id; an id that fails is\n"
    "reported and the exit status is 1. With --label: every sandbox of the root whose labels match all\n"
    "the given pairs, frozen in parallel; prints the result as JSON (matched, paused, already, failed);\n"
    "the exit status is 1 when any failed.\n"
    "\n"
    "Options:\n"
    "      --label K=V     Select by label (repeatable: all must match)\n"
    "      --root DIR      State directory (default: $SANDLET_ROOT, else /var/lib/sandlet)\n"
    "  -h, --help          Print this help\n";

constexpr std::string_view kResumeUsage =
    "Usage: sandlet resume ID [ID...]\n"
    "       sandlet resume --label KEY=VALUE [--label KEY2=VALUE2...]\n"
    "\n"
    "Let the processes of paused sandboxes run on. Prints each resumed id; an id that fails is reported\n"
    "and the exit status is 1. With --label: as 'sandlet pause --label'.\n"
    "\n"
    "Options:\n"
    "      --label K=V     Select by label (repeatable: all must match)\n"
    "      --root DIR      State directory (default: $SANDLET_ROOT, else /var/lib/sandlet)\n"
    "  -h, --help          Print this help\n";

constexpr std::string_view kGcUsage =
    "Usage: sandlet gc\n"
    "\n"
    "Remove what crashed or expired runs left behind (dead sandboxes, sandboxes past their max\n"
    "lifetime, owned sandboxes whose owner died) and print how many sandboxes were removed. Also\n"
    "removes the node's \"sandlet\" parent cgroups when no sandbox is left in them (they stay between\n"
    "runs otherwise).\n"
    "\n"
    "Options:\n"
    "      --root DIR      State directory (default: $SANDLET_ROOT, else /var/lib/sandlet)\n"
    "  -h, --help          Print this help\n";

// A record field, or the same field inside the record's "spec" object.
const json::bj::value* record_field(const json::bj::value& record, std::string_view key) {
  if (const json::bj::value* v = json::find(record, key)) return v;
  return json::find(json::find(record, "spec"), key);
}

std::string created_column(const json::bj::value* v) {
  if (v == nullptr) return "";
  if (v->is_number()) {
    double t = json::number(v);
    // Accept seconds, milliseconds, microseconds or nanoseconds since the epoch.
    while (t > 1e11) t /= 1000;
    return format_age(t);
  }
  return json::text(v);  // e.g. an RFC 3339 string: shown as is
}

std::string labels_column(const json::bj::value* v) {
  std::string out;
  if (v == nullptr || !v->is_object()) return out;
  for (const auto& kv : v->get_object()) {
    if (!out.empty()) out += ',';
    out += std::string(kv.key()) + "=" + json::text(&kv.value());
  }
  return out;
}

}  // namespace

int cmd_ps(CommandContext& ctx, const std::vector<std::string>& args) {
  static const std::vector<OptionDef> kDefs = {
      {"json", 0, false}, {"quiet", 'q', false}, {"label", 0, true}, {"all", 'a', false}};
  ParsedArgs a;
  if (!parse_command(ctx, kDefs, args, OperandMode::kPermute, kPsUsage, &a)) return 0;
  if (!a.operands.empty()) throw UsageError("unexpected argument '" + a.operands[0] + "'");
  std::string filter;
  if (const std::string* l = a.last("label")) {
    if (l->find('=') == std::string::npos || l->front() == '=')
      throw UsageError("invalid --label '" + *l + "': expected KEY=VALUE");
    filter = *l;
  }

  Runtime rt = open_runtime(ctx.global, /*sweep=*/true);
  std::vector<SandboxInfo> list = rt.list(filter);
  if (a.has("all")) {
    const json::bj::value expired = json::parse(rt.expired());
    for (const auto& t : json::items(&expired)) {
      if (!filter.empty()) {
        const size_t eq = filter.find('=');
        const json::bj::value* v = json::find(json::find(t, "labels"), filter.substr(0, eq));
        if (!v || json::text(v) != filter.substr(eq + 1)) continue;
      }
      list.push_back({json::text(json::find(t, "id")), "expired", json::serialize(t)});
    }
  }

  if (a.has("json")) {
    std::string out = "[";
    for (size_t i = 0; i < list.size(); ++i) {
      out += i == 0 ? "\n  " : ",\n  ";
      out += list[i].json.empty() ? "{}" : list[i].json;
    }
    out += list.empty() ? "]\n" : "\n]\n";
    write_all(STDOUT_FILENO, out);
    return 0;
  }
  if (a.has("quiet")) {
    std::string out;
    for (const auto& s : list) out += s.id + "\n";
    write_all(STDOUT_FILENO, out);
    return 0;
  }
  std::vector<std::vector<std::string>> rows = {{"ID", "STATE", "BACKEND", "CREATED", "LABELS"}};
  for (const auto& s : list) {
    json::bj::value record;
    try {
      record = json::parse(s.json);
    } catch (const json::ParseError&) {
      // Show what the list itself says; the record is the library's business.
    }
    rows.push_back({s.id, s.state, json::text(record_field(record, "backend")),
                     created_column(record_field(record, "created_at")),
                     labels_column(record_field(record, "labels"))});
  }
  print_table(rows);
  return 0;
}

int cmd_rm(CommandContext& ctx, const std::vector<std::string>& args) {
  ParsedArgs a;
  if (!parse_command(ctx, {}, args, OperandMode::kPermute, kRmUsage, &a)) return 0;
  if (a.operands.empty()) throw UsageError("requires at least one sandbox ID");

  // No sweep at open: it could remove a dead target between open and attach and turn a successful
  // removal into "not found".
  Runtime rt = open_runtime(ctx.global, /*sweep=*/false);
  return for_each_operand(a.operands, "rm", [&](const std::string& id) {
    try {
      rt.attach(id).destroy();
    } catch (const Error& e) {
      if (e.code() != SANDLET_NOT_FOUND) throw;
      try {
        rt.forget_expired(id);  // one that expired and left its logs
      } catch (const Error& again) {
        if (again.code() != SANDLET_NOT_FOUND) throw;
        throw e;
      }
    }
  });
}

// pause/resume --label: one call for every matching sandbox (sandlet_jobs.h); prints its JSON result.
static int pause_by_label(CommandContext& ctx, const ParsedArgs& a, bool pause) {
  if (!a.operands.empty()) throw UsageError("give either sandbox IDs or --label, not both");
  std::string selector;
  for (const auto& l : a.all("label")) {
    if (l.find('=') == std::string::npos || l.front() == '=' || l.find(',') != std::string::npos)
      throw UsageError("invalid --label '" + l + "': expected KEY=VALUE");
    selector += (selector.empty() ? "" : ",") + l;
  }
  Runtime rt = open_runtime(ctx.global, /*sweep=*/false);
  char* out = nullptr;
  sandlet::detail::check(pause ? sandlet_runtime_pause(rt.get(), selector.c_str(), &out)
                               : sandlet_runtime_resume(rt.get(), selector.c_str(), &out));
  std::string text = std::string(out) + "\n";
  sandlet_free(out);
  write_all(STDOUT_FILENO, text);
  return text.find("\"failed\":[]") == std::string::npos ? 1 : 0;
}

const std::vector<OptionDef> kPauseDefs = {{"label", 0, true}};

int cmd_pause(CommandContext& ctx, const std::vector<std::string>& args) {
  ParsedArgs a;
  if (!parse_command(ctx, kPauseDefs, args, OperandMode::kPermute, kPauseUsage, &a)) return 0;
  if (a.has("label")) return pause_by_label(ctx, a, true);
  if (a.operands.empty()) throw UsageError("requires at least one sandbox ID");
  Runtime rt = open_runtime(ctx.global, /*sweep=*/false);
  return for_each_operand(a.operands, "pause", [&](const std::string& id) { rt.attach(id).pause(); });
}

int cmd_resume(CommandContext& ctx, const std::vector<std::string>& args) {
  ParsedArgs a;
  if (!parse_command(ctx, kPauseDefs, args, OperandMode::kPermute, kResumeUsage, &a)) return 0;
  if (a.has("label")) return pause_by_label(ctx, a, false);
  if (a.operands.empty()) throw UsageError("requires at least one sandbox ID");
  Runtime rt = open_runtime(ctx.global, /*sweep=*/false);
  return for_each_operand(a.operands, "resume", [&](const std::string& id) { rt.attach(id).resume(); });
}

int cmd_gc(CommandContext& ctx, const std::vector<std::string>& args) {
  ParsedArgs a;
  if (!parse_command(ctx, {}, args, OperandMode::kPermute, kGcUsage, &a)) return 0;
  if (!a.operands.empty()) throw UsageError("unexpected argument '" + a.operands[0] + "'");
  // Open without the sweep, or the open would do the work and gc() would report 0.
  Runtime rt = open_runtime(ctx.global, /*sweep=*/false);
  write_all(STDOUT_FILENO, std::to_string(rt.gc()) + "\n");
  return 0;
}

}  // namespace sandlet::cli
