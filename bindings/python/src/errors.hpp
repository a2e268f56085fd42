// sandlet errors as Python exceptions. The exception classes live in sandlet/_errors.py (so they can also
// derive from Python's built-ins: NotFound is a LookupError, DeadlineExceeded a TimeoutError, ...); C++
// only knows how to build one from (code, message, errno).
#pragma once
#include <pybind11/pybind11.h>

#include "completion_queue.hpp"

namespace sandlet_py {

// An exception instance of the right class (sandlet._errors.from_code).
pybind11::object make_exception(const ErrorInfo& e);
// Sets the Python error indicator from a sandlet::Error (used by the pybind11 exception translator).
void set_python_error(const sandlet::Error& e);
void register_error_translator();

}  // namespace sandlet_py
