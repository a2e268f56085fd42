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

TEST_CASE("cli: a layer exported to one file and imported under another root keeps its digest", "[cli][layers]") {
  Harness h, other;
  int st = -1;
  const std::string dir = h.root() + "/src-layer";
  host_sh("mkdir -p '" + dir + "/etc' && printf 'exported\\n' > '" + dir + "/etc/motd' && ln -s motd '" + dir +
          "/etc/motd.link' && head -c 100000 /dev/urandom > '" + dir + "/blob'");
  const std::string digest = cli(h, "layer import " + dir + " --name mine --role toolkit", &st);
  REQUIRE(st == 0);
  const std::string file = h.root() + "/mine.tar.zst";
  CHECK(cli(h, "layer export mine -o " + file, &st) == digest);
  CHECK(st == 0);
  // tar lists it (through zstd(1), where the host has it: a VM guest may not).
  if (host_sh("command -v zstd >/dev/null && echo yes") == "yes\n") {
    CHECK(host_sh("tar --zstd -tf " + file + " 2>/dev/null | LC_ALL=C sort | tr '\\n' ' '", &st) ==
          "./ blob etc/ etc/motd etc/motd.link ");
    CHECK(st == 0);
  }

  const std::string imported = cli(other, "layer import " + file, &st);
  CHECK(st == 0);
  CHECK(imported == digest);
  const std::string inspected = cli(other, "layer inspect mine", &st);
  CHECK(st == 0);
  CHECK(inspected.find("\"role\": \"toolkit\"") != std::string::npos);
  const std::string run = cli(other, "run --layer " + std::string(SANDLET_TEST_ROOTFS) + " --layer mine -- "
                                       "/bin/sh -c 'cat /etc/motd; readlink /etc/motd.link; wc -c < /blob'", &st);
  CHECK(st == 0);
  CHECK(run == "exported\nmotd\n100000\n");

  // A layer that goes on one this root lacks: imported, with a warning naming it.
  const std::string diff_dir = h.root() + "/diff-layer";
  host_sh("mkdir -p '" + diff_dir + "' && echo d > '" + diff_dir + "/d'");
  cli(h, "layer import " + diff_dir + " --role diff --name on-top --parent mine", &st);
  REQUIRE(st == 0);
  cli(h, "layer export on-top -o " + h.root() + "/on-top.tar", &st);
  REQUIRE(st == 0);
  Harness third;
  const std::string warned = host_sh(std::string(SANDLET_CLI) + " --root " + third.root() + " layer import " +
                                         h.root() + "/on-top.tar 2>&1 >/dev/null", &st);
  CHECK(st == 0);
  CHECK(warned.find("warning:") != std::string::npos);
  CHECK(warned.find(digest.substr(7, 64)) != std::string::npos);

  // Usage: -o is required.
  cli(h, "layer export mine", &st);
  CHECK(st == 2);
  CHECK(cli(h, "layer export --help", &st).find("-o, --output FILE") != std::string::npos);
  h.check_no_leaks();
  other.check_no_leaks();
  third.check_no_leaks();
}
