// `sandlet cp` with directories: docker cp's rules for where a copy lands, "SRC/." for contents, tar
// streams on stdin and stdout, --archive and --user, and clear errors.
#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "cli_support.hpp"

namespace fs = std::filesystem;
using namespace cli_test;  // (host_sh: integration/harness.hpp, through cli_support.hpp)

TEST_CASE("cli: cp copies directories as docker cp does", "[cli][commands][copy]") {
  Harness h;
  const std::string id = expect_id(cli(h, {"create", "--layer", SANDLET_TEST_ROOTFS}));
  const std::string src = h.root() + "/proj";
  fs::create_directories(src + "/sub/empty");
  std::ofstream(src + "/sub/a.txt") << "alpha";
  std::ofstream(src + "/top.txt") << "top";
  fs::create_symlink("sub/a.txt", src + "/alias");
  auto sh = [&](const std::string& script) { return cli(h, {"exec", id, "--", "sh", "-c", script}).out; };

  // DST missing: it becomes the copy. DST an existing directory: the copy goes in under SRC's name.
  CliResult r = cli(h, {"cp", src, id + ":/work"});
  CHECK(r.status == 0);
  CHECK(r.err.empty());
  CHECK(sh("cat /work/sub/a.txt; readlink /work/alias; ls -d /work/sub/empty") == "alphasub/a.txt\n/work/sub/empty\n");
  CHECK(cli(h, {"cp", "-r", src, id + ":/work"}).status == 0);
  CHECK(sh("cat /work/proj/top.txt") == "top");
  // "SRC/." copies the contents into an existing directory.
  sh("mkdir -p /contents");
  CHECK(cli(h, {"cp", src + "/.", id + ":/contents"}).status == 0);
  CHECK(sh("ls /contents | tr '\\n' ' '") == "alias sub top.txt ");
  // A file into a directory keeps its name; a directory onto a file is refused.
  CHECK(cli(h, {"cp", src + "/top.txt", id + ":/contents/sub"}).status == 0);
  CHECK(sh("cat /contents/sub/top.txt") == "top");
  r = cli(h, {"cp", src, id + ":/contents/top.txt"});
  CHECK(r.status == 2);
  CHECK(contains(r.err, "not a directory"));

  // Out: the same rules on the host side.
  const std::string out = h.root() + "/out";
  CHECK(cli(h, {"cp", id + ":/work", out}).status == 0);
  CHECK(host_sh("cat " + out + "/sub/a.txt " + out + "/proj/top.txt") == "alphatop");
  CHECK(cli(h, {"cp", id + ":/work/sub", out}).status == 0);  // an existing directory: out/sub (merged)
  CHECK(fs::exists(out + "/sub/empty"));
  CHECK(cli(h, {"cp", id + ":/work/sub/a.txt", out + "/"}).status == 0);
  CHECK(host_sh("cat " + out + "/a.txt") == "alpha");

  // Tar streams: a directory to '-' is one (members under its name); --tar unpacks stdin at DST.
  r = cli(h, {"cp", id + ":/work/sub", "-"});
  CHECK(r.status == 0);
  std::ofstream(h.root() + "/sub.tar", std::ios::binary) << r.out;
  CHECK(host_sh("tar -tf " + h.root() + "/sub.tar | sort | tr '\\n' ' '") == "sub/ sub/a.txt sub/empty/ ");
  host_sh("tar -C " + src + " -cf " + h.root() + "/proj.tar .");
  std::ifstream in(h.root() + "/proj.tar", std::ios::binary);
  const std::string tar_bytes((std::istreambuf_iterator<char>(in)), {});
  CHECK(cli(h, {"cp", "--tar", "-", id + ":/from-tar"}, {tar_bytes}).status == 0);
  CHECK(sh("cat /from-tar/sub/a.txt") == "alpha");
  // A file to '-' stays its bytes (as before), or a tar with --tar.
  CHECK(cli(h, {"cp", id + ":/work/top.txt", "-"}).out == "top");
  r = cli(h, {"cp", "--tar", id + ":/work/top.txt", "-"});
  std::ofstream(h.root() + "/one.tar", std::ios::binary) << r.out;
  CHECK(host_sh("tar -tf " + h.root() + "/one.tar") == "top.txt\n");

  // --archive keeps the owners; --user decides whose files a copy makes.
  host_sh("chown -R 1234:2345 " + src);
  CHECK(cli(h, {"cp", "-a", src, id + ":/owned"}).status == 0);
  CHECK(sh("stat -c %u:%g /owned/top.txt") == "1234:2345\n");
  CHECK(cli(h, {"cp", "--user", "sandbox", src + "/top.txt", id + ":/tmp/as-user"}).status == 0);
  CHECK(sh("stat -c %u /tmp/as-user") == "1000\n");

  // Errors: named, status 1 (2 for usage).
  r = cli(h, {"cp", id + ":/no/such", out + "/x"});
  CHECK(r.status == 1);
  CHECK(contains(r.err, "/no/such"));
  r = cli(h, {"cp", "--tar", src, id + ":/x"});
  CHECK(r.status == 2);
  CHECK(contains(r.err, "--tar needs '-'"));
  CHECK(cli(h, {"rm", id}).status == 0);
  expect_nothing_left(h, {id});
}
