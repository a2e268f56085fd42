// The layout of every struct of sandlet.h, as compiled, against the table below (x86_64/aarch64 Linux, LP64):
// a moved, retyped or inserted field breaks every caller built earlier, so it must fail here first. Also
// checks the rules that make `size` versioning exact (no padding except where the table allows it, no tail
// padding, the *_INIT macros set `size`), and that the library's field_present (src/capi/options.hpp) and
// the public SANDLET_HAS_FIELD agree with the table for every size a caller can pass.
// Adding a field: append its row (offset, size) here. Exit: 0 pass, 1 fail, 77 skip (not LP64).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "capi/options.hpp"
#include "sandlet/sandlet.h"

namespace {

int failures = 0;

void fail(const std::string& what) {
  std::fprintf(stderr, "FAIL: %s\n", what.c_str());
  ++failures;
}

struct Field {
  const char* name;
  size_t offset, size;                    // as compiled
  size_t want_offset, want_size;          // the table
  bool padding_before;                    // the table allows a gap before it (alignment of the first version)
  std::function<bool(uint32_t)> present;  // field_present on a struct whose size is the argument (option structs)
  std::function<bool(size_t)> has_field;  // SANDLET_HAS_FIELD with that size
};

struct Layout {
  const char* type;
  size_t size, want_size;
  uint32_t init_size;  // what the *_INIT macro puts in `size` (0: the struct has none)
  std::vector<Field> fields;
};

#define SANDLET_ROW_(T, f, off, sz, pad)                                                                   \
  Field {                                                                                                  \
    #f, offsetof(T, f), sizeof(T::f), off, sz, pad, nullptr,                                               \
        [](size_t size) { return SANDLET_HAS_FIELD(T, f, size); }                                          \
  }
// A row of an option struct: its presence is also asked of the library's helper.
#define SANDLET_OPTION_ROW_(T, f, off, sz, pad)                                                            \
  Field {                                                                                                  \
    #f, offsetof(T, f), sizeof(T::f), off, sz, pad,                                                        \
        [](uint32_t size) {                                                                                \
          T o{};                                                                                           \
          o.size = size;                                                                                   \
          return sandlet::capi::field_present(o, &T::f);                                                   \
        },                                                                                                 \
        [](size_t size) { return SANDLET_HAS_FIELD(T, f, size); }                                          \
  }

std::vector<Layout> table() {
  using RT = sandlet_runtime_options_t;
  using EX = sandlet_exec_options_t;
  using RN = sandlet_run_options_t;
  using LI = sandlet_layer_import_options_t;
  using LE = sandlet_layer_export_options_t;
  using BI = sandlet_backend_info_t;
  using BO = sandlet_build_options_t;
  using BE = sandlet_build_event_t;
  using SN = sandlet_snapshot_options_t;
  using FO = sandlet_fork_options_t;
  const SN sn_init = SANDLET_SNAPSHOT_OPTIONS_INIT;
  const FO fo_init = SANDLET_FORK_OPTIONS_INIT;
  const BO bo_init = SANDLET_BUILD_OPTIONS_INIT;
  const RT rt_init = SANDLET_RUNTIME_OPTIONS_INIT;
  const EX ex_init = SANDLET_EXEC_OPTIONS_INIT;
  const RN rn_init = SANDLET_RUN_OPTIONS_INIT;
  const LI li_init = SANDLET_LAYER_IMPORT_OPTIONS_INIT;
  const LE le_init = SANDLET_LAYER_EXPORT_OPTIONS_INIT;
  using AF = sandlet_audit_filter_t;
  const AF af_init = SANDLET_AUDIT_FILTER_INIT;
  using AD = sandlet_admission_options_t;
  const AD ad_init = SANDLET_ADMISSION_OPTIONS_INIT;
  using CO = sandlet_copy_options_t;
  const CO co_init = SANDLET_COPY_OPTIONS_INIT;
  using SO = sandlet_session_options_t;
  const SO so_init = SANDLET_SESSION_OPTIONS_INIT;
  return {
      {"sandlet_runtime_options_t", sizeof(RT), 72, rt_init.size,
       {SANDLET_OPTION_ROW_(RT, size, 0, 4, false), SANDLET_OPTION_ROW_(RT, worker_threads, 4, 4, false),
        SANDLET_OPTION_ROW_(RT, skip_gc_on_open, 8, 4, false), SANDLET_OPTION_ROW_(RT, disable_warm_pool, 12, 4, false),
        SANDLET_OPTION_ROW_(RT, create_soon, 16, 4, false), SANDLET_OPTION_ROW_(RT, snapshot_max_depth, 20, 4, false),
        SANDLET_OPTION_ROW_(RT, store, 24, 8, false), SANDLET_OPTION_ROW_(RT, cache_max_bytes, 32, 8, false),
        SANDLET_OPTION_ROW_(RT, fetch_unit, 40, 4, false), SANDLET_OPTION_ROW_(RT, fetch_concurrency, 44, 4, false),
        SANDLET_OPTION_ROW_(RT, fill_timeout_ms, 48, 4, false), SANDLET_OPTION_ROW_(RT, audit_keep, 52, 4, false),
        SANDLET_OPTION_ROW_(RT, audit_max_bytes, 56, 8, false), SANDLET_OPTION_ROW_(RT, registries, 64, 8, false)}},
      {"sandlet_snapshot_options_t", sizeof(SN), 40, sn_init.size,
       {SANDLET_OPTION_ROW_(SN, size, 0, 4, false), SANDLET_OPTION_ROW_(SN, full, 4, 4, false),
        SANDLET_OPTION_ROW_(SN, exclude, 8, 8, false), SANDLET_OPTION_ROW_(SN, n_exclude, 16, 8, false),
        SANDLET_OPTION_ROW_(SN, name, 24, 8, false), SANDLET_OPTION_ROW_(SN, no_default_excludes, 32, 4, false),
        SANDLET_OPTION_ROW_(SN, max_depth, 36, 4, false)}},
      {"sandlet_fork_options_t", sizeof(FO), 56, fo_init.size,
       {SANDLET_OPTION_ROW_(FO, size, 0, 4, false), SANDLET_OPTION_ROW_(FO, copy_secrets, 4, 4, false),
        SANDLET_OPTION_ROW_(FO, n, 8, 8, false), SANDLET_OPTION_ROW_(FO, labels, 16, 8, false),
        SANDLET_OPTION_ROW_(FO, n_labels, 24, 8, false), SANDLET_OPTION_ROW_(FO, exclude, 32, 8, false),
        SANDLET_OPTION_ROW_(FO, n_exclude, 40, 8, false), SANDLET_OPTION_ROW_(FO, detached, 48, 4, false),
        SANDLET_OPTION_ROW_(FO, max_depth, 52, 4, false)}},
      {"sandlet_exec_options_t", sizeof(EX), 120, ex_init.size,
       {SANDLET_OPTION_ROW_(EX, size, 0, 4, false), SANDLET_OPTION_ROW_(EX, argv, 8, 8, true),
        SANDLET_OPTION_ROW_(EX, env, 16, 8, false), SANDLET_OPTION_ROW_(EX, cwd, 24, 8, false),
        SANDLET_OPTION_ROW_(EX, user, 32, 8, false), SANDLET_OPTION_ROW_(EX, stdin_data, 40, 8, false),
        SANDLET_OPTION_ROW_(EX, stdin_len, 48, 8, false), SANDLET_OPTION_ROW_(EX, timeout_s, 56, 8, false),
        SANDLET_OPTION_ROW_(EX, output_limit, 64, 8, false), SANDLET_OPTION_ROW_(EX, kill_on_output_limit, 72, 4, false),
        SANDLET_OPTION_ROW_(EX, keep_background, 76, 4, false), SANDLET_OPTION_ROW_(EX, on_output, 80, 8, false),
        SANDLET_OPTION_ROW_(EX, output_user_data, 88, 8, false), SANDLET_OPTION_ROW_(EX, toolkit, 96, 4, false),
        // stdin_stream took the place of a must-be-zero `reserved`, so old callers keep their meaning.
        SANDLET_OPTION_ROW_(EX, stdin_stream, 100, 4, false), SANDLET_OPTION_ROW_(EX, tty, 104, 4, false),
        SANDLET_OPTION_ROW_(EX, tty_rows, 108, 4, false), SANDLET_OPTION_ROW_(EX, tty_cols, 112, 4, false),
        SANDLET_OPTION_ROW_(EX, reserved, 116, 4, false)}},
      {"sandlet_run_options_t", sizeof(RN), 64, rn_init.size,
       {SANDLET_OPTION_ROW_(RN, size, 0, 4, false), SANDLET_OPTION_ROW_(RN, argv, 8, 8, true),
        SANDLET_OPTION_ROW_(RN, env, 16, 8, false), SANDLET_OPTION_ROW_(RN, cwd, 24, 8, false),
        SANDLET_OPTION_ROW_(RN, user, 32, 8, false), SANDLET_OPTION_ROW_(RN, timeout_s, 40, 8, false),
        SANDLET_OPTION_ROW_(RN, stdin_fd, 48, 4, false), SANDLET_OPTION_ROW_(RN, stdout_fd, 52, 4, false),
        SANDLET_OPTION_ROW_(RN, stderr_fd, 56, 4, false), SANDLET_OPTION_ROW_(RN, cancel_fd, 60, 4, false)}},
      {"sandlet_layer_import_options_t", sizeof(LI), 56, li_init.size,
       {SANDLET_OPTION_ROW_(LI, size, 0, 4, false), SANDLET_OPTION_ROW_(LI, role, 8, 8, true),
        SANDLET_OPTION_ROW_(LI, name, 16, 8, false), SANDLET_OPTION_ROW_(LI, parent, 24, 8, false),
        SANDLET_OPTION_ROW_(LI, no_dedupe, 32, 4, false), SANDLET_OPTION_ROW_(LI, progress, 40, 8, true),
        SANDLET_OPTION_ROW_(LI, progress_user_data, 48, 8, false)}},
      {"sandlet_layer_export_options_t", sizeof(LE), 24, le_init.size,
       {SANDLET_OPTION_ROW_(LE, size, 0, 4, false), SANDLET_OPTION_ROW_(LE, zstd_level, 4, 4, false),
        SANDLET_OPTION_ROW_(LE, progress, 8, 8, false), SANDLET_OPTION_ROW_(LE, progress_user_data, 16, 8, false)}},
      {"sandlet_build_options_t", sizeof(BO), 64, bo_init.size,
       {SANDLET_OPTION_ROW_(BO, size, 0, 4, false), SANDLET_OPTION_ROW_(BO, no_cache, 4, 4, false),
        SANDLET_OPTION_ROW_(BO, tag, 8, 8, false), SANDLET_OPTION_ROW_(BO, build_args, 16, 8, false),
        SANDLET_OPTION_ROW_(BO, progress, 24, 8, false), SANDLET_OPTION_ROW_(BO, progress_user_data, 32, 8, false),
        SANDLET_OPTION_ROW_(BO, cancel_fd, 40, 4, false), SANDLET_OPTION_ROW_(BO, no_default_excludes, 44, 4, false),
        SANDLET_OPTION_ROW_(BO, secrets, 48, 8, false), SANDLET_OPTION_ROW_(BO, network, 56, 8, false)}},
      {"sandlet_audit_filter_t", sizeof(AF), 40, af_init.size,
       {SANDLET_OPTION_ROW_(AF, size, 0, 4, false), SANDLET_OPTION_ROW_(AF, sandbox, 8, 8, true),
        SANDLET_OPTION_ROW_(AF, labels, 16, 8, false), SANDLET_OPTION_ROW_(AF, n_labels, 24, 8, false),
        SANDLET_OPTION_ROW_(AF, since, 32, 8, false)}},
      {"sandlet_admission_options_t", sizeof(AD), 64, ad_init.size,
       {SANDLET_OPTION_ROW_(AD, size, 0, 4, false), SANDLET_OPTION_ROW_(AD, max_sandboxes, 8, 8, true),
        SANDLET_OPTION_ROW_(AD, max_memory, 16, 8, false), SANDLET_OPTION_ROW_(AD, max_pids, 24, 8, false),
        SANDLET_OPTION_ROW_(AD, max_initializing, 32, 8, false), SANDLET_OPTION_ROW_(AD, timeout_s, 40, 8, false),
        SANDLET_OPTION_ROW_(AD, max_queue, 48, 8, false), SANDLET_OPTION_ROW_(AD, max_cpus, 56, 8, false)}},
      {"sandlet_copy_options_t", sizeof(CO), 56, co_init.size,
       {SANDLET_OPTION_ROW_(CO, size, 0, 4, false), SANDLET_OPTION_ROW_(CO, keep_owners, 4, 4, false),
        SANDLET_OPTION_ROW_(CO, user, 8, 8, false), SANDLET_OPTION_ROW_(CO, follow_links, 16, 4, false),
        SANDLET_OPTION_ROW_(CO, allow_outside_links, 20, 4, false), SANDLET_OPTION_ROW_(CO, max_bytes, 24, 8, false),
        SANDLET_OPTION_ROW_(CO, max_entries, 32, 8, false), SANDLET_OPTION_ROW_(CO, progress, 40, 8, false),
        SANDLET_OPTION_ROW_(CO, progress_user_data, 48, 8, false)}},
      {"sandlet_session_options_t", sizeof(SO), 48, so_init.size,
       {SANDLET_OPTION_ROW_(SO, size, 0, 4, false), SANDLET_OPTION_ROW_(SO, argv, 8, 8, true),
        SANDLET_OPTION_ROW_(SO, env, 16, 8, false), SANDLET_OPTION_ROW_(SO, cwd, 24, 8, false),
        SANDLET_OPTION_ROW_(SO, user, 32, 8, false), SANDLET_OPTION_ROW_(SO, output_limit, 40, 8, false)}},
      // Handed to a callback: versioned by its own `size`.
      {"sandlet_build_event_t", sizeof(BE), 48, 0,
       {SANDLET_ROW_(BE, size, 0, 4, false), SANDLET_ROW_(BE, step, 4, 4, false), SANDLET_ROW_(BE, steps, 8, 4, false),
        SANDLET_ROW_(BE, line, 12, 4, false), SANDLET_ROW_(BE, text, 16, 8, false), SANDLET_ROW_(BE, data, 24, 8, false),
        SANDLET_ROW_(BE, len, 32, 8, false), SANDLET_ROW_(BE, stream, 40, 4, false), SANDLET_ROW_(BE, cached, 44, 4, false)}},
      // An element of a returned array: versioned by the element size the call returns.
      {"sandlet_backend_info_t", sizeof(BI), 40, 0,
       {SANDLET_ROW_(BI, name, 0, 8, false), SANDLET_ROW_(BI, available, 8, 4, false),
        SANDLET_ROW_(BI, capabilities, 12, 4, false), SANDLET_ROW_(BI, reason, 16, 8, false),
        SANDLET_ROW_(BI, summary, 24, 8, false), SANDLET_ROW_(BI, details_json, 32, 8, false)}},
  };
}

void check(const Layout& l) {
  const std::string t = l.type;
  if (l.size != l.want_size) fail(t + ": sizeof is " + std::to_string(l.size) + ", the table says " + std::to_string(l.want_size));
  size_t end = 0;
  for (const Field& f : l.fields) {
    const std::string name = t + "." + f.name;
    if (f.offset != f.want_offset || f.size != f.want_size) {
      fail(name + " is at " + std::to_string(f.offset) + " (" + std::to_string(f.size) + " bytes), the table says " +
           std::to_string(f.want_offset) + " (" + std::to_string(f.want_size) + " bytes)");
    }
    if (f.offset != end && !f.padding_before) {
      fail(name + ": " + std::to_string(f.offset - end) + " bytes of padding before it (a new field must not add padding)");
    }
    end = f.offset + f.size;
  }
  if (end != l.size) fail(t + " ends in " + std::to_string(l.size - end) + " bytes of padding: a field appended there would not change its size");
  if (l.init_size != 0 && l.init_size != l.size) fail(t + ": its INIT macro sets size " + std::to_string(l.init_size));
  for (size_t size = 0; size <= l.size + 8; ++size) {
    for (const Field& f : l.fields) {
      const bool want = size >= f.want_offset + f.want_size;
      if (f.has_field(size) != want)
        fail("SANDLET_HAS_FIELD(" + t + ", " + f.name + ", " + std::to_string(size) + ") is " + (want ? "false" : "true"));
      if (f.present && f.present(static_cast<uint32_t>(size)) != want)
        fail("field_present(" + t + " of size " + std::to_string(size) + ", " + f.name + ") is " + (want ? "false" : "true"));
    }
  }
}

}  // namespace

int main() {
  if (sizeof(void*) != 8 || sizeof(long) != 8) {
    std::printf("SKIP: the layout table is for LP64 targets\n");
    return 77;
  }
  const auto layouts = table();
  for (const auto& l : layouts) check(l);
  if (failures) return 1;
  std::printf("OK: %zu structs match their layout table\n", layouts.size());
  return 0;
}
