// C ABI: directory copies into and out of a sandbox (sandlet_copy.h; runtime/sandbox_tree.cpp).
#include "capi/handles.hpp"
#include "capi/options.hpp"

using sandlet::capi::check_options_size;
using sandlet::capi::field_or;
using sandlet::capi::guard;

namespace {

sandlet::CopyOptions to_options(const sandlet_copy_options_t* opts) {
  sandlet::CopyOptions o;
  if (!opts) return o;
  using T = sandlet_copy_options_t;
  check_options_size(*opts, "sandlet_copy_options_t", "SANDLET_COPY_OPTIONS_INIT");
  o.keep_owners = field_or(*opts, &T::keep_owners, 0) != 0;
  if (const char* user = field_or(*opts, &T::user, nullptr)) o.user = user;
  o.follow_root = field_or(*opts, &T::follow_links, 0) != 0;
  o.outside_links = field_or(*opts, &T::allow_outside_links, 0) != 0;
  o.max_bytes = field_or(*opts, &T::max_bytes, 0);
  o.max_entries = field_or(*opts, &T::max_entries, 0);
  if (sandlet_copy_progress_cb fn = field_or(*opts, &T::progress, nullptr)) {
    void* ud = field_or(*opts, &T::progress_user_data, nullptr);
    o.progress = [fn, ud](const sandlet::TreeCopyStats& s) {
      const sandlet_copy_stats_t c{s.entries, s.bytes, s.skipped};
      if (fn(ud, &c) != 0) throw sandlet::Error(sandlet::Code::kCancelled, "copy: stopped by its progress callback");
    };
  }
  return o;
}

void fill(sandlet_copy_stats_t* out, const sandlet::TreeCopyStats& s) {
  if (out) *out = sandlet_copy_stats_t{s.entries, s.bytes, s.skipped};
}

}  // namespace

SANDLET_API sandlet_error_t* sandlet_sandbox_copy_in(sandlet_sandbox_t* sb, const char* host_path, const char* path,
                                                     const sandlet_copy_options_t* opts, sandlet_copy_stats_t* stats) {
  SANDLET_REQUIRE_HANDLE(sb);
  SANDLET_REQUIRE(host_path);
  SANDLET_REQUIRE(path);
  return guard([&] { fill(stats, sb->sb->copy_in(host_path, path, to_options(opts))); });
}

SANDLET_API sandlet_error_t* sandlet_sandbox_copy_out(sandlet_sandbox_t* sb, const char* path, const char* host_path,
                                                      const sandlet_copy_options_t* opts, sandlet_copy_stats_t* stats) {
  SANDLET_REQUIRE_HANDLE(sb);
  SANDLET_REQUIRE(path);
  SANDLET_REQUIRE(host_path);
  return guard([&] { fill(stats, sb->sb->copy_out(path, host_path, to_options(opts))); });
}

SANDLET_API sandlet_error_t* sandlet_sandbox_put_archive(sandlet_sandbox_t* sb, int fd, const char* path,
                                                         const sandlet_copy_options_t* opts,
                                                         sandlet_copy_stats_t* stats) {
  SANDLET_REQUIRE_HANDLE(sb);
  SANDLET_REQUIRE(path);
  return guard([&] { fill(stats, sb->sb->put_archive(fd, path, to_options(opts))); });
}

SANDLET_API sandlet_error_t* sandlet_sandbox_get_archive(sandlet_sandbox_t* sb, const char* path, int fd,
                                                         const sandlet_copy_options_t* opts,
                                                         sandlet_copy_stats_t* stats) {
  SANDLET_REQUIRE_HANDLE(sb);
  SANDLET_REQUIRE(path);
  return guard([&] { fill(stats, sb->sb->get_archive(path, fd, to_options(opts))); });
}
