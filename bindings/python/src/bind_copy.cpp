// sandlet._sandlet.Sandbox's directory copies (sandlet_copy.h): copy_in, copy_out, put_archive, get_archive.
// Each blocks with the GIL released; the progress callable (and Python's signal handlers, so Ctrl-C
// works) runs with the GIL after each entry; an exception there stops the copy and is raised.
#include <pybind11/stl.h>

#include <memory>
#include <stdexcept>
#include <tuple>

#include "errors.hpp"
#include "handles.hpp"

namespace py = pybind11;

namespace sandlet_py {
namespace {

using Stats = std::tuple<uint64_t, uint64_t, uint64_t>;  // entries, bytes, skipped

struct CopyCall {
  sandlet::CopyOptions options;
  std::shared_ptr<py::object> raised = std::make_shared<py::object>();  // what the progress callable raised

  CopyCall(std::string user, bool keep_owners, bool follow_links, bool allow_outside_links, uint64_t max_bytes,
           uint64_t max_entries, py::object progress) {
    options.user = std::move(user);
    options.keep_owners = keep_owners;
    options.follow_links = follow_links;
    options.allow_outside_links = allow_outside_links;
    options.max_bytes = max_bytes;
    options.max_entries = max_entries;
    auto fn = std::make_shared<py::object>(std::move(progress));
    auto raised_ = raised;
    options.progress = [fn, raised_](const sandlet_copy_stats_t& s) {
      py::gil_scoped_acquire acquire;
      try {
        if (PyErr_CheckSignals() != 0) throw py::error_already_set();
        if (!fn->is_none()) (*fn)(s.entries, s.bytes, s.skipped);
      } catch (py::error_already_set& e) {
        *raised_ = e.value();  // (e dies here, with the GIL held)
        throw std::runtime_error("progress");  // stops the copy (CANCELLED); the Python exception is raised instead
      }
    };
  }

  template <class F>
  Stats run(F&& f) {
    sandlet_copy_stats_t s{};
    try {
      py::gil_scoped_release release;
      s = f(options);
    } catch (const sandlet::Error&) {
      if (*raised) {
        PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(raised->ptr())), raised->ptr());
        throw py::error_already_set();
      }
      throw;
    }
    return {s.entries, s.bytes, s.skipped};
  }
};

#define SANDLET_PY_COPY_ARGS                                                                                  \
  py::kw_only(), py::arg("user") = "", py::arg("keep_owners") = false, py::arg("follow_links") = false,       \
      py::arg("allow_outside_links") = false, py::arg("max_bytes") = 0, py::arg("max_entries") = 0,             \
      py::arg("progress") = py::none()

}  // namespace

void bind_copy(py::module_& m) {
  auto cls = py::reinterpret_borrow<py::class_<SandboxHandle>>(m.attr("Sandbox"));
  cls.def(
         "copy_in",
         [](SandboxHandle& h, const std::string& host_path, const std::string& path, std::string user, bool keep_owners,
            bool follow_links, bool allow_outside_links, uint64_t max_bytes, uint64_t max_entries, py::object progress) {
           auto sb = h.get();
           CopyCall c(std::move(user), keep_owners, follow_links, allow_outside_links, max_bytes, max_entries,
                       std::move(progress));
           return c.run([&](const sandlet::CopyOptions& o) { return sb->copy_in(host_path, path, o); });
         },
         py::arg("host_path"), py::arg("path"), SANDLET_PY_COPY_ARGS)
      .def(
          "copy_out",
          [](SandboxHandle& h, const std::string& path, const std::string& host_path, std::string user,
             bool keep_owners, bool follow_links, bool allow_outside_links, uint64_t max_bytes, uint64_t max_entries, py::object progress) {
            auto sb = h.get();
            CopyCall c(std::move(user), keep_owners, follow_links, allow_outside_links, max_bytes, max_entries,
                       std::move(progress));
            return c.run([&](const sandlet::CopyOptions& o) { return sb->copy_out(path, host_path, o); });
          },
          py::arg("path"), py::arg("host_path"), SANDLET_PY_COPY_ARGS)
      .def(
          "put_archive",
          [](SandboxHandle& h, int fd, const std::string& path, std::string user, bool keep_owners, bool follow_links,
             bool allow_outside_links, uint64_t max_bytes, uint64_t max_entries, py::object progress) {
            auto sb = h.get();
            CopyCall c(std::move(user), keep_owners, follow_links, allow_outside_links, max_bytes, max_entries,
                       std::move(progress));
            return c.run([&](const sandlet::CopyOptions& o) { return sb->put_archive(fd, path, o); });
          },
          py::arg("fd"), py::arg("path"), SANDLET_PY_COPY_ARGS)
      .def(
          "get_archive",
          [](SandboxHandle& h, const std::string& path, int fd, std::string user, bool keep_owners, bool follow_links,
             bool allow_outside_links, uint64_t max_bytes, uint64_t max_entries, py::object progress) {
            auto sb = h.get();
            CopyCall c(std::move(user), keep_owners, follow_links, allow_outside_links, max_bytes, max_entries,
                       std::move(progress));
            return c.run([&](const sandlet::CopyOptions& o) { return sb->get_archive(path, fd, o); });
          },
          py::arg("path"), py::arg("fd"), SANDLET_PY_COPY_ARGS);
}

}  // namespace sandlet_py
