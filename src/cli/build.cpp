// `sandlet build`: an environment from a recipe (a Dockerfile subset, docs/BUILD.md), through sandlet_build.
#include <unistd.h>

#include <memory>
#include <string>
#include <vector>

#include "cli.hpp"
#include "json.hpp"

namespace sandlet::cli {
namespace {

constexpr std::string_view kBuildUsage =
    "Usage: sandlet build [OPTIONS] [CONTEXT]\n"
    "\n"
    "Build an environment from RECIPE, a Dockerfile subset: FROM (an environment or store layer), RUN,\n"
    "COPY/ADD of files of CONTEXT (default: the current directory), ENV, WORKDIR, USER, LABEL, ARG.\n"
    "Each RUN, COPY/ADD and WORKDIR runs in a new sandbox and becomes one layer; steps are cached.\n"
    "RUN steps have no network unless --allow or --network gives the build a policy (RUN\n"
    "--network=none opts one step out); the environment made stores no network. Prints\n"
    "\"Step i/N : INSTRUCTION\" for each step (\" (cached)\" when its layer came from the cache)\n"
    "and the output of each RUN on stderr; then, on stdout, NAME@VERSION of the\n"
    "environment made (with --tag) or the digest of the top layer. A failed build leaves no sandbox\n"
    "and no layer behind. Ctrl-C cancels it.\n"
    "\n"
    "Options:\n"
    "  -f, --file RECIPE      The recipe (default: CONTEXT/Dockerfile)\n"
    "  -t, --tag NAME         Make environment NAME of the result (a new version each build)\n"
    "      --build-arg K=V    Value of ARG K (repeatable; a bare K copies it from here). Not secret:\n"
    "                         RUN sees it in its environment and the audit log may show it\n"
    "      --secret id=NAME,src=FILE | id=NAME,env=VAR\n"
    "                         A secret for RUN --mount=type=secret,id=NAME (repeatable): a read-only\n"
    "                         file in that step only, never in a layer, the cache or the audit log\n"
    "      --allow RULE       Let RUN steps reach [PROTO:]CIDR[:PORTS] (repeatable; as a sandbox's\n"
    "                         --allow); a DNS name in place of CIDR needs --dns\n"
    "      --dns ADDR         Upstream resolver (IP) for --allow's rules by name (repeatable, <= 4)\n"
    "      --network MODE     none (default), or a policy as JSON (docs/NETWORK.md; no \"publish\")\n"
    "      --no-cache         Run every step, whatever the build cache holds\n"
    "      --keep-tmp         Keep /tmp and the other paths a snapshot leaves out by default\n"
    "  -q, --quiet            No progress on stderr\n"
    "      --json             Print the build result as JSON on stdout (see sandlet.h)\n"
    "      --root DIR         State directory (default: $SANDLET_ROOT, else /var/lib/sandlet)\n"
    "  -h, --help             Print this help\n"
    "\n"
    "Exit status: 0 when built; 1 when a step failed or the build was cancelled; 2 on bad input\n"
    "(the recipe, the context, a missing FROM).\n";

// The build's network as the library reads it: --network's text, or a policy of --allow's short-form rules
// and --dns's resolvers ("" = none). The library checks it as a sandbox's "network".
std::string network_option(const ParsedArgs& a) {
  if (a.has("allow")) {
    if (a.has("network")) throw UsageError("--allow and --network cannot be combined");
    json::bj::object policy;
    json::bj::array allow, dns;
    for (const auto& r : a.all("allow")) allow.emplace_back(r.c_str());
    for (const auto& d : a.all("dns")) dns.emplace_back(d.c_str());
    policy["allow"] = std::move(allow);
    if (!dns.empty()) policy["dns"] = std::move(dns);
    return json::serialize(json::bj::value(std::move(policy)));
  }
  if (a.has("dns")) throw UsageError("--dns goes with --allow (or put \"dns\" in --network's JSON)");
  return a.last("network") ? *a.last("network") : "";
}

struct Progress {
  bool quiet = false;
  static void callback(void* self, const sandlet_build_event_t* ev) {
    if (static_cast<Progress*>(self)->quiet) return;
    if (ev->stream == 0) {
      std::string line = "Step " + std::to_string(ev->step) + "/" + std::to_string(ev->steps) + " : " + ev->text +
                         (ev->cached ? " (cached)" : "") + "\n";
      write_all(STDERR_FILENO, line);
    } else {
      write_all(STDERR_FILENO, ev->data, ev->len);
    }
  }
};

}  // namespace

int cmd_build(CommandContext& ctx, const std::vector<std::string>& args) {
  static const std::vector<OptionDef> kDefs = {{"file", 'f', true},      {"tag", 't', true},      {"build-arg", 0, true},  {"secret", 0, true},
                                               {"no-cache", 0, false},   {"keep-tmp", 0, false},  {"quiet", 'q', false},
                                               {"json", 0, false},       {"allow", 0, true},      {"dns", 0, true},        {"network", 0, true}};
  ParsedArgs a;
  if (!parse_command(ctx, kDefs, args, OperandMode::kPermute, kBuildUsage, &a)) return 0;
  if (a.operands.size() > 1) throw UsageError("unexpected argument '" + a.operands[1] + "'");
  const std::string context = a.operands.empty() ? "." : a.operands[0];
  const std::string recipe = a.last("file") ? *a.last("file") : context + "/Dockerfile";

  std::vector<std::string> build_args;
  for (const auto& b : a.all("build-arg"))
    if (auto kv = parse_env_flag(b)) build_args.push_back(kv->first + "=" + kv->second);
  std::vector<const char*> c_args;
  for (const auto& b : build_args) c_args.push_back(b.c_str());
  c_args.push_back(nullptr);

  std::vector<std::string> secrets = a.all("secret");
  std::vector<const char*> c_secrets;
  for (const auto& sct : secrets) c_secrets.push_back(sct.c_str());
  c_secrets.push_back(nullptr);

  const std::string network = network_option(a);
  Progress progress;
  progress.quiet = a.has("quiet");
  SignalGuard guard;  // Ctrl-C makes its pipe readable: the library cancels the build and cleans up
  sandlet_build_options_t opts = SANDLET_BUILD_OPTIONS_INIT;
  opts.tag = a.last("tag") ? a.last("tag")->c_str() : nullptr;
  opts.build_args = c_args.data();
  opts.secrets = c_secrets.data();
  opts.network = network.empty() ? nullptr : network.c_str();
  opts.no_cache = a.has("no-cache") ? 1 : 0;
  opts.no_default_excludes = a.has("keep-tmp") ? 1 : 0;
  opts.progress = &Progress::callback;
  opts.progress_user_data = &progress;
  opts.cancel_fd = guard.read_fd();

  Runtime rt = open_runtime(ctx.global, /*sweep=*/false);
  char* raw = nullptr;
  sandlet_error_t* err = sandlet_build(rt.get(), recipe.c_str(), context.c_str(), &opts, &raw);
  if (err != nullptr) {
    const int sig = guard.pending();
    rt.close();  // ends whatever is left before the CLI dies by the signal
    if (sig != 0 && sandlet_error_code(err) == SANDLET_CANCELLED) SignalGuard::die_by(sig);
    detail::check(err);
  }
  std::unique_ptr<char, void (*)(void*)> owned(raw, &sandlet_free);
  const json::bj::value result = json::parse(raw);
  std::string notes;
  for (const auto& n : json::items(json::find(result, "notes"))) notes += "note: " + json::text(&n) + "\n";
  for (const auto& u : json::items(json::find(result, "unused_build_args")))
    notes += "warning: --build-arg " + json::text(&u) + " is not declared by any ARG of the recipe\n";
  if (!progress.quiet) write_all(STDERR_FILENO, notes);
  if (a.has("json")) {
    write_all(STDOUT_FILENO, json::serialize_pretty(result) + "\n");
    return 0;
  }
  const std::string env = json::text(json::find(result, "environment"));
  write_all(STDOUT_FILENO, (env.empty() ? "sha256:" + json::text(json::find(result, "top")) : env) + "\n");
  return 0;
}

}  // namespace sandlet::cli
