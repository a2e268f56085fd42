// The in-sandbox init is compiled from src/guest and embedded in the library (cmake/embed_init.cmake).
// It is materialised once per process as a sealed memfd and executed from there: nothing to install.
#pragma once

namespace sandlet {

// A read-only, sealed memfd holding the init binary; valid for the life of the process. Thread-safe.
int embedded_init_fd();

}  // namespace sandlet
