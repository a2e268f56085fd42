// sandlet_runtime_options_t -> RuntimeOptions (src/capi/runtime_options.cpp), field by field: what each
// value becomes, that 0 keeps the defaults (LoaderSettings'), that a struct's size decides which fields are
// read, and that out-of-range values are refused naming the field. Nothing here can be seen through the C
// ABI until the loader reports its settings (sandlet_loader_status), so the conversion is checked directly.
// Exit: 0 pass, 1 fail.
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <string>

#include "capi/runtime_options.hpp"
#include "common/error.hpp"

namespace {

int failures = 0;

void check(bool ok, const std::string& what) {
  if (!ok) {
    std::fprintf(stderr, "FAIL: %s\n", what.c_str());
    ++failures;
  }
}

// The conversion must refuse `o` with INVALID_ARGUMENT whose message holds `needle`.
void expect_refused(const sandlet_runtime_options_t& o, const char* needle) {
  try {
    sandlet::capi::runtime_options(&o);
    check(false, std::string("accepted, expected a refusal naming ") + needle);
  } catch (const sandlet::Error& e) {
    check(e.code() == sandlet::Code::kInvalidArgument && std::strstr(e.what(), needle) != nullptr,
          std::string("refusal '") + e.what() + "' should be INVALID_ARGUMENT naming " + needle);
  }
}

}  // namespace

int main() {
  using sandlet::capi::runtime_options;
  const sandlet::lazy::LoaderSettings defaults;

  sandlet::RuntimeOptions d = runtime_options(nullptr);
  check(d.store.empty(), "NULL options: no store");
  check(d.loader.cache_max_bytes == defaults.cache_max_bytes && d.loader.fetch_unit == defaults.fetch_unit &&
            d.loader.fetch_concurrency == defaults.fetch_concurrency &&
            d.loader.fill_timeout_ms == defaults.fill_timeout_ms,
        "NULL options: the loader's defaults");

  sandlet_runtime_options_t o = SANDLET_RUNTIME_OPTIONS_INIT;
  sandlet::RuntimeOptions zero = runtime_options(&o);
  check(zero.store.empty() && zero.loader.fetch_unit == defaults.fetch_unit &&
            zero.loader.cache_max_bytes == defaults.cache_max_bytes &&
            zero.loader.fetch_concurrency == defaults.fetch_concurrency &&
            zero.loader.fill_timeout_ms == defaults.fill_timeout_ms,
        "all-zero options: the defaults");

  o.store = "s3://bucket/prefix?endpoint=http://127.0.0.1:9000";
  o.cache_max_bytes = 5ull << 30;
  o.fetch_unit = 1u << 20;
  o.fetch_concurrency = 32;
  o.fill_timeout_ms = 2500;
  sandlet::RuntimeOptions set = runtime_options(&o);
  check(set.store == o.store, "store is copied");
  check(set.loader.cache_max_bytes == (5ull << 30), "cache_max_bytes is mapped");
  check(set.loader.fetch_unit == (1u << 20), "fetch_unit is mapped");
  check(set.loader.fetch_concurrency == 32, "fetch_concurrency is mapped");
  check(set.loader.fill_timeout_ms == 2500, "fill_timeout_ms is mapped");

  o.store = "";
  check(runtime_options(&o).store.empty(), "an empty store option is no store");

  // A struct that ends before fetch_unit: the fields past its size keep their defaults.
  o.store = "file:///srv/store";
  o.size = offsetof(sandlet_runtime_options_t, fetch_unit);
  sandlet::RuntimeOptions older = runtime_options(&o);
  check(older.store == "file:///srv/store" && older.loader.cache_max_bytes == (5ull << 30),
        "an older struct: the fields it holds are read");
  check(older.loader.fetch_unit == defaults.fetch_unit && older.loader.fetch_concurrency == defaults.fetch_concurrency &&
            older.loader.fill_timeout_ms == defaults.fill_timeout_ms,
        "an older struct: the fields past its size keep their defaults");
  o.size = offsetof(sandlet_runtime_options_t, store);
  check(runtime_options(&o).store.empty(), "a struct from before `store`: no store");

  o = sandlet_runtime_options_t SANDLET_RUNTIME_OPTIONS_INIT;
  for (uint32_t bad : {1u, 65535u, 65537u, 100000u, (64u << 20) + (64u << 10), 0xffffffffu}) {
    o.fetch_unit = bad;
    expect_refused(o, "'fetch_unit'");
  }
  for (uint32_t good : {64u << 10, 128u << 10, 64u << 20}) {
    o.fetch_unit = good;
    check(runtime_options(&o).loader.fetch_unit == good, "fetch_unit " + std::to_string(good) + " is accepted");
  }
  o.fetch_unit = 0;
  o.fetch_concurrency = 257;
  expect_refused(o, "'fetch_concurrency'");
  o.fetch_concurrency = 256;
  check(runtime_options(&o).loader.fetch_concurrency == 256, "fetch_concurrency 256 is accepted");
  o.fetch_concurrency = 1;
  check(runtime_options(&o).loader.fetch_concurrency == 1, "fetch_concurrency 1 is accepted");
  o.fetch_concurrency = 0;
  o.fill_timeout_ms = 99;
  expect_refused(o, "'fill_timeout_ms'");
  o.fill_timeout_ms = 100;
  check(runtime_options(&o).loader.fill_timeout_ms == 100, "fill_timeout_ms 100 is accepted");
  o.fill_timeout_ms = 0;
  // The audit log's rotation (audit_keep took the place `reserved` kept for a later field).
  check(runtime_options(&o).audit.keep == sandlet::AuditOptions().keep &&
            runtime_options(&o).audit.max_bytes == sandlet::AuditOptions().max_bytes,
        "0 keeps the audit defaults");
  o.audit_keep = 1001;
  expect_refused(o, "'audit_keep'");
  o.audit_keep = 7;
  check(runtime_options(&o).audit.keep == 7, "audit_keep is mapped");
  o.audit_keep = 0;
  o.audit_max_bytes = 65535;
  expect_refused(o, "'audit_max_bytes'");
  o.audit_max_bytes = 65536;
  check(runtime_options(&o).audit.max_bytes == 65536, "audit_max_bytes 65536 is accepted");
  o.audit_max_bytes = 0;
  o.snapshot_max_depth = 1;
  expect_refused(o, "'snapshot_max_depth'");

  if (failures == 0) std::printf("OK: every runtime option maps as sandlet.h says\n");
  return failures ? 1 : 0;
}
