// sandlet — command-line front end: global options and dispatch.
#include <malloc.h>
#include <unistd.h>

#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "cli.hpp"

namespace sandlet::cli {
namespace {

constexpr std::string_view kUsage =
    "Usage: sandlet [--root DIR] COMMAND [ARGS...]\n"
    "\n"
    "Run commands in isolated sandboxes.\n"
    "\n"
    "Commands:\n"
    "  run       Create a sandbox, run a command in it, destroy it\n"
    "  create    Create a detached sandbox and print its id\n"
    "  exec      Run a command in an existing sandbox\n"
    "  ps        List sandboxes\n"
    "  rm        Destroy sandboxes\n"
    "  logs      Show the last output and audit trail of a sandbox (also one that expired)\n"
    "  pause     Freeze every process of sandboxes (the next exec resumes them)\n"
    "  resume    Let paused sandboxes run on\n"
    "  net       Update or show a running sandbox's network allowlist\n"
    "  policy    Show what a sandbox's policy refused so far (stats)\n"
    "  snapshot  Pack a sandbox's changes into a layer (restore it with create --layer)\n"
    "  fork      Make N sandboxes that carry on from a sandbox or a snapshot\n"
    "  gc        Remove what crashed or expired runs left behind\n"
    "  cp        Copy a file or a directory into or out of a sandbox\n"
    "  layer     Manage the layer store (import, export, ls, inspect, rm, gc, merge, push, pull)\n"
    "  loader    Show the node's loader of lazy layers and its cache (status)\n"
    "  env       Manage environments: named, versioned layer lists (create, ls, rm)\n"
    "  build     Build an environment from a recipe (a Dockerfile subset)\n"
    "  doctor    Report the kernel features sandlet uses here and the paths it takes\n"
    "  audit     Print (and follow) the audit log: execs, lifecycle events, policy denials\n"
    "  metrics   Print or serve (--listen) the platform metrics, Prometheus text format\n"
    "  serve     Serve an HTTP API over sandboxes: --sandbox-fusion (SandboxFusion's /run_code)\n"
    "  version   Print the version\n"
    "  help      Show help for a command\n"
    "\n"
    "Global options:\n"
    "  --root DIR   State directory (default: $SANDLET_ROOT, else /var/lib/sandlet)\n"
    "  --version    Print the version and exit\n"
    "  -h, --help   Print this help and exit\n"
    "\n"
    "Environment:\n"
    "  SANDLET_ROOT   The state directory when --root is not given\n"
    "  SANDLET_STORE  The remote store of `layer push` and `layer pull` when --store is not given\n"
    "\n"
    "Run 'sandlet COMMAND --help' for more information on a command.\n";

int print_version() {
  std::string v = std::string("sandlet version ") + sandlet::version() + " (ABI " +
                  std::to_string(sandlet::abi_version()) + ")\n";
  write_all(STDOUT_FILENO, v);
  return 0;
}

using CommandFn = int (*)(CommandContext&, const std::vector<std::string>&);

struct Command {
  std::string_view name;
  CommandFn fn;
};

constexpr Command kCommands[] = {
    {"run", cmd_run}, {"call", cmd_call}, {"create", cmd_create}, {"exec", cmd_exec}, {"ps", cmd_ps},
    {"rm", cmd_rm},   {"gc", cmd_gc},         {"cp", cmd_cp},     {"layer", cmd_layer},
    {"env", cmd_env}, {"pause", cmd_pause},   {"resume", cmd_resume}, {"doctor", cmd_doctor},
    {"build", cmd_build}, {"snapshot", cmd_snapshot}, {"fork", cmd_fork}, {"loader", cmd_loader},
    {"audit", cmd_audit}, {"logs", cmd_logs},
    {"net", cmd_net},
    {"policy", cmd_policy},
    {"metrics", cmd_metrics},
    {"serve", cmd_serve},
};

CommandFn find_command(std::string_view name) {
  for (const auto& c : kCommands)
    if (c.name == name) return c.fn;
  return nullptr;
}

int dispatch(CommandContext& ctx, int argc, char** argv) {
  int i = 1;
  // Global options come before the command.
  for (; i < argc && argv[i][0] == '-'; ++i) {
    const std::string a = argv[i];
    if (a == "--root") {
      if (i + 1 >= argc) throw UsageError("option '--root' requires a value");
      ctx.global.root = argv[++i];
    } else if (a.rfind("--root=", 0) == 0) {
      ctx.global.root = a.substr(7);
    } else if (a == "--version") {
      return print_version();
    } else if (a == "-h" || a == "--help") {
      write_all(STDOUT_FILENO, kUsage);
      return 0;
    } else {
      throw UsageError("unknown option '" + a + "'");
    }
  }
  if (i >= argc) {
    write_all(STDERR_FILENO, kUsage);
    return kExitUsage;
  }
  ctx.name = argv[i];
  std::vector<std::string> args(argv + i + 1, argv + argc);

  if (ctx.name == "version") return print_version();
  if (ctx.name == "help") {
    if (args.empty()) {
      write_all(STDOUT_FILENO, kUsage);
      return 0;
    }
    CommandFn fn = find_command(args[0]);
    if (fn == nullptr) throw UsageError("unknown command '" + args[0] + "'");
    ctx.name = args[0];
    return fn(ctx, {"--help"});
  }
  CommandFn fn = find_command(ctx.name);
  if (fn == nullptr) throw UsageError("unknown command '" + ctx.name + "'");
  ctx.help_for = ctx.name;
  return fn(ctx, args);
}

}  // namespace

bool parse_command(CommandContext& ctx, const std::vector<OptionDef>& defs, const std::vector<std::string>& args,
                   OperandMode mode, std::string_view usage, ParsedArgs* out) {
  std::vector<OptionDef> all = defs;
  all.push_back({"help", 'h', false});
  all.push_back({"root", 0, true});  // also accepted after the command name
  *out = parse_args(all, args, mode);
  if (out->has("help")) {
    write_all(STDOUT_FILENO, usage);
    return false;
  }
  if (const std::string* root = out->last("root")) ctx.global.root = *root;
  return true;
}

void help_for_verb(CommandContext& ctx, const std::vector<OptionDef>& defs, const std::vector<std::string>& args,
                   std::initializer_list<std::string_view> verbs) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--") return;
    if (a.size() > 1 && a[0] == '-') {
      // A long option's value may follow it (--allow RULE); --root is every command's.
      if (a.size() > 2 && a[1] == '-' && a.find('=') == std::string::npos) {
        const std::string_view name = std::string_view(a).substr(2);
        bool takes = name == "root";
        for (const auto& d : defs) takes = takes || (d.name == name && d.takes_value);
        if (takes) ++i;
      }
      continue;
    }
    for (std::string_view v : verbs)
      if (a == v) ctx.help_for += " " + a;
    return;
  }
}

