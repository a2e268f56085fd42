/* sandlet.h alone, compiled as C89, C99, C11 and as C++ (ctest abi-header-*): the header and every macro it
   defines (the *_INIT initialisers, SANDLET_HAS_FIELD, SANDLET_ARRAY_AT) must compile without a warning
   under -Wall -Wextra -pedantic -Werror. Only compiled, never run. */
#include "sandlet/sandlet.h"

int sandlet_header_check(const sandlet_backend_info_t *first, size_t elem_size);

int sandlet_header_check(const sandlet_backend_info_t *first, size_t elem_size) {
  sandlet_runtime_options_t runtime = SANDLET_RUNTIME_OPTIONS_INIT;
  sandlet_exec_options_t exec = SANDLET_EXEC_OPTIONS_INIT;
  sandlet_run_options_t run = SANDLET_RUN_OPTIONS_INIT;
  sandlet_layer_import_options_t layer = SANDLET_LAYER_IMPORT_OPTIONS_INIT;
  sandlet_build_options_t build = SANDLET_BUILD_OPTIONS_INIT;
  int n = SANDLET_ABI_VERSION + SANDLET_STDOUT + SANDLET_STDERR + (int)SANDLET_OK;
  n += SANDLET_HAS_FIELD(sandlet_runtime_options_t, create_soon, runtime.size);
  n += SANDLET_HAS_FIELD(sandlet_runtime_options_t, audit_max_bytes, runtime.size) + (int)SANDLET_PULL_LAZY;
  n += SANDLET_HAS_FIELD(sandlet_exec_options_t, output_user_data, exec.size);
  n += SANDLET_HAS_FIELD(sandlet_run_options_t, cancel_fd, run.size);
  n += SANDLET_HAS_FIELD(sandlet_layer_import_options_t, progress_user_data, layer.size);
  n += SANDLET_HAS_FIELD(sandlet_build_options_t, no_default_excludes, build.size);
  n += SANDLET_HAS_FIELD(sandlet_build_options_t, secrets, build.size);
  n += SANDLET_HAS_FIELD(sandlet_build_options_t, network, build.size);
  n += SANDLET_HAS_FIELD(sandlet_backend_info_t, reason, elem_size);
  n += SANDLET_ARRAY_AT(sandlet_backend_info_t, first, elem_size, 1)->available;
  n += (SANDLET_ARRAY_AT(sandlet_backend_info_t, first, elem_size, 0)->capabilities & SANDLET_CAP_PAUSE) != 0;
  return n;
}
