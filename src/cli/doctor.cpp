// `sandlet doctor`: every kernel feature sandlet uses on this host, and which path it takes.
#include <unistd.h>

#include <boost/json.hpp>
#include <string>
#include <vector>

#include "cli.hpp"

namespace sandlet::cli {
namespace {

constexpr std::string_view kDoctorUsage =
    "Usage: sandlet doctor [OPTIONS]\n"
    "\n"
    "Report every kernel feature sandlet uses on this host: whether it is there (each is probed, never\n"
    "inferred from the kernel's version), and which path sandlet takes (a slower fallback where one is\n"
    "missing). Also lists the guarantees this host can give only in a weaker form: a create refuses them\n"
    "unless its spec accepts them by name (\"accept_weaker\"). Exit status 0 when the container backend can\n"
    "run here, 1 when it cannot.\n"
    "\n"
    "Options:\n"
    "      --json          Print the report as one JSON object\n"
    "  -v, --verbose       Also print what the kernel answered to each probe\n"
    "      --root DIR      State directory (default: $SANDLET_ROOT, else /var/lib/sandlet)\n"
    "  -h, --help          Print this help\n";

std::string text(const boost::json::object& o, std::string_view key) {
  const boost::json::value* v = o.if_contains(key);
  return v && v->is_string() ? std::string(v->get_string()) : std::string();
}

}  // namespace

int cmd_doctor(CommandContext& ctx, const std::vector<std::string>& args) {
  ParsedArgs a;
  if (!parse_command(ctx, {{"json", 0, false}, {"verbose", 'v', false}}, args, OperandMode::kPermute, kDoctorUsage,
                     &a))
    return 0;
  if (!a.operands.empty()) throw UsageError("unexpected operand '" + a.operands[0] + "'");
  Runtime rt = open_runtime(ctx.global, /*sweep=*/false);
  const std::string report = rt.features_json();
  const boost::json::object doc = boost::json::parse(report).as_object();
  const std::string backend_missing = text(doc, "container_backend");
  const int status = backend_missing.empty() ? 0 : kExitRuntimeError;
  if (a.has("json")) {
    write_all(STDOUT_FILENO, report + "\n");
    return status;
  }

  std::string out = "kernel " + text(doc, "kernel") + " (every feature below is probed; none is inferred from the version)\n";
  out += "container backend: " + (backend_missing.empty() ? std::string("can run here") : "cannot run here: " + backend_missing) + "\n";
  const boost::json::object& paths = doc.at("paths").as_object();
  out += "overlay layers:    " + text(paths, "overlay") + "\n";
  out += "store layers:      " + text(paths, "store_layers") + "\n\n";
  write_all(STDOUT_FILENO, out);

  std::vector<std::vector<std::string>> rows = {{"FEATURE", "PRESENT", "PATH"}};
  if (a.has("verbose")) rows[0].push_back("PROBE");
  for (const auto& v : doc.at("features").as_array()) {
    const boost::json::object& f = v.as_object();
    rows.push_back({text(f, "name"), f.at("present").as_bool() ? "yes" : "no", text(f, "path")});
    if (a.has("verbose")) rows.back().push_back(text(f, "probe"));
  }
  print_table(rows);

  // Every backend of this build: whether it runs here and why not; a VM backend's accelerator.
  out = "\nbackends:\n";
  for (const auto& v : doc.at("backends").as_array()) {
    const boost::json::object& b = v.as_object();
    out += "  " + text(b, "name") + ": " + (b.at("available").as_bool() ? "available" : "unavailable: " + text(b, "reason")) + "\n";
    out += "    " + text(b, "summary") + "\n";
    const boost::json::object& d = b.at("details").as_object();
    if (!text(d, "accelerator").empty())
      out += "    accelerator: " + text(d, "accelerator") + " (" + text(d, "accelerator_reason") + ")\n";
    if (const auto* pools = d.if_contains("pools_on"); pools && pools->is_array()) {
      std::string names;
      for (const auto& n : pools->as_array())
        if (n.is_string()) names += (names.empty() ? "" : ", ") + std::string(n.as_string());
      out += "    pools run on: " + (names.empty() ? std::string("(none)") : names) + "\n";
    }
    if (!text(d, "kernel").empty())
      out += "    guest kernel: " + text(d, "kernel") + (text(d, "kernel_release").empty() ? "" : " (" + text(d, "kernel_release") + ")") + "\n";
  }
  write_all(STDOUT_FILENO, out);

  const boost::json::array& weaker = doc.at("weaker_guarantees").as_array();
  out = weaker.empty() ? "\nweaker guarantees on this host: none\n" : "\nweaker guarantees on this host (a create refuses them unless its spec accepts them):\n";
  for (const auto& v : weaker) {
    const boost::json::object& w = v.as_object();
    out += "  " + text(w, "name") + ": " + text(w, "why") + "\n";
  }
  write_all(STDOUT_FILENO, out);
  return status;
}

}  // namespace sandlet::cli