Runtime open_runtime(const Global& g, bool sweep, bool create_soon) {
  RuntimeOptions opts;
  opts.skip_gc_on_open = !sweep;
  opts.create_soon = create_soon;
  return g.root ? Runtime::open(*g.root, opts) : Runtime::open(nullptr, opts);
}

}  // namespace sandlet::cli

int main(int argc, char** argv) {
  using namespace sandlet::cli;
  // One malloc arena for every thread: a short-lived process gains nothing from per-thread arenas, and
  // each new one costs a 64 MiB reservation plus page faults.
  mallopt(M_ARENA_MAX, 1);
  CommandContext ctx;
  try {
    return dispatch(ctx, argc, argv);
  } catch (const UsageError& e) {
    // The command name, if any, is the first operand that is not a global option.
    std::string where;
    for (int i = 1; i < argc; ++i) {
      if (std::strcmp(argv[i], "--root") == 0) {
        ++i;
        continue;
      }
      if (argv[i][0] != '-') {
        if (find_command(argv[i]) != nullptr) where = argv[i];
        break;
      }
    }
    print_error((where.empty() ? "" : where + ": ") + e.what());
    // The hint names the sub-command of a group where one was reached: its help lists the options.
    const std::string help = ctx.help_for.empty() ? where : ctx.help_for;
    write_all(STDERR_FILENO, "See 'sandlet " + (help.empty() ? std::string() : help + " ") + "--help'.\n");
    return kExitUsage;
  } catch (const sandlet::Error& e) {
    print_error(e.what());
    // INVALID_ARGUMENT names a bad field or flag value: a usage/spec error.
    return e.code() == SANDLET_INVALID_ARGUMENT ? kExitUsage : kExitRuntimeError;
  } catch (const std::exception& e) {
    print_error(e.what());
    return kExitRuntimeError;
  }
}
