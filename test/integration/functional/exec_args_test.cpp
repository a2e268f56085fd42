// Arguments and environment up to the kernel's limits (ARG_MAX for the stack limit, MAX_ARG_STRLEN per
// string) reach the command; past them the exec is refused with INVALID_ARGUMENT naming the size and the
// limit: by the host before anything is sent, or by the agent when the kernel answers E2BIG.
#include <sys/resource.h>

#include "integration/harness.hpp"

namespace {

// What fs/exec.c allows for argv + envp (strings, NULs, pointers, the file name) under our stack limit,
// which a sandbox inherits.
uint64_t arg_limit() {
  struct rlimit r;
  REQUIRE(::getrlimit(RLIMIT_STACK, &r) == 0);
  const uint64_t quarter = r.rlim_cur == RLIM_INFINITY ? ~0ull : r.rlim_cur / 4;
  return std::max<uint64_t>(std::min<uint64_t>(quarter, 6u << 20), 128u << 10);
}

// The kernel's count: the file name (here argv[0], an absolute path) plus every string with its NUL and
// its pointer.
uint64_t counted(const std::vector<std::string>& argv, const std::vector<std::string>& env) {
  uint64_t n = argv[0].size() + 1;
  for (const auto& s : argv) n += s.size() + 1 + 8;
  for (const auto& s : env) n += s.size() + 1 + 8;
  return n;
}

// An exec whose environment is exactly `env` (it replaces the spec's PATH and HOSTNAME and names HOME
// and USER, so the agent adds nothing), padded with one argument to take exactly `total` bytes.
sandlet::ExecOptions exact(const std::string& argv0, uint64_t total) {
  sandlet::ExecOptions o({argv0, "-c", "echo $#", "sh"});
  o.env = {"PATH=/bin", "HOSTNAME=h", "HOME=/", "USER=root"};
  uint64_t have = counted(o.argv, o.env);
  // Fill with strings of at most 100,000 bytes; the last one takes the rest (counting its NUL and pointer).
  while (have < total) {
    uint64_t take = std::min<uint64_t>(total - have, 100000 + 9);
    REQUIRE(take >= 9);
    o.argv.push_back(std::string(take - 9, 'x'));
    have += take;
  }
  REQUIRE(counted(o.argv, o.env) == total);
  return o;
}

sandlet::Error exec_error(sandlet::Sandbox& sb, const sandlet::ExecOptions& o) {
  try {
    sb.exec(o);
  } catch (const sandlet::Error& e) {
    return e;
  }
  FAIL("the exec was not refused");
  throw;
}

}  // namespace

TEST_CASE("exec: 16 arguments of 64 KiB reach the command whole", "[exec][args]") {
  Harness h;
  auto sb = h.rt().create(Harness::spec());
  sandlet::ExecOptions o({"sh", "-c", "for a; do printf '%s ' ${#a}; done; printf '%s' \"$BIG\" | wc -c", "sh"});
  for (int i = 0; i < 16; ++i) o.argv.push_back(std::string(64 << 10, static_cast<char>('a' + i)));
  o.env = {"BIG=" + std::string(100000, 'e')};
  auto r = sb.exec(o);
  INFO(r.stderr_data);
  REQUIRE(r.exit_code == 0);
  std::string want;
  for (int i = 0; i < 16; ++i) want += "65536 ";
  CHECK(r.stdout_data == want + "100000\n");
  // The same through a one-shot run.
  sandlet::RunOptions run;
  run.argv = {"sh", "-c", "echo $(( $# ))", "sh"};
  for (int i = 0; i < 16; ++i) run.argv.push_back(std::string(64 << 10, 'r'));
  CHECK(h.rt().run(Harness::spec(), run).exit_code == 0);
  h.check_no_leaks();
}

TEST_CASE("exec: one string up to MAX_ARG_STRLEN works, a longer one is refused naming both sizes", "[exec][args]") {
  Harness h;
  auto sb = h.rt().create(Harness::spec());
  sandlet::ExecOptions o({"sh", "-c", "printf '%s' \"$1\" | wc -c", "sh", std::string(131071, 'y')});
  auto r = sb.exec(o);
  REQUIRE(r.exit_code == 0);
  CHECK(r.stdout_data == "131071\n");

  o.argv[4].push_back('y');
  auto e = exec_error(sb, o);
  CHECK(e.code() == SANDLET_INVALID_ARGUMENT);
  CHECK_THAT(e.what(), Catch::Contains("'argv'") && Catch::Contains("argument 4") && Catch::Contains("131073") &&
                           Catch::Contains("131072") && Catch::Contains("MAX_ARG_STRLEN"));

  sandlet::ExecOptions env({"true"});
  env.env = {"BIG=" + std::string(131072, 'z')};
  e = exec_error(sb, env);
  CHECK(e.code() == SANDLET_INVALID_ARGUMENT);
  CHECK_THAT(e.what(), Catch::Contains("'env'") && Catch::Contains("MAX_ARG_STRLEN"));
  // Still serving.
  CHECK(sb.exec({"true"}).exit_code == 0);
  h.check_no_leaks();
}

TEST_CASE("exec: arguments up to ARG_MAX work; one byte more is refused before anything is sent", "[exec][args]") {
  Harness h;
  auto sb = h.rt().create(Harness::spec());
  const uint64_t limit = arg_limit();
  auto at_limit = exact("/bin/sh", limit);
  auto r = sb.exec(at_limit);
  INFO(r.stderr_data);
  REQUIRE(r.exit_code == 0);
  CHECK(r.stdout_data == std::to_string(at_limit.argv.size() - 4) + "\n");

  auto e = exec_error(sb, exact("/bin/sh", limit + 1));
  CHECK(e.code() == SANDLET_INVALID_ARGUMENT);
  CHECK_THAT(e.what(), Catch::Contains(std::to_string(limit + 1) + " bytes") &&
                           Catch::Contains("limit of " + std::to_string(limit)) && Catch::Contains("ARG_MAX"));

  // A one-shot run's command is checked the same way.
  sandlet::RunOptions run;
  auto over = exact("/bin/sh", limit + 1);
  run.argv = over.argv;
  run.env = over.env;
  try {
    h.rt().run(Harness::spec(), run);
    FAIL("the run was not refused");
  } catch (const sandlet::Error& err) {
    CHECK(err.code() == SANDLET_INVALID_ARGUMENT);
    CHECK_THAT(err.what(), Catch::Contains("invalid run fields") && Catch::Contains("ARG_MAX"));
  }
  CHECK(sb.exec({"true"}).exit_code == 0);
  h.check_no_leaks();
}

TEST_CASE("exec: the kernel's E2BIG inside is the same INVALID_ARGUMENT naming the sizes", "[exec][args]") {
  Harness h;
  auto sb = h.rt().create(Harness::spec());
  const uint64_t limit = arg_limit();
  // The host counts argv[0] ("sh") as the file name; the kernel counts the path PATH gave it ("/bin/sh",
  // 5 bytes more): the host lets it through, execve refuses it.
  auto o = exact("sh", limit);
  auto e = exec_error(sb, o);
  CHECK(e.code() == SANDLET_INVALID_ARGUMENT);
  CHECK(e.err_no() == E2BIG);
  CHECK_THAT(e.what(), Catch::Contains("'argv' and 'env'") && Catch::Contains(std::to_string(limit) + " bytes") &&
                           Catch::Contains("ARG_MAX"));
  CHECK(sb.exec({"true"}).exit_code == 0);
  h.check_no_leaks();
}
