// File transfer every backend must give: round trips, large files, and errors that carry the kernel's errno
// and name the path.
#include <cerrno>
#include <future>

#include "conformance/conformance.hpp"

using namespace conformance;

namespace {

std::string pattern(size_t n) {
  std::string s(n, '\0');
  uint32_t x = 2463534242u;  // xorshift: every byte value, no repeating period a bug could hide in
  for (auto& c : s) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    c = static_cast<char>(x);
  }
  return s;
}

}  // namespace

TEST_CASE("files round-trip byte for byte, with mode and parents", "[conformance][files]") {
  Fixture f;
  auto sb = f.create();
  const std::string data = pattern(100000);
  sb.write_file("/tmp/a/b/c/data.bin", data, 0640);
  CHECK(sb.read_file("/tmp/a/b/c/data.bin") == data);
  CHECK(out(sb, "stat -c %a /tmp/a/b/c/data.bin; wc -c < /tmp/a/b/c/data.bin") == "640\n100000\n");
  sb.write_file("/tmp/empty", "");
  CHECK(sb.read_file("/tmp/empty").empty());
  sb.write_file("/tmp/a/b/c/data.bin", "replaced");  // replaces, never appends
  CHECK(sb.read_file("/tmp/a/b/c/data.bin") == "replaced");
  CHECK(out(sb, "stat -c %a /tmp/a/b/c/data.bin") == "644\n");  // mode 0 / default: 0644
  // What a command writes is what read_file returns.
  out(sb, "printf 'from\\000inside' > /tmp/cmd.out");
  CHECK(sb.read_file("/tmp/cmd.out") == std::string("from\0inside", 11));
  // The asynchronous forms, with the mode reported.
  std::promise<std::pair<std::string, uint32_t>> got;
  sb.write_file_async("/tmp/async", "async data", 0600, [&](const sandlet::Error* err, std::string, uint32_t) {
    if (err != nullptr) {
      got.set_value({std::string("write failed: ") + err->what(), 0});
      return;
    }
    sb.read_file_async("/tmp/async", 0, [&](const sandlet::Error* e2, std::string d, uint32_t mode) {
      got.set_value({e2 != nullptr ? std::string("read failed: ") + e2->what() : d, mode});
    });
  });
  auto fut = got.get_future();
  REQUIRE(fut.wait_for(std::chrono::seconds(30)) == std::future_status::ready);
  auto [bytes, mode] = fut.get();
  CHECK(bytes == "async data");
  CHECK(mode == 0600);
  f.check_no_leaks();
}

TEST_CASE("large files round-trip; a cap below the size is OUT_OF_RANGE", "[conformance][files]") {
  Fixture f;
  auto sb = f.create();
  const std::string data = pattern(48u << 20);
  sb.write_file("/tmp/large", data);
  CHECK(out(sb, "wc -c < /tmp/large") == std::to_string(data.size()) + "\n");
  CHECK(sb.read_file("/tmp/large") == data);
  auto e = error_of([&] { sb.read_file("/tmp/large", 1u << 20); });
  CHECK(e.code() == SANDLET_OUT_OF_RANGE);
  CHECK(e.err_no() == EFBIG);
  CHECK(contains(e.what(), "/tmp/large"));
  f.check_no_leaks();
}

TEST_CASE("a missing file is NOT_FOUND with ENOENT, naming the path", "[conformance][files]") {
  Fixture f;
  auto sb = f.create();
  auto e = error_of([&] { sb.read_file("/no/such/file"); });
  CHECK(e.code() == SANDLET_NOT_FOUND);
  CHECK(e.err_no() == ENOENT);
  CHECK(contains(e.what(), "/no/such/file"));
  // A parent that is a file, not a directory.
  e = error_of([&] { sb.read_file("/etc/passwd/x"); });
  CHECK(e.err_no() == ENOTDIR);
  CHECK(e.code() == SANDLET_NOT_FOUND);
  e = error_of([&] { sb.write_file("/etc/passwd/x", "data"); });
  CHECK(e.err_no() == ENOTDIR);
  CHECK(contains(e.what(), "/etc/passwd"));
  f.check_no_leaks();
}

TEST_CASE("a directory is EISDIR, not an invalid argument", "[conformance][files]") {
  Fixture f;
  auto sb = f.create();
  auto e = error_of([&] { sb.read_file("/tmp"); });
  CHECK(e.err_no() == EISDIR);
  CHECK(e.code() == SANDLET_FAILED_PRECONDITION);
  CHECK(contains(e.what(), "\"/tmp\""));
  out(sb, "mkdir -p /tmp/dir");
  e = error_of([&] { sb.write_file("/tmp/dir", "data"); });
  CHECK(e.err_no() == EISDIR);
  CHECK(e.code() == SANDLET_FAILED_PRECONDITION);
  CHECK(contains(e.what(), "/tmp/dir"));
  CHECK(out(sb, "test -d /tmp/dir && ls -A /tmp/dir | wc -l") == "0\n");  // nothing written, no temp file left
  f.check_no_leaks();
}

TEST_CASE("permission errors are PERMISSION_DENIED with EACCES, naming the path", "[conformance][files]") {
  Fixture f;
  auto sb = f.create(Fixture::spec().user("sandbox"));  // file calls act as the spec's user
  // /etc/shadow is root's, mode 0640; /etc is root's, mode 0755.
  auto e = error_of([&] { sb.read_file("/etc/shadow"); });
  CHECK(e.code() == SANDLET_PERMISSION_DENIED);
  CHECK(e.err_no() == EACCES);
  CHECK(contains(e.what(), "/etc/shadow"));
  e = error_of([&] { sb.write_file("/etc/new-file", "data"); });
  CHECK(e.code() == SANDLET_PERMISSION_DENIED);
  CHECK(e.err_no() == EACCES);
  CHECK(contains(e.what(), "/etc/new-file"));
  // Writing where the user may: the file is the user's.
  sb.write_file("/home/sandbox/mine", "data");
  CHECK(out(sb, "stat -c %u:%g /home/sandbox/mine") == "1000:1000\n");
  f.check_no_leaks();
}

TEST_CASE("a relative path is INVALID_ARGUMENT naming the path", "[conformance][files]") {
  Fixture f;
  auto sb = f.create();
  for (const char* path : {"relative/file", ""}) {
    INFO("path '" << path << "'");
    auto e = error_of([&] { sb.write_file(path, "x"); });
    CHECK(e.code() == SANDLET_INVALID_ARGUMENT);
    CHECK(contains(e.what(), "path"));
    e = error_of([&] { sb.read_file(path); });
    CHECK(e.code() == SANDLET_INVALID_ARGUMENT);
  }
  f.check_no_leaks();
}
