// `sandlet layer ...` and `sandlet env ...`: the runtime's layer store and its environments (push and pull:
// store.cpp). These go through the C ABI on the runtime's handle where the C++ wrapper's calls lack an
// option the CLI needs (import progress).
#include <unistd.h>

#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "cli.hpp"
#include "json.hpp"
#include "layer_helpers.hpp"

namespace sandlet::cli {
namespace {

constexpr std::string_view kLayerUsage =
    "Usage: sandlet layer COMMAND [ARGS...]\n"
    "\n"
    "Manage the layer store: content-addressed read-only layers under <root>/layers. A layer is named\n"
    "by its digest (sha256:<hex>, the hex alone, or a unique prefix of at least 12 hex digits) or by\n"
    "its name; `run`/`create --layer` and `env create --layer` accept the same references.\n"
    "\n"
    "Commands:\n"
    "  import    Import a directory, tarball, OCI image layout, `docker save` tarball or exported layer\n"
    "  export    Write a layer to one file that `layer import` reads on another machine\n"
    "  ls        List layers\n"
    "  inspect   Print a layer's record as JSON\n"
    "  rm        Remove layers\n"
    "  gc        Remove unreferenced layers and unused data\n"
    "  merge     Flatten consecutive layers into one\n"
    "  push      Send a layer, with the layers it needs, to a remote store\n"
    "  pull      Fetch a layer from a remote store (--lazy: its data on first read)\n"
    "\n"
    "A remote store is named by a URL (--store URL, default $SANDLET_STORE): a directory (/path or\n"
    "file:///path), http(s)://host[:port]/prefix or s3://bucket[/prefix]?endpoint=URL.\n"
    "\n"
    "Run 'sandlet layer COMMAND --help' for more information on a command.\n";

std::string layer_usage(std::string_view synopsis, std::string_view text, std::string_view options = {}) {
  return group_usage("layer", synopsis, text, options);
}

std::string import_usage() {
  return layer_usage(
      "import [OPTIONS] PATH",
      "Import PATH (a directory, a .tar / .tar.gz / .tar.zst, an OCI image layout directory, a\n"
      "`docker save` tarball or a file `sandlet layer export` wrote) into the store. Atomic. Prints each\n"
      "layer's digest (sha256:<hex>), one per line, lowest first, then `environment NAME` when the import\n"
      "made an environment (OCI images with --name). A layer that was already stored is noted on stderr.\n"
      "Progress is shown on stderr when it is a terminal.\n"
      "An exported layer keeps its digest, role, parent and stack (and its name where it is free here);\n"
      "a file whose content does not match the digest it records is refused. If layers it goes on are\n"
      "not in this store, a warning on stderr names them.\n",
      "      --role ROLE     base (default), workspace, toolkit or diff\n"
      "      --name NAME     Name the layer (an OCI image: the environment made of its layers)\n"
      "      --parent REF    The layer this one goes on top of (diffs)\n"
      "      --no-dedupe     Do not reuse chunks of other layers\n");
}

std::string export_usage() {
  return layer_usage(
      "export [OPTIONS] REF -o FILE",
      "Write layer REF to FILE: a pax tar (`tar tvf FILE` lists it; zstd-compressed when FILE ends in\n"
      ".zst) of its files with all their metadata, after a header with its digest, role, name, parent\n"
      "and stack. `sandlet layer import FILE` on any machine gives the same layer. Atomic: on error no\n"
      "FILE is left. Prints the layer's digest.\n",
      "  -o, --output FILE   The file to write (replaced if it exists)\n"
      "      --zstd-level N  zstd level for a .zst FILE, 1-19 (default 3)\n");
}

std::string ls_usage() {
  return layer_usage("ls [OPTIONS]", "List the layers of the store.\n",
                     "      --json          Print a JSON array of the full records\n");
}

std::string inspect_usage() {
  return layer_usage("inspect REF", "Print the record of a layer as JSON.\n");
}

std::string layer_rm_usage() {
  return layer_usage(
      "rm REF [REF...]",
      "Remove layers. A layer an environment or a live sandbox uses cannot be removed. Prints each\n"
      "removed reference; a reference that fails is reported and the exit status is 1.\n");
}

std::string layer_gc_usage() {
  return layer_usage(
      "gc",
      "Remove the layers that no environment, name, live sandbox or kept layer's parent chain refers\n"
      "to, then data no layer uses. Prints each removed layer and blob, then the bytes freed.\n");
}

std::string merge_usage() {
  return layer_usage(
      "merge [OPTIONS] REF REF [REF...]",
      "Flatten two or more consecutive layers (lowest first) into one new layer and print its digest.\n",
      "      --name NAME     Name the new layer\n"
      "      --role ROLE     base (default), workspace, toolkit or diff\n");
}

constexpr std::string_view kEnvUsage =
    "Usage: sandlet env COMMAND [ARGS...]\n"
    "\n"
    "Manage environments: named, versioned lists of store layers with defaults (variables, working\n"
    "directory, user). `sandlet run --env NAME[@N]` (or --environment) runs in one.\n"
    "\n"
    "Commands:\n"
    "  create    Create an environment, or a new version of it\n"
    "  ls        List environments\n"
    "  rm        Remove environments (every version)\n"
    "\n"
    "Run 'sandlet env COMMAND --help' for more information on a command.\n";

std::string env_usage(std::string_view synopsis, std::string_view text, std::string_view options = {}) {
  return group_usage("env", synopsis, text, options);
}

std::string env_create_usage() {
  return env_usage(
      "create NAME --layer REF [--layer REF...] [OPTIONS]",
      "Create environment NAME, or a new version of it, and print NAME@VERSION.\n",
      "      --layer REF     Store layer by digest or name, lowest first (repeatable; at least one)\n"
      "  -e, --env K=V       Default environment variable (repeatable; a bare K copies it from here)\n"
      "  -w, --workdir DIR   Default working directory (absolute)\n"
      "  -u, --user USER     Default user, uid[:gid]\n");
}

std::string env_ls_usage() {
  return env_usage("ls [OPTIONS]", "List environments (latest version of each).\n",
                   "      --json          Print a JSON array of the full records\n");
}

std::string env_rm_usage() {
  return env_usage(
      "rm NAME [NAME...]",
      "Remove environments with all their versions (their layers stay until `sandlet layer gc`).\n"
      "Prints each removed name; a name that fails is reported and the exit status is 1.\n");
}

// ---- helpers ---------------------------------------------------------------------------------------

using json::bj::value;

std::string str(const value* v) { return json::text(v); }
double num(const value* v) { return json::number(v); }

std::string age(const value* v) {
  if (v == nullptr || !v->is_number()) return str(v);
  return format_age(num(v));
}

void validate_role(const std::string* role) {
  if (role == nullptr) return;
  for (const char* r : {"base", "workspace", "toolkit", "diff"})
    if (*role == r) return;
  throw UsageError("invalid --role '" + *role + "': expected base, workspace, toolkit or diff");
}

// Import progress on stderr (a terminal only): one line redrawn with \r at most ~10 times a second.
class Progress {
 public:
  explicit Progress(bool enabled) : enabled_(enabled), start_(Clock::now()) {}
  ~Progress() { finish(); }
  // Erases the progress line (the terminal is left as it was) and stops drawing.
  void finish() {
    if (drawn_) write_all(STDERR_FILENO, "\r\033[K");
    drawn_ = enabled_ = false;
  }
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  static void callback(void* self, uint64_t bytes, uint64_t total, uint64_t files) {
    static_cast<Progress*>(self)->update(bytes, total, files);
  }

