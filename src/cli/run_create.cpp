// `sandlet run`, `sandlet call` and `sandlet create`: build a spec from --spec and flags, create a sandbox.
#include <fcntl.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

#include "cli.hpp"
#include "json.hpp"
#include "sandlet/sandlet_fncall.h"

namespace sandlet::cli {
namespace {

#define SANDLET_SPEC_OPTIONS_HELP                                                                       \
  "Spec options (--spec gives a base JSON spec; flags override it: list flags replace its list,\n"      \
  "map flags set single keys):\n"                                                                      \
  "      --spec FILE        Base spec, JSON (schema: see sandlet.h)\n"                                  \
  "      --layer DIR|REF    Read-only layer, lowest first (repeatable): a directory if it starts\n"     \
  "                         with '/' or '.' (./rootfs is made absolute), else a store layer by\n"      \
  "                         digest or name (see 'sandlet layer')\n"                                   \
  "      --environment NAME[@N]  Store environment (see 'sandlet env'): its layers go below the\n"     \
  "                         --layer ones, its variables/workdir/user are defaults\n"                  \
  "      --backend NAME     container (default); `sandlet doctor` lists this build's backends\n"                             \
  "      --cpus N           CPU quota in CPUs (e.g. 0.5)\n"                                             \
  "      --memory SIZE      Memory limit (e.g. 512M, 2G)\n"                                            \
  "      --pids N           Maximum number of processes\n"                                              \
  "      --disk SIZE        Size of the writable layer (e.g. 1G)\n"                                     \
  "      --network MODE     none (default), or a policy as JSON (docs/NETWORK.md)\n"                     \
  "      --allow RULE       Allowed destination [PROTO:]CIDR[:PORTS] (repeatable; a policy); a DNS name\n"  \
  "                         in place of CIDR (tcp:pypi-mirror.internal:443) needs --dns\n"             \
  "      --dns ADDR         Upstream resolver (IP) for --allow's rules by name (repeatable, <= 4)\n"   \
  "      --label K=V        Label (repeatable)\n"                                                       \
  "      --hostname H       Host name inside the sandbox\n"                                             \
  "  -e, --env K=V          Environment variable (repeatable)\n"                                       \
  "  -e, --env NAME[@N]     Without '=': the same as --environment NAME[@N]. (To copy a variable\n"    \
  "                         from here, write --env K=\"$K\".)\n"                                      \
  "  -w, --workdir DIR      Working directory inside the sandbox\n"                                     \
  "  -u, --user USER        uid[:gid] or a user name from the sandbox's /etc/passwd\n"                  \
  "      --max-lifetime S   Destroy the sandbox after S seconds whatever happens\n"                     \
  "      --idle-timeout S   Destroy the sandbox after S seconds without a request\n"                    \
  "      --keep-on-expiry S At either, stop its processes and keep it S seconds for debugging\n"      \
  "      --keep-logs-on-expiry S  At either, end it but keep its last output and audit trail S\n"    \
  "                         seconds ('sandlet logs ID')\n"                                          \
  "      --accept-weaker G  Create even where this host gives guarantee G only in a weaker form\n"    \
  "                         (repeatable; names: see 'sandlet doctor')\n"                              \
  "      --mount SRC:DST[:ro|rw]  Mount host directory SRC at DST inside (repeatable; read-only\n"    \
  "                         unless :rw; ./dir is made absolute; paths with ':' need --spec)\n"       \
  "      --root DIR         State directory (default: $SANDLET_ROOT, else /var/lib/sandlet)\n"          \
  "  -h, --help             Print this help\n"

constexpr std::string_view kRunUsage =
    "Usage: sandlet run [OPTIONS] [--] CMD [ARG...]\n"
    "\n"
    "Create a sandbox, run CMD in it with its output streamed (without a size limit), then destroy\n"
    "the sandbox.\n"
    "\n"
    "Run options:\n"
    "      --timeout S        Kill the command and everything it started after S seconds\n"
    "  -i, --interactive      Connect this process's stdin to the command (else it reads nothing)\n"
    "\n" SANDLET_SPEC_OPTIONS_HELP
    "\n"
    "Exit status: the command's; 128+N if it was killed by signal N; 124 if --timeout expired;\n"
    "126 if it cannot be executed, 127 if it was not found; 1 on other errors, 2 on usage or spec errors.\n"
    "Ctrl-C destroys the sandbox, then ends the CLI.\n";

constexpr std::string_view kCreateUsage =
    "Usage: sandlet create [OPTIONS]\n"
    "\n"
    "Create a detached sandbox (it outlives this command until `sandlet rm` or its max lifetime)\n"
    "and print its id.\n"
    "\n" SANDLET_SPEC_OPTIONS_HELP;

constexpr std::string_view kCallUsage =
    "Usage: sandlet call [OPTIONS] [--] CMD [ARG...]\n"
    "\n"
    "Run CMD as a call (FnCall, docs/FNCALL.md): in a pooled container of the spec's environment, given\n"
    "back to the pool only if CMD left nothing behind. This process's stdin (unless a terminal) is read\n"
    "to EOF and fed to CMD; its output is printed when it ends.\n"
    "\n"
    "Call options:\n"
    "      --timeout S        Kill the command and everything it started after S seconds\n"
    "\n" SANDLET_SPEC_OPTIONS_HELP
    "\n"
    "Exit status: the command's; 128+N if it was killed by signal N; 124 if --timeout expired;\n"
    "126 if it cannot be executed, 127 if it was not found; 1 on other errors, 2 on usage or spec errors.\n";

#undef SANDLET_SPEC_OPTIONS_HELP

const std::vector<OptionDef> kSpecOptions = {
    {"spec", 0, true},     {"layer", 0, true},        {"backend", 0, true},      {"cpus", 0, true},
    {"memory", 0, true},   {"pids", 0, true},         {"disk", 0, true},         {"network", 0, true},
    {"label", 0, true},    {"hostname", 0, true},     {"env", 'e', true},        {"workdir", 'w', true},
    {"user", 'u', true},   {"max-lifetime", 0, true}, {"idle-timeout", 0, true},
    {"keep-on-expiry", 0, true}, {"keep-logs-on-expiry", 0, true}, {"environment", 0, true}, {"accept-weaker", 0, true}, {"mount", 0, true}, {"allow", 0, true},
    {"dns", 0, true},
};

std::pair<std::string, std::string> split_label(const std::string& flag) {
  const size_t eq = flag.find('=');
  if (eq == std::string::npos || eq == 0) throw UsageError("invalid --label '" + flag + "': expected KEY=VALUE");
  return {flag.substr(0, eq), flag.substr(eq + 1)};
}

// A --layer value: starting with '/' or '.', a host directory (made absolute: the library wants absolute
// paths); anything else, a reference to a layer of the store (digest or name), passed through.
std::string layer_ref(const std::string& value) {
  if (value.empty()) throw UsageError("--layer requires a directory or a layer reference");
  if (value[0] == '/') return value;
  if (value[0] != '.') return value;
  std::error_code ec;
  std::string abs = std::filesystem::absolute(value, ec).lexically_normal().string();
  if (ec) throw UsageError("--layer " + value + ": " + ec.message());
  while (abs.size() > 1 && abs.back() == '/') abs.pop_back();
  return abs;
}

// A --mount value with a relative source ("./data:/data") made absolute; the library checks the rest.
std::string mount_flag(const std::string& value) {
  const size_t colon = value.find(':');
  if (colon == std::string::npos || colon == 0)
    throw UsageError("invalid --mount '" + value + "': expected SRC:DST, SRC:DST:ro or SRC:DST:rw");
  const std::string source = value.substr(0, colon);
  if (source[0] != '.') return value;
  std::error_code ec;
  std::string abs = std::filesystem::absolute(source, ec).lexically_normal().string();
  if (ec) throw UsageError("--mount " + value + ": " + ec.message());
  while (abs.size() > 1 && abs.back() == '/') abs.pop_back();
  return abs + value.substr(colon);
}

// Builds the spec JSON (base file, then flags) and lets the library parse and validate it.
Spec build_spec(const ParsedArgs& a, const char* lifetime) {
  json::bj::value doc = json::bj::object();
  if (const std::string* file = a.last("spec")) {
    std::string text;
    try {
      text = read_local_file(*file, nullptr);
    } catch (const std::exception& e) {
      throw UsageError(std::string("--spec: ") + e.what());
    }
    try {
      doc = json::parse(text);
    } catch (const json::ParseError& e) {
      throw UsageError("--spec " + *file + ": " + e.what());
    }
    if (!doc.is_object()) throw UsageError("--spec " + *file + ": expected a JSON object");
  }
  json::bj::object& spec = doc.get_object();
  auto string = [](const std::string& s) { return json::bj::value(json::bj::string_view(s.data(), s.size())); };

  if (!a.all("layer").empty()) {
    json::bj::array layers;
    for (const auto& l : a.all("layer")) layers.push_back(string(layer_ref(l)));
    spec["layers"] = std::move(layers);
  }
  // The store environment: --environment, or an --env without '='. One at most.
  std::string environment;
  auto set_environment = [&](const std::string& name) {
    if (name.empty()) throw UsageError("--environment requires a NAME");
    if (!environment.empty() && environment != name)
      throw UsageError("more than one environment given ('" + environment + "' and '" + name + "')");
    environment = name;
  };
  for (const auto& e : a.all("environment")) set_environment(e);
  for (const auto& e : a.all("env"))
    if (e.find('=') == std::string::npos) set_environment(e);
  if (!environment.empty()) spec["environment"] = string(environment);
  for (const char* field : {"backend", "hostname", "workdir", "user", "network"}) {
    if (const std::string* v = a.last(field)) spec[field] = string(*v);
  }
  if (const std::string* v = a.last("network"); v && !v->empty() && v->front() == '{') {
    try {
      spec["network"] = json::parse(*v);  // a policy object
    } catch (const json::ParseError& e) {
      throw UsageError("--network: " + std::string(e.what()));
    }
  }
  if (a.has("allow")) {  // rules in the short form, which the library reads
    if (a.has("network")) throw UsageError("--allow and --network cannot be combined");
    json::bj::array allow;
    for (const auto& r : a.all("allow")) allow.emplace_back(r);
    json::bj::array dns;
    for (const auto& d : a.all("dns")) dns.emplace_back(d);
    spec["network"] = json::bj::object{{"allow", std::move(allow)}};
    if (!dns.empty()) spec["network"].as_object()["dns"] = std::move(dns);
  } else if (a.has("dns")) {
    throw UsageError("--dns goes with --allow (or put \"dns\" in --network's JSON)");
  }
  for (const auto& e : a.all("env"))
    if (e.find('=') != std::string::npos)
      if (auto kv = parse_env_flag(e)) json::object_at(spec, "env")[kv->first] = string(kv->second);
  for (const auto& l : a.all("label")) {
    auto [k, v] = split_label(l);
    json::object_at(spec, "labels")[k] = string(v);
  }
  if (const std::string* v = a.last("cpus")) json::object_at(spec, "limits")["cpus"] = json::number_or_string(*v);
  if (const std::string* v = a.last("pids")) json::object_at(spec, "limits")["pids"] = json::number_or_string(*v);
  // Sizes ("512M") are parsed by the library.
  if (const std::string* v = a.last("memory")) json::object_at(spec, "limits")["memory"] = string(*v);
  if (const std::string* v = a.last("disk")) json::object_at(spec, "limits")["disk"] = string(*v);
  if (const std::string* v = a.last("max-lifetime")) spec["max_lifetime_s"] = json::number_or_string(*v);
  if (const std::string* v = a.last("idle-timeout")) spec["idle_timeout_s"] = json::number_or_string(*v);
  if (a.has("keep-on-expiry") && a.has("keep-logs-on-expiry"))
    throw UsageError("give either --keep-on-expiry or --keep-logs-on-expiry, not both");
  if (const std::string* v = a.last("keep-on-expiry")) {
    spec["on_expiry"] = string("keep");
    spec["keep_s"] = json::number_or_string(*v);
  }
  if (const std::string* v = a.last("keep-logs-on-expiry")) {
    spec["on_expiry"] = string("keep_logs");
    spec["keep_s"] = json::number_or_string(*v);
  }
  if (!a.all("accept-weaker").empty()) {
    json::bj::array accepted;
    for (const auto& g : a.all("accept-weaker")) accepted.push_back(string(g));
    spec["accept_weaker"] = std::move(accepted);
  }
  if (!a.all("mount").empty()) {
    json::bj::array mounts;
    for (const auto& m : a.all("mount")) mounts.push_back(string(mount_flag(m)));
    spec["mounts"] = std::move(mounts);
  }
  spec["lifetime"] = lifetime;

  return Spec::from_json(json::serialize(doc));
}

std::vector<OptionDef> with_spec_options(std::vector<OptionDef> extra) {
  extra.insert(extra.end(), kSpecOptions.begin(), kSpecOptions.end());
  return extra;
}

}  // namespace

// This process's descriptor `fd` for the command, or -1 (/dev/null inside) when it is not open here.
int own_fd(int fd) { return ::fcntl(fd, F_GETFD) >= 0 ? fd : -1; }

int cmd_run(CommandContext& ctx, const std::vector<std::string>& args) {
  static const std::vector<OptionDef> kDefs = with_spec_options({{"timeout", 0, true}, {"interactive", 'i', false}});
  ParsedArgs a;
  if (!parse_command(ctx, kDefs, args, OperandMode::kStopAtFirst, kRunUsage, &a)) return 0;
  if (a.operands.empty()) throw UsageError("requires a command (sandlet run [OPTIONS] -- CMD...)");

  CommandOptions cmd;
  cmd.argv = a.operands;
  if (const auto* v = a.last("timeout")) cmd.timeout_s = parse_seconds(*v, "--timeout");
  // Everything that can fail on user input is checked before any sandbox work starts.
  Spec spec = build_spec(a, "owned");

  // Ctrl-C from here on: the library destroys the sandbox, then the CLI dies by the signal.
  SignalGuard guard;
  // Sweeps what crashed runs left, like create (it reads every record of the root: few on an idle one).
  Runtime rt = open_runtime(ctx.global, /*sweep=*/true, /*create_soon=*/true);
  // A one-shot run: the sandbox's init starts the command with our own descriptors as its stdio, so
  // output goes straight to them (nothing relayed through this process).
  RunOptions opts(cmd.argv);
  opts.timeout_s = cmd.timeout_s;
  opts.stdin_fd = a.has("interactive") ? own_fd(STDIN_FILENO) : -1;
  opts.stdout_fd = own_fd(STDOUT_FILENO);
  opts.stderr_fd = own_fd(STDERR_FILENO);
  opts.cancel_fd = guard.read_fd();
  int status;
  try {
    status = status_for_result(rt.run(spec, opts), cmd);
  } catch (const Error& e) {
    if (e.code() == SANDLET_CANCELLED && guard.drain(nullptr) != 0) {
      status = 128 + guard.pending();  // the sandbox is gone; we die by the signal below
    } else {
      status = status_for_start_error(e);
    }
  }
  rt.close();
  if (const int sig = guard.pending()) SignalGuard::die_by(sig);
  return status;
}

// One call: the pool lives as long as this process, so from the CLI it is one container; what the CLI
// gives is the same contract as the library's sandlet_call (and a way to try it from a shell).
int cmd_call(CommandContext& ctx, const std::vector<std::string>& args) {
  static const std::vector<OptionDef> kDefs = with_spec_options({{"timeout", 0, true}});
  ParsedArgs a;
  if (!parse_command(ctx, kDefs, args, OperandMode::kStopAtFirst, kCallUsage, &a)) return 0;
  if (a.operands.empty()) throw UsageError("requires a command (sandlet call [OPTIONS] -- CMD...)");
  double timeout_s = 0;
  if (const auto* v = a.last("timeout")) timeout_s = parse_seconds(*v, "--timeout");
  const std::string spec_json = build_spec(a, "owned").to_json();
  const std::string stdin_data = ::isatty(STDIN_FILENO) ? std::string() : read_local_file("-", nullptr);
  Runtime rt = open_runtime(ctx.global, /*sweep=*/true, /*create_soon=*/true);
  std::vector<const char*> argv;
  for (const auto& s : a.operands) argv.push_back(s.c_str());
  argv.push_back(nullptr);
  sandlet_call_options_t o = SANDLET_CALL_OPTIONS_INIT;
  o.spec_json = spec_json.c_str();
  o.argv = argv.data();
  o.stdin_data = stdin_data.data();
  o.stdin_len = stdin_data.size();
  o.timeout_s = timeout_s;
  sandlet_exec_result_t* r = nullptr;
  if (sandlet_error_t* e = sandlet_call(rt.get(), &o, &r)) {
    Error err(sandlet_error_code(e), sandlet_error_message(e));
    sandlet_error_delete(e);
    rt.close();
    return status_for_start_error(err);
  }
  size_t n = 0;
  const char* out = sandlet_exec_result_stdout(r, &n);
  write_all(STDOUT_FILENO, out, n);
  out = sandlet_exec_result_stderr(r, &n);
  write_all(STDERR_FILENO, out, n);
  int status = sandlet_exec_result_exit_code(r);
  if (sandlet_exec_result_timed_out(r)) {
    print_error("call timed out");
    status = kExitTimedOut;
  } else if (const int sig = sandlet_exec_result_signal(r)) {
    status = 128 + sig;
  }
  sandlet_exec_result_delete(r);
  rt.close();
  return status;
}

int cmd_create(CommandContext& ctx, const std::vector<std::string>& args) {
  static const std::vector<OptionDef> kDefs = with_spec_options({});
  ParsedArgs a;
  if (!parse_command(ctx, kDefs, args, OperandMode::kPermute, kCreateUsage, &a)) return 0;
  if (!a.operands.empty()) throw UsageError("unexpected argument '" + a.operands[0] + "'");

  Spec spec = build_spec(a, "detached");
  Runtime rt = open_runtime(ctx.global, /*sweep=*/true, /*create_soon=*/true);
  Sandbox sb = rt.create(spec);
  write_all(STDOUT_FILENO, sb.id() + "\n");
  return 0;
}

}  // namespace sandlet::cli
