// `sandlet create/run --spec FILE`: the file is the base spec, flags override it. (That its numbers reach
// the library exactly is test/unit/cli_json_test.cpp's: what a record shows has been through the record's
// own reader.)
#include <fstream>

#include "integration/harness.hpp"

namespace {

std::string write_spec(const Harness& h, const std::string& name, const std::string& text) {
  const std::string path = h.root() + "/" + name;
  std::ofstream(path) << text;
  return path;
}

std::string cli(const Harness& h, const std::string& args, int* status) {
  return host_sh(std::string(SANDLET_CLI) + " --root " + h.root() + " " + args + " 2>&1", status);
}

}  // namespace

TEST_CASE("cli: --spec is the base spec, flags override it", "[cli][spec]") {
  Harness h;
  const std::string spec = write_spec(h, "spec.json", R"({
    "layers": [")" SANDLET_TEST_ROOTFS R"("], "hostname": "from-file",
    "env": {"A": "file", "B": "file"}, "labels": {"task": "t1"},
    "limits": {"pids": 64}, "max_lifetime_s": 1530.5, "lifetime": "owned"})");
  int status = -1;
  std::string id = cli(h, "create --spec " + spec + " --env B=flag --label run=r1", &status);
  REQUIRE(status == 0);
  id.erase(id.find_last_not_of('\n') + 1);
  const std::string ps = cli(h, "ps --json", &status);
  INFO(ps);
  CHECK(status == 0);
  CHECK(ps.find("\"max_lifetime_s\":1.5305E3") != std::string::npos);
  CHECK(ps.find("\"lifetime\":\"detached\"") != std::string::npos);  // `create` makes detached sandboxes
  CHECK(ps.find("\"task\":\"t1\"") != std::string::npos);
  CHECK(ps.find("\"run\":\"r1\"") != std::string::npos);
  CHECK(ps.find("\"pids\":64") != std::string::npos);
  CHECK(cli(h, "exec " + id + " -- sh -c 'hostname; echo $A $B'", &status) == "from-file\nfile flag\n");
  CHECK(status == 0);
  cli(h, "rm " + id, &status);
  CHECK(status == 0);
  h.check_no_leaks();
}

TEST_CASE("cli: a --spec that is not JSON, not an object, or repeats a key exits 2 saying so", "[cli][spec]") {
  Harness h;
  int status = -1;
  std::string out = cli(h, "run --spec " + write_spec(h, "bad.json", "{\"layers\": [") + " -- true", &status);
  CHECK(status == 2);
  CHECK(out.find("bad.json: malformed JSON at offset") != std::string::npos);
  out = cli(h, "run --spec " + write_spec(h, "array.json", "[1, 2]") + " -- true", &status);
  CHECK(status == 2);
  CHECK(out.find("array.json: expected a JSON object") != std::string::npos);
  out = cli(h, "run --spec " + write_spec(h, "dup.json", R"({"hostname": "a", "hostname": "b"})") + " -- true",
            &status);
  CHECK(status == 2);
  CHECK(out.find("dup.json: duplicate key 'hostname'") != std::string::npos);
  h.check_no_leaks();
}

TEST_CASE("cli: --accept-weaker names guarantees the spec accepts; an unknown one exits 2 naming it", "[cli][spec]") {
  Harness h;
  int status = -1;
  std::string id = cli(h, std::string("create --layer ") + SANDLET_TEST_ROOTFS + " --accept-weaker memory_swap", &status);
  REQUIRE(status == 0);
  id.erase(id.find_last_not_of('\n') + 1);
  const std::string ps = cli(h, "ps --json", &status);
  INFO(ps);
  CHECK(ps.find("\"accept_weaker\":[\"memory_swap\"]") != std::string::npos);
  cli(h, "rm " + id, &status);
  CHECK(status == 0);
  const std::string out = cli(h, std::string("run --layer ") + SANDLET_TEST_ROOTFS + " --accept-weaker no_such -- true", &status);
  CHECK(status == 2);
  CHECK(out.find("accept_weaker") != std::string::npos);
  CHECK(out.find("no_such") != std::string::npos);
}
