// The CLI's layer store commands (`sandlet layer ...`, `sandlet env ...`, `run --env NAME`), driven as a
// user would through the built `sandlet` binary against the harness's fresh root.
#include "integration/harness.hpp"

namespace {

// Runs the CLI with --root <harness root>; returns stdout, *status gets the exit status.
std::string cli(Harness& h, const std::string& args, int* status = nullptr) {
  return host_sh(std::string(SANDLET_CLI) + " --root " + h.root() + " " + args + " 2>/dev/null", status);
}

}  // namespace

TEST_CASE("cli: import a layer, make an environment, run in it, list, remove, gc", "[cli][layers]") {
  Harness h;
  int st = -1;
  const std::string digest = cli(h, std::string("layer import ") + SANDLET_TEST_ROOTFS + " --name busybox", &st);
  REQUIRE(st == 0);
  REQUIRE(digest.rfind("sha256:", 0) == 0);
  REQUIRE(digest.size() == 7 + 64 + 1);
  CHECK(cli(h, std::string("layer import ") + SANDLET_TEST_ROOTFS + " --name busybox", &st) == digest);
  CHECK(st == 0);

  CHECK(cli(h, "env create bb --layer busybox --env FOO=bar", &st) == "bb@1\n");
  CHECK(st == 0);
  CHECK(cli(h, "run --env bb -- /bin/sh -c 'echo $FOO'", &st) == "bar\n");
  CHECK(st == 0);
  CHECK(cli(h, "run --environment bb@1 --env X=1 -- /bin/sh -c 'echo $FOO $X'", &st) == "bar 1\n");
  CHECK(st == 0);
  CHECK(cli(h, "run --layer " + digest.substr(7, 12) + " -- /bin/echo ok", &st) == "ok\n");
  CHECK(st == 0);

  const std::string ls = cli(h, "layer ls", &st);
  CHECK(st == 0);
  CHECK(ls.find("DIGEST") != std::string::npos);
  CHECK(ls.find(digest.substr(7, 12) + " ") != std::string::npos);
  CHECK(ls.find("busybox") != std::string::npos);
  CHECK(cli(h, "layer inspect busybox", &st).find("\"digest\"") != std::string::npos);
  CHECK(st == 0);
  CHECK(cli(h, "env ls", &st).find("bb") != std::string::npos);

  // In use by an environment: refused.
  cli(h, "layer rm busybox", &st);
  CHECK(st == 1);
  CHECK(cli(h, "env rm bb", &st) == "bb\n");
  CHECK(st == 0);
  CHECK(cli(h, "layer rm busybox", &st) == "busybox\n");
  CHECK(st == 0);
  CHECK(cli(h, "layer gc", &st).find("freed ") != std::string::npos);
  CHECK(st == 0);
  h.check_no_leaks();
}

TEST_CASE("cli: layer and env usage errors exit 2, unknown refs exit 1", "[cli][layers]") {
  Harness h;
  int st = -1;
  cli(h, "layer", &st);
  CHECK(st == 2);
  cli(h, "layer frob", &st);
  CHECK(st == 2);
  cli(h, "layer merge onlyone", &st);
  CHECK(st == 2);
  cli(h, "env create x", &st);  // no --layer
  CHECK(st == 2);
  cli(h, "run --env a --env b -- true", &st);  // two environments
  CHECK(st == 2);
  cli(h, "layer inspect nope", &st);
  CHECK(st == 1);
  CHECK(cli(h, "layer --help", &st).find("import") != std::string::npos);
  CHECK(st == 0);
  CHECK(cli(h, "--help", &st).find("layer") != std::string::npos);
  h.check_no_leaks();
}
