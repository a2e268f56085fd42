// `sandlet audit`: prints the root's audit log (docs/AUDIT.md), oldest record first, optionally only one
// sandbox's, only records of sandboxes carrying labels, only records since a time, and follows it.
#include <poll.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "cli.hpp"

namespace sandlet::cli {
namespace {

constexpr std::string_view kAuditUsage =
    "Usage: sandlet audit [OPTIONS] [ID]\n"
    "\n"
    "Print the audit log of the state directory, one JSON record per line, oldest first (rotated files\n"
    "included): every exec, lifecycle event (create, running, destroy, pause, resume, snapshot, fork,\n"
    "attach), policy denial and relaxation. With ID, only that sandbox's records.\n"
    "\n"
    "Options:\n"
    "      --label K=V       Only records of sandboxes carrying this label (repeatable: all must match)\n"
    "      --since TIME      Only records at or after TIME: RFC 3339 UTC (2026-12-02T10:00:00Z), Unix\n"
    "                        seconds, or a duration ago (30s, 10m, 2h, 1d)\n"
    "  -f, --follow          Keep printing records as they are written (across rotations)\n"
    "      --timeout SECS    With --follow: stop after this long (default: until interrupted)\n"
    "      --root DIR        State directory (default: $SANDLET_ROOT, else /var/lib/sandlet)\n"
    "  -h, --help            Print this help\n";

// RFC 3339 UTC ("Z"), Unix seconds, or a duration before now.
double parse_since(const std::string& text) {
  const auto bad = [&]() -> UsageError {
    return UsageError("invalid --since '" + text + "': expected RFC 3339 UTC (2026-12-02T10:00:00Z), Unix seconds or 10m");
  };
  if (text.empty()) throw bad();
  struct tm tm = {};
  int consumed = 0;
  if (std::sscanf(text.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour,
                  &tm.tm_min, &tm.tm_sec, &consumed) == 6 && consumed == 19) {
    size_t i = 19;
    double frac = 0;
    if (i < text.size() && text[i] == '.') {
      char* end = nullptr;
      frac = std::strtod(text.c_str() + i, &end);
      i = static_cast<size_t>(end - text.c_str());
    }
    if (i + 1 != text.size() || (text[i] != 'Z' && text[i] != 'z') || tm.tm_mon < 1 || tm.tm_mon > 12)
      throw bad();
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    return static_cast<double>(::timegm(&tm)) + frac;
  }
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || !std::isfinite(v) || v < 0) throw bad();
  const std::string unit(end);
  const double scale = unit.empty() ? 0 : unit == "s" ? 1 : unit == "m" ? 60 : unit == "h" ? 3600 : unit == "d" ? 86400 : -1;
  if (scale < 0) throw bad();
  if (scale == 0) return v;  // Unix seconds
  const double now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  return std::max(0.0, now - v * scale);
}

}  // namespace

int cmd_audit(CommandContext& ctx, const std::vector<std::string>& args) {
  ParsedArgs a;
  if (!parse_command(ctx, {{"label", 0, true}, {"since", 0, true}, {"follow", 'f', false}, {"timeout", 0, true}}, args,
                     OperandMode::kPermute, kAuditUsage, &a))
    return 0;
  if (a.operands.size() > 1) throw UsageError("expected at most one sandbox ID");
  AuditFilter filter;
  if (!a.operands.empty()) filter.sandbox = a.operands[0];
  for (const auto& kv : a.all("label")) {
    const size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) throw UsageError("invalid --label '" + kv + "': expected KEY=VALUE");
    filter.labels[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  if (const std::string* s = a.last("since")) filter.since = parse_since(*s);
  const bool follow = a.has("follow");
  double timeout_s = 0;
  if (const std::string* t = a.last("timeout")) {
    if (!follow) throw UsageError("--timeout needs --follow");
    timeout_s = parse_seconds(*t, "--timeout");
  }
  std::string path;
  {
    Runtime rt = open_runtime(ctx.global, /*sweep=*/false);
    path = rt.audit_path();
  }  // the reader needs no runtime: nothing is held open while following
  AuditReader reader = AuditReader::open(path, filter);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  for (;;) {
    while (auto line = reader.next()) {
      *line += '\n';
      if (!write_all(STDOUT_FILENO, *line)) return kExitRuntimeError;  // stdout closed (e.g. `| head`)
    }
    if (!follow) return 0;
    if (timeout_s > 0 && std::chrono::steady_clock::now() >= deadline) return 0;
    ::poll(nullptr, 0, 100);  // the log is polled: a record shows within a tenth of a second
  }
}

}  // namespace sandlet::cli
