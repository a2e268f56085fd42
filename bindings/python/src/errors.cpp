#include "errors.hpp"

namespace py = pybind11;

namespace sandlet_py {

py::object make_exception(const ErrorInfo& e) {
  py::object from_code = py::module_::import("sandlet._errors").attr("from_code");
  return from_code(e.code, e.message, e.err_no);
}

void set_python_error(const sandlet::Error& e) {
  try {
    py::object exc = make_exception(ErrorInfo::from(e));
    PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(exc.ptr())), exc.ptr());
  } catch (py::error_already_set& nested) {
    nested.restore();  // sandlet._errors itself failed to import: report that instead
  }
}

void register_error_translator() {
  py::register_exception_translator([](std::exception_ptr p) {
    if (!p) return;
    try {
      std::rethrow_exception(p);
    } catch (const sandlet::Error& e) {
      set_python_error(e);
    }
  });
}

}  // namespace sandlet_py
