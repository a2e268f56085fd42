// The extension module sandlet._sandlet: a thin layer over the C++ wrapper of the C ABI (sandlet.hpp).
// The Pythonic API (context managers, asyncio, keyword arguments) is in the sandlet package around it.
#include <pybind11/pybind11.h>

#include "errors.hpp"
#include "handles.hpp"

namespace py = pybind11;

PYBIND11_MODULE(_sandlet, m) {
  m.doc() = "sandlet's C ABI for Python (low level; import sandlet instead)";
  m.def("version", &sandlet::version, "The library's version string.");
  m.def("abi_version", &sandlet::abi_version, "The library's C ABI version.");
  m.def("code_name", [](int code) { return std::string(sandlet_code_name(static_cast<sandlet_code_t>(code))); },
        py::arg("code"), "The name of a status code, e.g. 5 -> \"NOT_FOUND\".");
  m.attr("STDOUT") = SANDLET_STDOUT;
  m.attr("STDERR") = SANDLET_STDERR;
  sandlet_py::register_error_translator();
  sandlet_py::bind_results(m);
  sandlet_py::bind_spec(m);
  sandlet_py::bind_sandbox(m);
  sandlet_py::bind_copy(m);
  sandlet_py::bind_session(m);
  sandlet_py::bind_runtime(m);
  sandlet_py::bind_bench(m);
  sandlet_py::bind_audit(m);
}
