// `/run_jupyter`: notebook cells run in one python3 process, in a sandbox of their own made from the
// "python" language's spec, by the Python service's notebook driver (embedded at build time). The driver's
// JSON comes out of the sandbox: it is hostile input, read with the CLI's exact reader and re-checked field by
// field before it goes into the answer.
#include <jupyter_driver.hpp>

#include <optional>

#include "fusion.hpp"
#include "fusion_parts.hpp"

namespace sandlet::cli::fusion {
namespace {

namespace bj = boost::json;

constexpr const char* kDriverPath = "/tmp/.sandlet-jupyter-driver.py";

struct JupyterRequest {
  std::vector<std::string> cells;
  double cell_timeout = 0, total_timeout = 45;
  std::vector<std::pair<std::string, std::string>> files;
  std::vector<std::string> fetch_files;
};

JupyterRequest parse_jupyter(const bj::value& doc) {
  const bj::object* o = doc.if_object();
  if (o == nullptr) throw RequestError("the body must be a JSON object");
  JupyterRequest r;
  const bj::value* cells = o->if_contains("cells");
  if (cells == nullptr || !cells->is_array()) throw RequestError("field 'cells': required, a list of strings");
  for (const auto& c : cells->as_array()) {
    if (!c.is_string()) throw RequestError("field 'cells': required, a list of strings");
    r.cells.emplace_back(c.as_string());
  }
  if (const bj::value* k = o->if_contains("kernel"); k != nullptr && !k->is_null() && *k != "python3")
    throw RequestError("field 'kernel': only 'python3' is served");
  r.cell_timeout = seconds_field(*o, "cell_timeout", 0, true);
  r.total_timeout = seconds_field(*o, "total_timeout", 45, false);
  r.files = parse_files(*o);
  r.fetch_files = parse_fetch_files(*o);
  return r;
}

// The driver's cells, each field checked; nullopt when its output is not what the driver writes.
std::optional<bj::array> driver_cells(const std::string& out) {
  bj::value doc;
  try {
    doc = json::parse(out);
  } catch (const json::ParseError&) {
    return std::nullopt;
  }
  const bj::value* cells = json::find(doc, "cells");
  if (cells == nullptr || !cells->is_array()) return std::nullopt;
  bj::array checked;
  for (const auto& c : cells->as_array()) {
    const bj::value *out_text = json::find(c, "stdout"), *err_text = json::find(c, "stderr"),
                    *display = json::find(c, "display"), *error = json::find(c, "error");
    if (out_text == nullptr || !out_text->is_string() || err_text == nullptr || !err_text->is_string() ||
        display == nullptr || !display->is_array() || error == nullptr || !error->is_array())
      return std::nullopt;
    bj::object cell;
    cell["stdout"] = *out_text;
    cell["stderr"] = *err_text;
    cell["display"] = *display;
    cell["error"] = *error;
    checked.push_back(std::move(cell));
  }
  return checked;
}

}  // namespace

bj::value run_jupyter(const Service& svc, const bj::value& doc) {
  const JupyterRequest req = parse_jupyter(doc);
  auto spec_it = svc.specs.find("python");
  if (spec_it == svc.specs.end())
    throw RequestError("/run_jupyter runs python3 in the 'python' language's sandboxes, which are not served here");
  bj::object input;
  bj::array cells;
  for (const auto& c : req.cells) cells.emplace_back(c);
  input["cells"] = std::move(cells);
  input["cell_timeout"] = req.cell_timeout;
  bj::object answer;
  answer["executor_pod_name"] = nullptr;
  try {
    RequestSandbox box(*svc.rt, Spec::from_json(spec_it->second), req.files);
    Sandbox& sb = box.sandbox();
    sb.write_file(kDriverPath, kJupyterDriver);
    ExecOptions run({"python3", kDriverPath});
    run.cwd = kWorkdir;
    run.stdin_data = json::serialize(input);
    run.timeout_s = req.total_timeout;
    run.output_limit = kOutputLimit;
    const ExecResult r = sb.exec(run);
    bj::object fetched = box.fetch(req.fetch_files);
    bj::object driver = command_run_result(r);
    std::optional<bj::array> ran;
    if (!r.timed_out && r.signal == 0 && r.exit_code == 0) ran = driver_cells(r.stdout_data);
    bool cell_error = false;
    if (ran)
      for (const auto& c : *ran) cell_error = cell_error || !c.at("error").as_array().empty();
    answer["status"] = ran && !cell_error ? "Success" : "Failed";
    answer["message"] = ran ? "" : r.timed_out ? "the notebook ran past total_timeout"
                                               : "the notebook's driver did not finish (the cells ended its process?)";
    driver["stdout"] = "";
    answer["driver"] = std::move(driver);
    answer["cells"] = ran ? std::move(*ran) : bj::array();
    answer["files"] = std::move(fetched);
  } catch (const Error& e) {
    answer["status"] = "SandboxError";
    answer["message"] = e.what();
    answer["driver"] = nullptr;
    answer["cells"] = bj::array();
    answer["files"] = bj::object();
  }
  return answer;
}

}  // namespace sandlet::cli::fusion
