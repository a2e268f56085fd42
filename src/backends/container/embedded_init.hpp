// The in-sandbox init is compiled from src/guest and embedded in the library (cmake/embed_init.cmake):
// nothing to install. It is materialised once per process, either as a file named by its SHA-256 in a
// private directory on tmpfs (shared by every process of the node: no 0.9 MB copy per process, one copy
// in memory), or as a sealed memfd.
#pragma once
#include <string>

namespace sandlet::container {

// An fd of the init binary, for execveat(AT_EMPTY_PATH); valid for the life of the process. `cache_dir`
// ("" = none) is a root-only directory on an exec-capable tmpfs. Thread-safe; the first call decides.
int embedded_init_fd(const std::string& cache_dir = "");

}  // namespace sandlet::container
