// sandlet._sandlet.AuditReader: a reader of a root's audit log (sandlet_audit.h); the Python iterator
// (Runtime.audit) is in the sandlet package.
#include <pybind11/stl.h>

#include "errors.hpp"
#include "handles.hpp"

namespace py = pybind11;

namespace sandlet_py {

void bind_audit(py::module_& m) {
  py::class_<sandlet::AuditReader>(m, "AuditReader", "A reader of an audit log (low level; use Runtime.audit).")
      .def(py::init([](const std::string& path, std::optional<std::string> sandbox,
                       const std::vector<std::pair<std::string, std::string>>& labels, double since) {
             sandlet::AuditFilter f;
             f.sandbox = sandbox.value_or("");
             for (const auto& [k, v] : labels) f.labels[k] = v;
             f.since = since;
             return sandlet::AuditReader::open(path, f);
           }),
           py::arg("path"), py::arg("sandbox") = py::none(),
           py::arg("labels") = std::vector<std::pair<std::string, std::string>>(), py::arg("since") = 0.0)
      // The next record's JSON text, or None when there is none now (never waits for one).
      .def("next", [](sandlet::AuditReader& r) -> std::optional<std::string> {
        py::gil_scoped_release release;
        return r.next();
      });
}

}  // namespace sandlet_py
