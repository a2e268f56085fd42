// Unit tests for src/sys/fs_util: directory creation and best-effort knob writes.
#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <cerrno>
#include <fstream>
#include <string>

#include "unit_helpers.hpp"

using namespace sandlet;

namespace {
bool is_dir(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}
mode_t mode_of(const std::string& p) {
  struct stat st;
  REQUIRE(::stat(p.c_str(), &st) == 0);
  return st.st_mode & 07777;
}
}  // namespace

TEST_CASE("mkdir_p makes missing parents, accepts existing paths, reports what is in the way", "[fs]") {
  unit::TempDir t("fsutil");
  const std::string deep = t.path + "/a/b/c/d";
  sys::mkdir_p(deep, 0700);
  CHECK(is_dir(deep));
  CHECK(mode_of(t.path + "/a/b") == 0700);
  sys::mkdir_p(deep, 0700);        // all there: fine
  sys::mkdir_p(deep + "/", 0700);  // trailing slash: fine
  sys::mkdir_p(t.path + "/a/b/e", 0755);  // only the leaf missing
  CHECK(is_dir(t.path + "/a/b/e"));

  std::ofstream(t.path + "/file") << "x";
  auto e = unit::expect_error([&] { sys::mkdir_p(t.path + "/file/sub/leaf"); });
  CHECK(e.err_no() == ENOTDIR);
  CHECK(std::string(e.what()).find("/file/sub") != std::string::npos);
}

TEST_CASE("try_write_existing returns the errno instead of throwing", "[fs]") {
  unit::TempDir t("fsutil");
  CHECK(sys::try_write_existing(t.path + "/missing", "1") == ENOENT);
  std::ofstream(t.path + "/knob") << "";
  CHECK(sys::try_write_existing(t.path + "/knob", "42") == 0);
  CHECK(sys::read_file(t.path + "/knob") == "42");
}
