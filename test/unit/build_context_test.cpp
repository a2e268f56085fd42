// Unit tests for src/recipe's context collection (what a COPY takes from the host, and what it refuses) and
// the build cache (keys, entries). Host files only: no runtime.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "recipe/build_cache.hpp"
#include "recipe/context.hpp"
#include "common/error.hpp"

using namespace sandlet;
using namespace sandlet::build;
namespace fs = std::filesystem;

namespace {

struct TempDir {
  std::string path;
  TempDir() {
    char t[] = "/tmp/sandlet-build-unit-XXXXXX";
    path = ::mkdtemp(t);
  }
  ~TempDir() { fs::remove_all(path); }
  void file(const std::string& rel, const std::string& data, mode_t mode = 0644) const {
    fs::create_directories(fs::path(path + "/" + rel).parent_path());
    std::ofstream(path + "/" + rel) << data;
    ::chmod((path + "/" + rel).c_str(), mode);
  }
};

Step copy(std::vector<std::string> sources, std::string dest) {
  Step s;
  s.kind = Kind::kCopy;
  s.line = 7;
  s.sources = std::move(sources);
  s.dest = std::move(dest);
  return s;
}

std::vector<std::string> dests(const CopyInputs& in) {
  std::vector<std::string> out;
  for (const auto& e : in.entries) out.push_back(e.dest);
  return out;
}

}  // namespace

TEST_CASE("build context: sources, globs and destinations follow Docker's rules", "[build]") {
  TempDir d;
  d.file("a.txt", "a");
  d.file("b.txt", "b");
  d.file("src/x.c", "x", 0600);
  d.file("src/sub/y.c", "y");
  const std::string root = open_context(d.path);

  CopyInputs one = collect_copy(root, copy({"a.txt"}, "/opt/a"), "R");
  CHECK(dests(one) == std::vector<std::string>{"/opt/a"});
  CHECK(one.dest_may_be_dir);
  CHECK(one.file_name == "a.txt");
  CHECK(one.entries[0].sha256 == "ca978112ca1bbdcafac231b39a23dc4da786eff8147c4e72b9807785afee48bb");

  CHECK(dests(collect_copy(root, copy({"a.txt"}, "/opt/"), "R")) == std::vector<std::string>{"/opt/a.txt"});
  CHECK(dests(collect_copy(root, copy({"*.txt"}, "/d/"), "R")) == std::vector<std::string>{"/d/a.txt", "/d/b.txt"});
  CopyInputs dir = collect_copy(root, copy({"src"}, "/app"), "R");
  CHECK(dests(dir) == std::vector<std::string>{"/app/sub", "/app/sub/y.c", "/app/x.c"});
  CHECK(dir.dir_roots == std::vector<std::string>{"/app"});
  CHECK(dir.entries[2].mode == 0600);
  CHECK(dests(collect_copy(root, copy({"src/*/y.c"}, "/s/"), "R")) == std::vector<std::string>{"/s/y.c"});
  CHECK(dests(collect_copy(root, copy({"."}, "/all/"), "R")).size() == 6);

  CHECK_THROWS_WITH(collect_copy(root, copy({"*.txt"}, "/file"), "R"),
                    "R:7: COPY: several files match, so the destination must end in '/'");
  CHECK_THROWS_WITH(collect_copy(root, copy({"*.none"}, "/d/"), "R"), "R:7: COPY *.none: no file of the context matches");
  CHECK_THROWS_WITH(collect_copy(root, copy({"src/../../x"}, "/d/"), "R"), "R:7: COPY src/../../x: the source is outside the context");
}

TEST_CASE("build context: symlinks, special files and the inputs digest", "[build]") {
  TempDir d;
  d.file("dir/f", "f");
  ::symlink("f", (d.path + "/dir/inside").c_str());
  ::symlink("../dir/f", (d.path + "/dir/up-and-in").c_str());
  ::symlink("dir", (d.path + "/dirlink").c_str());
  const std::string root = open_context(d.path);
  CopyInputs in = collect_copy(root, copy({"dir"}, "/x/"), "R");
  REQUIRE(in.entries.size() == 3);
  CHECK(in.entries[1].type == ContextEntry::kSymlink);
  CHECK(in.entries[1].target == "f");
  // A symlink on the source's own path is followed when it stays inside.
  CHECK(dests(collect_copy(root, copy({"dirlink/f"}, "/y/"), "R")) == std::vector<std::string>{"/y/f"});

  ::symlink("../../etc", (d.path + "/dir/out").c_str());
  CHECK_THROWS_WITH(collect_copy(root, copy({"dir"}, "/x/"), "R"),
                    "R:7: the symlink " + root + "/dir/out -> ../../etc points outside the context");
  ::unlink((d.path + "/dir/out").c_str());
  ::mkfifo((d.path + "/dir/fifo").c_str(), 0644);
  CHECK_THROWS_WITH(collect_copy(root, copy({"dir"}, "/x/"), "R"), Catch::Contains("is a device, fifo or socket"));
  ::unlink((d.path + "/dir/fifo").c_str());

  // The digest follows content and mode, not mtime.
  const std::string before = collect_copy(root, copy({"dir"}, "/x/"), "R").digest;
  ::utimensat(AT_FDCWD, (d.path + "/dir/f").c_str(), nullptr, 0);
  CHECK(collect_copy(root, copy({"dir"}, "/x/"), "R").digest == before);
  ::chmod((d.path + "/dir/f").c_str(), 0755);
  CHECK(collect_copy(root, copy({"dir"}, "/x/"), "R").digest != before);
  CHECK(collect_copy(root, copy({"dir"}, "/other/"), "R").digest != before);

  CHECK_THROWS_WITH(open_context(d.path + "/missing"), Catch::StartsWith("build context '" + d.path + "/missing': "));
  CHECK_THROWS_WITH(open_context(d.path + "/dir/f"), "build context '" + d.path + "/dir/f' is not a directory");
}

TEST_CASE("build cache: keys cover what a step depends on; entries are hints", "[build]") {
  Step run;
  run.kind = Kind::kRun;
  run.argv = {"/bin/sh", "-c", "make"};
  const std::vector<std::string> layers = {std::string(64, 'a')};
  const std::string k = cache_key(layers, run, "");
  CHECK(k.size() == 64);
  CHECK(cache_key(layers, run, "") == k);
  CHECK(cache_key({std::string(64, 'b')}, run, "") != k);
  Step env = run;
  env.state.env["A"] = "1";
  CHECK(cache_key(layers, env, "") != k);
  Step user = run;
  user.state.user = "1000";
  CHECK(cache_key(layers, user, "") != k);
  Step arg = run;
  arg.arg_env = {"V=1"};
  CHECK(cache_key(layers, arg, "") != k);
  CHECK(cache_key(layers, run, "inputs") != k);

  TempDir d;
  BuildCache cache(d.path + "/build-cache");
  CHECK_FALSE(cache.get(k));
  cache.put(k, std::string(64, 'c'), "RUN make");
  CHECK(cache.get(k) == std::string(64, 'c'));
  std::ofstream(d.path + "/build-cache/" + std::string(64, 'd') + ".json") << "{not json";
  CHECK_FALSE(cache.get(std::string(64, 'd')));
  CHECK(cache.forget_layer(std::string(64, 'c')) == 1);
  CHECK_FALSE(cache.get(k));
}
