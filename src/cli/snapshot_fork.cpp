// `sandlet snapshot` and `sandlet fork`: a sandbox's changes as a layer, and n sandboxes from one state.
#include <unistd.h>

#include <string>
#include <vector>

#include "cli.hpp"
#include "json.hpp"

namespace sandlet::cli {
namespace {

constexpr std::string_view kSnapshotUsage =
    "Usage: sandlet snapshot [OPTIONS] ID\n"
    "\n"
    "Pack the changes sandbox ID made to its files — since it was created, or since its last snapshot —\n"
    "into a store layer of role diff, and print its digest (sha256:<hex>). The sandbox keeps running:\n"
    "its processes are frozen only while the data written since a first pass is copied again. Create a\n"
    "sandbox from it with 'sandlet create --layer sha256:<hex>' (the layers below it come with it).\n"
    "\n"
    "Options:\n"
    "      --exclude PATH   Leave PATH and all below it out (repeatable; the last components may be\n"
    "                       globs, e.g. /work/build/*.o)\n"
    "      --no-default-excludes  Keep what is left out by default: what /tmp and /var/tmp hold,\n"
    "                       /root/.cache, apt's downloaded packages and lists\n"
    "      --full           Every change since the sandbox was created (not since its last snapshot)\n"
    "      --name NAME      Name the layer\n"
    "      --json           Print the whole result (layer, frozen_ns, total_ns, entries, bytes) as JSON\n"
    "      --root DIR       State directory (default: $SANDLET_ROOT, else /var/lib/sandlet)\n"
    "  -h, --help           Print this help\n";

constexpr std::string_view kForkUsage =
    "Usage: sandlet fork [OPTIONS] -n N ID|SNAPSHOT\n"
    "\n"
    "Make N sandboxes that carry on from sandbox ID (one snapshot of it, then N sandboxes on it) or from\n"
    "a snapshot layer, at once, and print their ids, one per line. Each child has the parent's files and\n"
    "spec, a new id, hostname <parent>-<i>, a fresh SANDLET_SEED and /etc/machine-id, and the labels\n"
    "sandlet.parent, sandlet.snapshot and sandlet.fork_index; processes are not forked. The children\n"
    "are detached (they outlive this command, like 'sandlet create'). An operand that names a sandbox of\n"
    "this root is a sandbox; otherwise it is a store layer reference. A child that fails is reported on\n"
    "stderr and the exit status is 1.\n"
    "\n"
    "Options:\n"
    "  -n, --count N        Number of children (1..1024)\n"
    "      --label K=V      Label added to every child (repeatable)\n"
    "      --exclude PATH   Leave PATH out of the fork's snapshot (repeatable)\n"
    "      --copy-secrets   Give the children the parent's secrets too\n"
    "      --root DIR       State directory (default: $SANDLET_ROOT, else /var/lib/sandlet)\n"
    "  -h, --help           Print this help\n";

std::string one_operand(const ParsedArgs& a, const char* what) {
  if (a.operands.empty()) throw UsageError(std::string("requires ") + what);
  if (a.operands.size() > 1) throw UsageError("unexpected argument '" + a.operands[1] + "'");
  return a.operands[0];
}

size_t parse_count(const std::string* text) {
  if (!text) throw UsageError("requires -n N");
  size_t used = 0;
  unsigned long n = 0;
  try {
    n = std::stoul(*text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text->size() || text->empty() || (*text)[0] == '-') throw UsageError("invalid -n '" + *text + "': expected a count");
  return n;
}

// Whether `ref` names a sandbox of this root (else it is a layer reference).
bool is_sandbox(Runtime& rt, const std::string& ref) {
  if (ref.size() != 12 || ref.find_first_not_of("0123456789abcdef") != std::string::npos) return false;
  try {
    rt.attach(ref);
    return true;
  } catch (const Error& e) {
    if (e.code() == SANDLET_NOT_FOUND) return false;
    throw;
  }
}

}  // namespace

int cmd_snapshot(CommandContext& ctx, const std::vector<std::string>& args) {
  static const std::vector<OptionDef> kDefs = {
      {"exclude", 0, true}, {"no-default-excludes", 0, false}, {"full", 0, false}, {"name", 0, true}, {"json", 0, false}};
  ParsedArgs a;
  if (!parse_command(ctx, kDefs, args, OperandMode::kPermute, kSnapshotUsage, &a)) return 0;
  const std::string id = one_operand(a, "a sandbox ID");
  SnapshotOptions o;
  o.exclude = a.all("exclude");
  o.default_excludes = !a.has("no-default-excludes");
  o.full = a.has("full");
  if (const std::string* name = a.last("name")) o.name = *name;
  Runtime rt = open_runtime(ctx.global, /*sweep=*/false);
  Sandbox sb = rt.attach(id);
  const std::string result = sb.snapshot(o);
  if (a.has("json")) {
    write_all(STDOUT_FILENO, result + "\n");
  } else {
    auto doc = json::parse(result);
    write_all(STDOUT_FILENO,
              "sha256:" + std::string(doc.as_object().at("layer").as_object().at("digest").as_string()) + "\n");
  }
  return 0;
}

int cmd_fork(CommandContext& ctx, const std::vector<std::string>& args) {
  static const std::vector<OptionDef> kDefs = {
      {"count", 'n', true}, {"label", 0, true}, {"exclude", 0, true}, {"copy-secrets", 0, false}};
  ParsedArgs a;
  if (!parse_command(ctx, kDefs, args, OperandMode::kPermute, kForkUsage, &a)) return 0;
  const std::string from = one_operand(a, "a sandbox ID or a snapshot");
  ForkOptions o;
  o.n = parse_count(a.last("count"));
  for (const auto& kv : a.all("label")) {
    size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) throw UsageError("invalid --label '" + kv + "': expected K=V");
    o.labels.emplace_back(kv.substr(0, eq), kv.substr(eq + 1));
  }
  o.exclude = a.all("exclude");
  o.copy_secrets = a.has("copy-secrets");
  o.detached = true;
  Runtime rt = open_runtime(ctx.global, /*sweep=*/true, /*create_soon=*/true);
  ForkResult r;
  if (is_sandbox(rt, from)) {
    r = rt.attach(from).fork(o);
  } else {
    r = rt.fork_snapshot(from, nullptr, o);
  }
  int status = 0;
  for (size_t i = 0; i < r.children.size(); ++i) {
    if (r.children[i].valid()) {
      write_all(STDOUT_FILENO, r.children[i].id() + "\n");
    } else {
      write_all(STDERR_FILENO, "sandlet: fork child " + std::to_string(i) + ": " + r.errors[i] + "\n");
      status = kExitRuntimeError;
    }
  }
  return status;
}

}  // namespace sandlet::cli
