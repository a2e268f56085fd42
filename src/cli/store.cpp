// `sandlet layer push`, `sandlet layer pull` and `sandlet loader status`: remote stores and lazy layers
// (sandlet_store.h). The loader's design is in docs/LAZY.md; these commands only show what the library
// returns.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "cli.hpp"
#include "json.hpp"
#include "layer_helpers.hpp"

namespace sandlet::cli {
namespace {

using json::bj::value;

constexpr std::string_view kStoreOption =
    "      --store URL     The remote store (default: $SANDLET_STORE): /path, file:///path,\n"
    "                      http(s)://host[:port]/prefix, s3://bucket[/prefix]?endpoint=URL\n";
constexpr std::string_view kJsonOption = "      --json          Print the library's JSON result\n";

std::string push_usage() {
  return group_usage(
      "layer", "push [OPTIONS] REF",
      "Send layer REF (a digest, a unique prefix or a name) to a remote store, with the layers it needs\n"
      "(its parent chain, a snapshot's stack) and its name. Objects the store already holds are not\n"
      "sent again. REF may name an environment (NAME or NAME@VERSION) instead: its layers go, then its\n"
      "record (layers, env, workdir, user). Prints the digest, then what was sent.\n",
      std::string(kStoreOption) + std::string(kJsonOption));
}

std::string pull_usage() {
  return group_usage(
      "layer", "pull [OPTIONS] REF",
      "Fetch layer REF (a digest or a name the store holds) from a remote store into this one, with the\n"
      "layers it needs; a layer already here is not fetched again. Each object is checked against its\n"
      "digest. A name the store gives an environment pulls its layers and creates that version of the\n"
      "environment here. Prints the digest, whether the layer is lazy, and the bytes fetched of the\n"
      "image's.\n"
      "With --lazy only its metadata is fetched now: sandboxes use the layer at once and the node's\n"
      "loader fetches its data on first read (see `sandlet loader status`). A kernel without what lazy\n"
      "layers need gets a full pull, and the note says why.\n"
      "\n"
      "REF may instead be a registry image, docker://[REGISTRY/]REPOSITORY[:TAG|@sha256:DIGEST]: its\n"
      "layers become store layers and an environment named by the image's canonical reference (or\n"
      "--name) gets its env, workdir and user. Mirrors, plain-HTTP registries, a CA bundle, credentials\n"
      "and the platform come from $SANDLET_REGISTRIES (docs/REGISTRIES.md); credentials also from\n"
      "docker's config.json. A registry image is pulled whole (--lazy does not apply).\n",
      std::string(kStoreOption) + "      --lazy          Fetch metadata only; data on first read\n" +
          "      --name NAME     A registry image: name its environment NAME\n" + std::string(kJsonOption));
}



constexpr std::string_view kLoaderUsage =
    "Usage: sandlet loader COMMAND [ARGS...]\n"
    "\n"
    "The node's loader of lazy layers: one process per runtime root, started on demand, that fetches the\n"
    "data of lazy layers (`sandlet layer pull --lazy`) on first read into a node-wide cache.\n"
    "\n"
    "Commands:\n"
    "  status    Show the loader, its cache and every lazy layer's counters\n"
    "\n"
    "Run 'sandlet loader COMMAND --help' for more information on a command.\n";

std::string status_usage() {
  return group_usage("loader", "status [OPTIONS]",
                     "Show whether the loader runs (it is not started by this), its settings, the cache's use\n"
                     "against its limit, and per lazy layer: image size, bytes fetched, reads served from the\n"
                     "cache (hits) and fetched (misses), fetch latency.\n",
                     kJsonOption);
}

std::string str(const value* v) { return json::text(v); }
double num(const value* v) { return json::number(v); }

std::string percent(double part, double whole) {
  if (whole <= 0) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f%%", 100.0 * part / whole);
  return buf;
}

std::string millis(const value* v) {
  if (v == nullptr || !v->is_number()) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", num(v));
  return buf;
}

// "environment NAME version N" when a push or pull moved an environment ("" otherwise).
std::string environment_line(const value& r) {
  const value* env = json::find(r, "environment");
  if (env == nullptr) return "";
  return "environment " + str(json::find(*env, "name")) + " version " + str(json::find(*env, "version")) + "\n";
}

// A REF of the form SCHEME://... names no layer or environment of a sandlet store: said before any store
// is looked for, so that it is not reported as a missing store. (Registry references a command does take,
// such as pull's docker://, are routed before this.)
void check_ref(std::string_view command, const std::string& ref) {
  const size_t sep = ref.find("://");
  if (sep == std::string::npos) return;
  throw UsageError(std::string(command) + ": '" + ref + "' is not a layer REF (a digest, a unique prefix or a " +
                   "name of the store): layer " + std::string(command) + " takes no " + ref.substr(0, sep + 3) +
                   " reference");
}

// The one operand REF and --store. A --store given empty is a usage slip, and with neither --store nor
// $SANDLET_STORE there is nothing to talk to: both are said here in the CLI's words (the library refuses
// them too, in the C ABI's). The REF is checked first: a reference of another kind is not a missing store.
std::string parse_ref_and_store(const ParsedArgs& a, std::string_view command, std::optional<std::string>* store) {
  if (a.operands.size() != 1)
    throw UsageError(a.operands.empty() ? std::string(command) + ": requires a layer REF"
                                        : std::string(command) + ": unexpected argument '" + a.operands[1] + "'");
  check_ref(command, a.operands[0]);
  if (const std::string* s = a.last("store")) {
    if (s->empty()) throw UsageError(std::string(command) + ": --store requires a URL");
    *store = *s;
  } else {
    const char* env = std::getenv("SANDLET_STORE");
    if (env == nullptr || *env == '\0')
      throw UsageError(std::string(command) + ": no store: pass --store URL or set SANDLET_STORE");
  }
  return a.operands[0];
}

}  // namespace

int layer_push(CommandContext& ctx, const std::vector<std::string>& args) {
  static const std::vector<OptionDef> kDefs = {{"store", 0, true}, {"json", 0, false}};
  ParsedArgs a;
  if (!parse_command(ctx, kDefs, args, OperandMode::kPermute, push_usage(), &a)) return 0;
  std::optional<std::string> store;
  const std::string ref = parse_ref_and_store(a, "push", &store);
  Runtime rt = open_runtime(ctx.global, /*sweep=*/false);
  const value r = parse_result(rt.layer_push(ref, store));
  if (a.has("json")) {
    write_all(STDOUT_FILENO, json::serialize_pretty(r) + "\n");
    return 0;
  }
  std::string out = full_digest(str(json::find(r, "digest"))) + "\n";
  out += "pushed to " + str(json::find(r, "store")) + ": " +
         std::to_string(json::items(json::find(r, "layers")).size()) + " layer(s), " +
         str(json::find(r, "objects_sent")) + " object(s) sent (" + human_size(num(json::find(r, "bytes_sent"))) +
         "), " + str(json::find(r, "objects_skipped")) + " already there\n";
  out += environment_line(r);
  write_all(STDOUT_FILENO, out);
  return 0;
}

namespace {

// `layer pull docker://...`: a registry image, with progress on a terminal.
int pull_image(CommandContext& ctx, const ParsedArgs& a) {
  if (a.operands.size() != 1) throw UsageError("pull: unexpected argument '" + a.operands[1] + "'");
  if (a.last("store")) throw UsageError("pull: --store does not apply to a docker:// image (it comes from its registry)");
  if (a.has("lazy"))
    throw UsageError("pull: --lazy does not apply to a docker:// image: its gzip/zstd layers must be read whole "
                     "(push the pulled layers to a store to pull them lazily on other nodes)");
  const std::string* name = a.last("name");
  Runtime rt = open_runtime(ctx.global, /*sweep=*/false);
  const bool tty = ::isatty(STDERR_FILENO) == 1;
  std::function<void(const char*, size_t, size_t, uint64_t, uint64_t)> progress;
  if (tty)
    progress = [](const char* phase, size_t layer, size_t layers, uint64_t bytes, uint64_t total) {
      const std::string p = phase;
      std::string line;
      if (p == "download") line = "downloading layer " + std::to_string(layer + 1) + "/" + std::to_string(layers) + ": " +
                                  human_size(static_cast<double>(bytes)) + " of " + human_size(static_cast<double>(total));
      else if (p == "import") line = "importing layer " + std::to_string(layer + 1) + "/" + std::to_string(layers);
      else if (p == "manifest") line = "resolving the manifest";
      else return;
      write_all(STDERR_FILENO, "\r\033[K" + line);
    };
  const value r = parse_result(rt.image_pull(a.operands[0], name ? *name : "", progress));
  if (tty) write_all(STDERR_FILENO, "\r\033[K");
  if (a.has("json")) {
    write_all(STDOUT_FILENO, json::serialize_pretty(r) + "\n");
    return 0;
  }
  std::string out = str(json::find(r, "environment")) + "@" + str(json::find(r, "version")) + "\n";
  out += str(json::find(r, "reference")) + " (" + str(json::find(r, "platform")) + ", " +
         str(json::find(r, "manifest_digest")) + ") from " + str(json::find(r, "endpoint")) + ": " +
         str(json::find(r, "blobs_fetched")) + " layer(s) fetched, " + str(json::find(r, "layers_reused")) +
         " already here, " + human_size(num(json::find(r, "bytes_fetched"))) + " received\n";
  write_all(STDOUT_FILENO, out);
  return 0;
}

}  // namespace

int layer_pull(CommandContext& ctx, const std::vector<std::string>& args) {
  static const std::vector<OptionDef> kDefs = {
      {"store", 0, true}, {"lazy", 0, false}, {"name", 0, true}, {"json", 0, false}};
  ParsedArgs a;
  if (!parse_command(ctx, kDefs, args, OperandMode::kPermute, pull_usage(), &a)) return 0;
  if (!a.operands.empty() && a.operands[0].rfind("docker://", 0) == 0) return pull_image(ctx, a);
  if (a.last("name")) throw UsageError("pull: --name applies to a docker:// image only");
  std::optional<std::string> store;
  const std::string ref = parse_ref_and_store(a, "pull", &store);
  Runtime rt = open_runtime(ctx.global, /*sweep=*/false);
  const value r = parse_result(rt.layer_pull(ref, store, a.has("lazy")));
  if (a.has("json")) {
    write_all(STDOUT_FILENO, json::serialize_pretty(r) + "\n");
    return 0;
  }
  const value* lazy = json::find(r, "lazy");
  const bool is_lazy = lazy != nullptr && lazy->is_bool() && lazy->get_bool();
  const double fetched = num(json::find(r, "bytes_fetched")), image = num(json::find(r, "image_bytes"));
  std::string out = full_digest(str(json::find(r, "digest"))) + "\n";
  out += std::string(is_lazy ? "lazy" : "complete") + ": fetched " + human_size(fetched) + " of " +
         human_size(image) + " (" + percent(fetched, image) + ")\n";
  out += environment_line(r);
  write_all(STDOUT_FILENO, out);
  const std::string eager = str(json::find(r, "eager_reason"));
  if (a.has("lazy") && !eager.empty()) write_all(STDERR_FILENO, "note: pulled in full: " + eager + "\n");
  return 0;
}

namespace {

int loader_status(CommandContext& ctx, const std::vector<std::string>& args) {
  static const std::vector<OptionDef> kDefs = {{"json", 0, false}};
  ParsedArgs a;
  if (!parse_command(ctx, kDefs, args, OperandMode::kPermute, status_usage(), &a)) return 0;
  require_no_operands(a);
  Runtime rt = open_runtime(ctx.global, /*sweep=*/false);
  const value s = parse_result(rt.loader_status());
  if (a.has("json")) {
    write_all(STDOUT_FILENO, json::serialize_pretty(s) + "\n");
    return 0;
  }
  std::string out;
  const value* running = json::find(s, "running");
  if (running != nullptr && running->is_bool() && running->get_bool()) {
    out += "loader: running, pid " + str(json::find(s, "pid")) + " (fetcher " + str(json::find(s, "fetcher_pid")) +
           "), started " + format_age(num(json::find(s, "started"))) + "\n";
  } else {
    out += "loader: not running\n";
  }
  const value* cache = json::find(s, "cache");
  const double used = num(json::find(cache, "bytes")), max = num(json::find(cache, "max_bytes"));
  out += "cache: " + human_size(used) + " of " + human_size(max) + " (" + percent(used, max) + "), " +
         str(json::find(cache, "blobs")) + " blob(s) in " + str(json::find(cache, "dir")) + "\n";
  write_all(STDOUT_FILENO, out);
  const auto& layers = json::items(json::find(s, "layers"));
  if (layers.empty()) {
    write_all(STDOUT_FILENO, "no lazy layers\n");
    return 0;
  }
  std::vector<std::vector<std::string>> rows = {
      {"DIGEST", "NAME", "IMAGE", "FETCHED", "HITS", "MISSES", "P50 MS", "P99 MS"}};
  for (const auto& l : layers) {
    const double image = num(json::find(l, "image_bytes")), fetched = num(json::find(l, "fetched_bytes"));
    const value* ms = json::find(l, "fetch_ms");
    rows.push_back({short_digest(str(json::find(l, "digest"))), str(json::find(l, "name")), human_size(image),
                    human_size(fetched) + " (" + percent(fetched, image) + ")", str(json::find(l, "hits")),
                    str(json::find(l, "misses")), millis(json::find(ms, "p50")), millis(json::find(ms, "p99"))});
  }
  print_table(rows);
  return 0;
}

}  // namespace

int cmd_loader(CommandContext& ctx, const std::vector<std::string>& args) {
  return dispatch_sub(ctx, args, kLoaderUsage, {{"status", loader_status}});
}

}  // namespace sandlet::cli