 private:
  using Clock = std::chrono::steady_clock;

  void update(uint64_t bytes, uint64_t total, uint64_t files) {
    if (!enabled_) return;
    const auto now = Clock::now();
    if (drawn_ && now - last_ < std::chrono::milliseconds(100)) return;
    last_ = now;
    drawn_ = true;
    const double secs = std::chrono::duration<double>(now - start_).count();
    const double rate = secs > 0 ? static_cast<double>(bytes) / 1e6 / secs : 0;
    std::string line = "\rimporting: " + human_size(static_cast<double>(bytes));
    if (total > 0) {
      char pct[16];
      std::snprintf(pct, sizeof pct, "%.0f%%", 100.0 * static_cast<double>(bytes) / static_cast<double>(total));
      line += " of " + human_size(static_cast<double>(total)) + " (" + pct + ")";
    }
    char tail[64];
    std::snprintf(tail, sizeof tail, ", %" PRIu64 " files, %.1f MB/s", files, rate);
    line += tail;
    line += "\033[K";
    write_all(STDERR_FILENO, line);
  }

  bool enabled_;
  bool drawn_ = false;
  Clock::time_point start_, last_;
};

// ---- layer -----------------------------------------------------------------------------------------

int layer_import(CommandContext& ctx, const std::vector<std::string>& args) {
  static const std::vector<OptionDef> kDefs = {
      {"role", 0, true}, {"name", 0, true}, {"parent", 0, true}, {"no-dedupe", 0, false}};
  ParsedArgs a;
  if (!parse_command(ctx, kDefs, args, OperandMode::kPermute, import_usage(), &a)) return 0;
  if (a.operands.size() != 1)
    throw UsageError(a.operands.empty() ? "import: requires a PATH" : "import: unexpected argument '" + a.operands[1] + "'");
  validate_role(a.last("role"));

  Progress progress(::isatty(STDERR_FILENO) == 1);
  sandlet_layer_import_options_t opts = SANDLET_LAYER_IMPORT_OPTIONS_INIT;
  opts.role = a.last("role") ? a.last("role")->c_str() : nullptr;
  opts.name = a.last("name") ? a.last("name")->c_str() : nullptr;
  opts.parent = a.last("parent") ? a.last("parent")->c_str() : nullptr;
  opts.no_dedupe = a.has("no-dedupe") ? 1 : 0;
  opts.progress = &Progress::callback;
  opts.progress_user_data = &progress;

  Runtime rt = open_runtime(ctx.global, /*sweep=*/false);
  char* raw = nullptr;
  detail::check(sandlet_layer_import(rt.get(), a.operands[0].c_str(), &opts, &raw));
  const value result = take_json(raw);
  progress.finish();

  std::string out, notes;
  const auto& layers = json::items(json::find(result, "layers"));
  const auto& existed = json::items(json::find(result, "existed"));
  for (size_t i = 0; i < layers.size(); ++i) {
    const std::string digest = full_digest(str(json::find(layers[i], "digest")));
    out += digest + "\n";
    if (i < existed.size() && existed[i].is_bool() && existed[i].get_bool()) notes += digest + " (already present)\n";
  }
  const std::string env = str(json::find(result, "environment"));
  if (!env.empty()) out += "environment " + env + "\n";
  std::string missing;
  for (const value& m : json::items(json::find(result, "missing"))) missing += " " + str(&m);
  if (!missing.empty())
    notes += "warning: a snapshot cannot be restored from this layer until the layers below it are imported too:" +
             missing + "\n";
  write_all(STDERR_FILENO, notes);
  write_all(STDOUT_FILENO, out);
  return 0;
}

int layer_export(CommandContext& ctx, const std::vector<std::string>& args) {
  static const std::vector<OptionDef> kDefs = {{"output", 'o', true}, {"zstd-level", 0, true}};
  ParsedArgs a;
  if (!parse_command(ctx, kDefs, args, OperandMode::kPermute, export_usage(), &a)) return 0;
  if (a.operands.size() != 1)
    throw UsageError(a.operands.empty() ? "export: requires a layer REF" : "export: unexpected argument '" + a.operands[1] + "'");
  if (a.last("output") == nullptr || a.last("output")->empty()) throw UsageError("export: requires -o FILE");
  sandlet_layer_export_options_t opts = SANDLET_LAYER_EXPORT_OPTIONS_INIT;
  if (const std::string* level = a.last("zstd-level")) {
    char* end = nullptr;
    const long n = std::strtol(level->c_str(), &end, 10);
    if (level->empty() || *end != '\0' || n < 1 || n > 19)
      throw UsageError("invalid --zstd-level '" + *level + "': expected 1-19");
    opts.zstd_level = static_cast<int>(n);
  }
  Runtime rt = open_runtime(ctx.global, /*sweep=*/false);
  char* raw = nullptr;
  detail::check(sandlet_layer_export(rt.get(), a.operands[0].c_str(), a.last("output")->c_str(), &opts, &raw));
  write_all(STDOUT_FILENO, full_digest(str(json::find(take_json(raw), "digest"))) + "\n");
  return 0;
}

int layer_ls(CommandContext& ctx, const std::vector<std::string>& args) {
  static const std::vector<OptionDef> kDefs = {{"json", 0, false}};
  ParsedArgs a;
  if (!parse_command(ctx, kDefs, args, OperandMode::kPermute, ls_usage(), &a)) return 0;
  require_no_operands(a);
  Runtime rt = open_runtime(ctx.global, /*sweep=*/false);
  char* raw = nullptr;
  detail::check(sandlet_layer_list(rt.get(), &raw));
  const value list = take_json(raw);
  if (a.has("json")) {
    write_all(STDOUT_FILENO, json::serialize_pretty(list.is_null() ? value(json::bj::array()) : list) + "\n");
    return 0;
  }
  std::vector<std::vector<std::string>> rows = {{"DIGEST", "ROLE", "NAME", "SIZE", "STORED", "CREATED"}};
  for (const auto& l : json::items(&list)) {
    rows.push_back({short_digest(str(json::find(l, "digest"))), str(json::find(l, "role")),
                    str(json::find(l, "name")), human_size(num(json::find(l, "size"))),
                    human_size(num(json::find(l, "stored_bytes"))), age(json::find(l, "created"))});
  }
  print_table(rows);
  return 0;
}

int layer_inspect(CommandContext& ctx, const std::vector<std::string>& args) {
  ParsedArgs a;
  if (!parse_command(ctx, {}, args, OperandMode::kPermute, inspect_usage(), &a)) return 0;
  if (a.operands.size() != 1)
    throw UsageError(a.operands.empty() ? "inspect: requires a layer REF" : "inspect: unexpected argument '" + a.operands[1] + "'");
  Runtime rt = open_runtime(ctx.global, /*sweep=*/false);
  char* raw = nullptr;
  detail::check(sandlet_layer_inspect(rt.get(), a.operands[0].c_str(), &raw));
  write_all(STDOUT_FILENO, json::serialize_pretty(take_json(raw)) + "\n");
  return 0;
}

int layer_rm(CommandContext& ctx, const std::vector<std::string>& args) {
  ParsedArgs a;
  if (!parse_command(ctx, {}, args, OperandMode::kPermute, layer_rm_usage(), &a)) return 0;
  if (a.operands.empty()) throw UsageError("rm: requires at least one layer REF");
  // Sweep at open: a dead sandbox should not keep its layers pinned.
  Runtime rt = open_runtime(ctx.global, /*sweep=*/true);
  return for_each_operand(a.operands, "layer rm",
                          [&](const std::string& ref) { detail::check(sandlet_layer_remove(rt.get(), ref.c_str())); });
}

int layer_gc(CommandContext& ctx, const std::vector<std::string>& args) {
  ParsedArgs a;
  if (!parse_command(ctx, {}, args, OperandMode::kPermute, layer_gc_usage(), &a)) return 0;
  require_no_operands(a);
  Runtime rt = open_runtime(ctx.global, /*sweep=*/true);
  char* raw = nullptr;
  detail::check(sandlet_layer_gc(rt.get(), &raw));
  const value report = take_json(raw);
  std::string out;
  auto list = [&](std::string_view key, std::string_view what) {
    for (const value& item : json::items(json::find(report, key))) {
      std::string id = item.is_object() ? str(json::find(item, "digest")) : str(&item);
      if (what == "layer") id = full_digest(id);
      out += "removed ";
      out += what;
      out += " " + id + "\n";
    }
  };
  list("removed_layers", "layer");
  list("removed_blobs", "blob");
  const double freed = num(json::find(report, "bytes_freed"));
  char bytes[32];
  std::snprintf(bytes, sizeof bytes, "%.0f", freed);
  out += "freed " + human_size(freed) + " (" + bytes + " bytes)\n";
  write_all(STDOUT_FILENO, out);
  return 0;
}

int layer_merge(CommandContext& ctx, const std::vector<std::string>& args) {
  static const std::vector<OptionDef> kDefs = {{"name", 0, true}, {"role", 0, true}};
  ParsedArgs a;
  if (!parse_command(ctx, kDefs, args, OperandMode::kPermute, merge_usage(), &a)) return 0;
  if (a.operands.size() < 2) throw UsageError("merge: requires at least two layer REFs");
  validate_role(a.last("role"));
  sandlet_layer_import_options_t opts = SANDLET_LAYER_IMPORT_OPTIONS_INIT;
  opts.role = a.last("role") ? a.last("role")->c_str() : nullptr;
  opts.name = a.last("name") ? a.last("name")->c_str() : nullptr;
  std::vector<const char*> refs;
  for (const auto& r : a.operands) refs.push_back(r.c_str());
  Runtime rt = open_runtime(ctx.global, /*sweep=*/false);
  char* raw = nullptr;
  detail::check(sandlet_layer_merge(rt.get(), refs.data(), refs.size(), &opts, &raw));
  write_all(STDOUT_FILENO, full_digest(str(json::find(take_json(raw), "digest"))) + "\n");
  return 0;
}

// ---- env -------------------------------------------------------------------------------------------

int env_create(CommandContext& ctx, const std::vector<std::string>& args) {
  static const std::vector<OptionDef> kDefs = {
      {"layer", 0, true}, {"env", 'e', true}, {"workdir", 'w', true}, {"user", 'u', true}};
  ParsedArgs a;
  if (!parse_command(ctx, kDefs, args, OperandMode::kPermute, env_create_usage(), &a)) return 0;
  if (a.operands.size() != 1)
    throw UsageError(a.operands.empty() ? "create: requires a NAME" : "create: unexpected argument '" + a.operands[1] + "'");
  if (a.all("layer").empty()) throw UsageError("create: requires at least one --layer");

  json::bj::object defaults;
  for (const auto& e : a.all("env"))
    if (auto kv = parse_env_flag(e)) json::object_at(defaults, "env")[kv->first] = kv->second;
  if (const std::string* w = a.last("workdir")) defaults["workdir"] = *w;
  if (const std::string* u = a.last("user")) defaults["user"] = *u;
  const std::string defaults_json = json::serialize(defaults);

  std::vector<const char*> layers;
  for (const auto& l : a.all("layer")) layers.push_back(l.c_str());
  const std::string& name = a.operands[0];
  Runtime rt = open_runtime(ctx.global, /*sweep=*/false);
  char* raw = nullptr;
  detail::check(sandlet_env_create(rt.get(), name.c_str(), layers.data(), layers.size(),
                                   defaults.empty() ? nullptr : defaults_json.c_str(), &raw));
  const std::string version = str(json::find(take_json(raw), "version"));
  write_all(STDOUT_FILENO, name + (version.empty() ? "" : "@" + version) + "\n");
  return 0;
}

int env_ls(CommandContext& ctx, const std::vector<std::string>& args) {
  static const std::vector<OptionDef> kDefs = {{"json", 0, false}};
  ParsedArgs a;
  if (!parse_command(ctx, kDefs, args, OperandMode::kPermute, env_ls_usage(), &a)) return 0;
  require_no_operands(a);
  Runtime rt = open_runtime(ctx.global, /*sweep=*/false);
  char* raw = nullptr;
  detail::check(sandlet_env_list(rt.get(), &raw));
  const value list = take_json(raw);
  if (a.has("json")) {
    write_all(STDOUT_FILENO, json::serialize_pretty(list.is_null() ? value(json::bj::array()) : list) + "\n");
    return 0;
  }
  std::vector<std::vector<std::string>> rows = {{"NAME", "VERSION", "LAYERS", "CREATED"}};
  for (const auto& e : json::items(&list)) {
    const value* latest = nullptr;
    for (const value& v : json::items(json::find(e, "versions")))
      if (latest == nullptr || num(json::find(v, "version")) > num(json::find(*latest, "version"))) latest = &v;
    rows.push_back({str(json::find(e, "name")), str(json::find(latest, "version")),
                    std::to_string(json::items(json::find(latest, "layers")).size()),
                    latest != nullptr ? age(json::find(latest, "created")) : ""});
  }
  print_table(rows);
  return 0;
}

int env_rm(CommandContext& ctx, const std::vector<std::string>& args) {
  ParsedArgs a;
  if (!parse_command(ctx, {}, args, OperandMode::kPermute, env_rm_usage(), &a)) return 0;
  if (a.operands.empty()) throw UsageError("rm: requires at least one environment NAME");
  Runtime rt = open_runtime(ctx.global, /*sweep=*/false);
  return for_each_operand(a.operands, "env rm",
                          [&](const std::string& name) { detail::check(sandlet_env_remove(rt.get(), name.c_str())); });
}

}  // namespace

int cmd_layer(CommandContext& ctx, const std::vector<std::string>& args) {
  return dispatch_sub(ctx, args, kLayerUsage,
                      {{"import", layer_import}, {"export", layer_export}, {"ls", layer_ls}, {"list", layer_ls}, {"inspect", layer_inspect},
                       {"rm", layer_rm}, {"gc", layer_gc}, {"merge", layer_merge}, {"push", layer_push},
                       {"pull", layer_pull}});
}

int cmd_env(CommandContext& ctx, const std::vector<std::string>& args) {
  return dispatch_sub(ctx, args, kEnvUsage, {{"create", env_create}, {"ls", env_ls}, {"list", env_ls}, {"rm", env_rm}});
}

}  // namespace sandlet::cli
