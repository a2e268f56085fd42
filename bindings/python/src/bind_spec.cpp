// sandlet.Spec: the C ABI's spec builder, setter for setter (each validates and names the field).
#include <pybind11/stl.h>

#include "handles.hpp"

namespace py = pybind11;

namespace sandlet_py {

void bind_spec(py::module_& m) {
  using sandlet::Spec;
  py::class_<Spec>(m, "Spec",
                   "What a sandbox looks like. Build it from JSON (Spec.from_json) or setter by setter; every\n"
                   "setter validates its value and raises InvalidArgument naming the field.")
      .def(py::init<>())
      .def_static("from_json", &Spec::from_json, py::arg("json"), "Parses and validates a JSON spec.")
      .def("to_json", &Spec::to_json, "The spec as JSON (what from_json accepts).")
      .def("set_backend", [](Spec& s, const std::string& v) { s.backend(v); }, py::arg("backend"))
      .def("add_layer", [](Spec& s, const std::string& v) { s.layer(v); }, py::arg("layer"),
           "A host directory or a store layer (digest, unique hex prefix of >= 12, or name); lowest first.")
      .def("set_environment", [](Spec& s, const std::string& v) { s.environment(v); }, py::arg("environment"),
           "A store environment: \"name\" (latest version) or \"name@N\".")
      .def("set_env", [](Spec& s, const std::string& k, const std::string& v) { s.env(k, v); }, py::arg("key"),
           py::arg("value"))
      .def("set_secret", [](Spec& s, const std::string& k, const std::string& v) { s.secret(k, v); }, py::arg("key"),
           py::arg("value"),
           "An env variable whose value info() and list() never show (\"<hidden>\") and fork children only get\n"
           "with copy_secrets=True. A key may not be in env as well.")
      .def("set_workdir", [](Spec& s, const std::string& v) { s.workdir(v); }, py::arg("path"))
      .def("set_hostname", [](Spec& s, const std::string& v) { s.hostname(v); }, py::arg("hostname"))
      .def("set_user", [](Spec& s, const std::string& v) { s.user(v); }, py::arg("user"))
      .def("set_cpus", [](Spec& s, double v) { s.cpus(v); }, py::arg("cpus"))
      .def("set_memory", [](Spec& s, uint64_t v) { s.memory(v); }, py::arg("bytes"))
      .def("set_pids", [](Spec& s, uint64_t v) { s.pids(v); }, py::arg("pids"))
      .def("set_disk", [](Spec& s, uint64_t v) { s.disk(v); }, py::arg("bytes"))
      .def("set_network", [](Spec& s, const std::string& v) { s.network(v); }, py::arg("mode"))
      .def("set_network_json", [](Spec& s, const std::string& v) { s.network_json(v); }, py::arg("policy_json"),
           "\"none\" or a policy object as JSON (docs/NETWORK.md).")
      .def("set_label", [](Spec& s, const std::string& k, const std::string& v) { s.label(k, v); }, py::arg("key"),
           py::arg("value"))
      .def("set_lifetime", [](Spec& s, const std::string& v) { s.lifetime(v); }, py::arg("policy"),
           "\"owned\" (dies with its runtime/process) or \"detached\" (reattachable by id).")
      .def("set_max_lifetime", [](Spec& s, double v) { s.max_lifetime(v); }, py::arg("seconds"))
      .def("set_idle_timeout", [](Spec& s, double v) { s.idle_timeout(v); }, py::arg("seconds"))
      .def("set_on_expiry", [](Spec& s, const std::string& mode, double keep) { s.on_expiry(mode, keep); },
           py::arg("mode"), py::arg("keep_seconds") = 3600.0)
      .def("accept_weaker", [](Spec& s, const std::string& v) { s.accept_weaker(v); }, py::arg("guarantee"),
           "A guarantee this sandbox may get in a weaker form where the host cannot give it in full\n"
           "(\"memory_swap\", \"exec_kill_descendants\"); without it such a create raises Unimplemented.")
      .def("add_mount", [](Spec& s, const std::string& source, const std::string& target, bool readonly) {
             s.mount(source, target, readonly);
           }, py::arg("source"), py::arg("target"), py::arg("readonly") = true,
           "Mounts host directory `source` at `target` inside (read-only by default; see sandlet.h, \"mounts\").")
      .def("__repr__", [](const Spec& s) {
        // Secrets' values are not shown (to_json has them: it is what from_json reads back).
        std::string text = s.to_json();
        if (text.find("\"secrets\"") != std::string::npos) {
          py::module_ json = py::module_::import("json");
          py::dict doc = json.attr("loads")(text);
          if (doc.contains("secrets")) {
            py::dict hidden;
            for (auto kv : py::dict(doc["secrets"])) hidden[kv.first] = "<hidden>";
            doc["secrets"] = hidden;
          }
          text = json.attr("dumps")(doc, py::arg("separators") = py::make_tuple(",", ":")).cast<std::string>();
        }
        return "Spec(" + text + ")";
      });
}

}  // namespace sandlet_py
