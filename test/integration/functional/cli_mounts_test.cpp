// The CLI's --mount on `run` and `create`.
#include "integration/functional/cli_support.hpp"
#include "integration/mounts_support.hpp"

using namespace cli_test;

TEST_CASE("cli: run --mount SRC:DST[:ro|rw]", "[cli][mounts]") {
  Harness h;
  HostDir in, out(0777);
  in.write("task", "the task\n");
  CliResult r = run(h, {"--mount", in.path + ":/task", "--mount", out.path + ":/out:rw", "--", "sh", "-c",
                        "cat /task/task; cp /task/task /out/copy; touch /task/x 2>/dev/null || echo ro"});
  CHECK(r.status == 0);
  CHECK(r.out == "the task\nro\n");
  CHECK(slurp(out / "copy") == "the task\n");

  // A missing source is a spec error (exit 2) naming the field.
  r = run(h, {"--mount", in.path + "/missing:/x", "--", "true"});
  CHECK(r.status == 2);
  CHECK(contains(r.err, "mounts[0].source"));
  r = run(h, {"--mount", "nocolon", "--", "true"});
  CHECK(r.status == 2);
  CHECK(contains(r.err, "--mount"));
  r = run(h, {"--mount", in.path + ":/proc/x", "--", "true"});
  CHECK(r.status == 2);
  CHECK(contains(r.err, "mounts[0].target"));
  expect_nothing_left(h);
}

TEST_CASE("cli: create --mount, the spec in ps --json", "[cli][mounts]") {
  Harness h;
  HostDir data;
  data.write("f", "x\n");
  const std::string id = expect_id(cli(h, {"create", "--layer", SANDLET_TEST_ROOTFS, "--mount", data.path + ":/data:ro"}));
  CliResult r = cli(h, {"exec", id, "--", "cat", "/data/f"});
  CHECK(r.status == 0);
  CHECK(r.out == "x\n");
  r = cli(h, {"ps", "--json"});
  CHECK(contains(r.out, R"("mounts":[{"source":")" + data.path + R"(","target":"/data","readonly":true}])"));
  CHECK(cli(h, {"rm", id}).status == 0);
  expect_nothing_left(h, {id});
}
