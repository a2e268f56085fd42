// The tree code shared by the agent and the host (src/tree), run on the host between real directories:
// a round trip keeps kinds, modes, times, links and empty directories; the applier never writes outside
// its destination, whatever the entries say and whatever links are in the way; the protocol's decoder
// refuses paths that could climb out.
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <string>
#include <vector>

#include "proto/tree_protocol.hpp"
#include "tree/tree_apply.hpp"
#include "tree/tree_walk.hpp"
#include "unit_helpers.hpp"

namespace proto = sandlet::proto;
namespace tree = sandlet::tree;

namespace {

void write(const std::string& path, const std::string& data, mode_t mode = 0644) {
  std::ofstream(path, std::ios::binary) << data;
  REQUIRE(::chmod(path.c_str(), mode) == 0);
}

std::string read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Walks `from` into `to` through the entry stream, as an agent connection would carry it.
tree::TreeStatus copy(const std::string& from, const std::string& to, const tree::ApplyOptions& a,
                      const tree::WalkOptions& w = {}) {
  tree::TreeWalker walker;
  if (tree::TreeStatus st = walker.open(from, w); !st.ok()) return st;
  tree::TreeApplier applier;
  if (tree::TreeStatus st = applier.begin(to, a); !st.ok()) return st;
  proto::TreeEntry e;
  tree::TreeStatus st;
  while (walker.next(&e, &st)) {
    // Every entry goes through the wire format, as it would between host and agent.
    proto::TreeEntry decoded;
    REQUIRE(proto::TreeEntry::decode(e.encode(), &decoded));
    if (tree::TreeStatus s = applier.entry(decoded); !s.ok()) return s;
    char buf[7000];  // odd-sized: data arrives in pieces that do not line up with anything
    for (long n; (n = walker.read(buf, sizeof buf, &st)) > 0;)
      if (tree::TreeStatus s = applier.data(buf, static_cast<size_t>(n)); !s.ok()) return s;
    if (!st.ok()) return st;
  }
  if (!st.ok()) return st;
  return applier.finish();
}

struct stat lstat_of(const std::string& p) {
  struct stat s {};
  REQUIRE(::lstat(p.c_str(), &s) == 0);
  return s;
}

tree::ApplyOptions strict() {
  tree::ApplyOptions a;
  a.strict = true;
  a.chown = false;
  return a;
}

// Applies hand-made entries (what a forged agent could send) under `dest`.
tree::TreeStatus apply(const std::string& dest, const std::vector<proto::TreeEntry>& entries,
                       const tree::ApplyOptions& a, const std::string& data = "") {
  tree::TreeApplier applier;
  if (tree::TreeStatus st = applier.begin(dest, a); !st.ok()) return st;
  for (const auto& e : entries) {
    if (tree::TreeStatus st = applier.entry(e); !st.ok()) return st;
    if (e.size) {
      if (tree::TreeStatus st = applier.data(data.data(), e.size); !st.ok()) return st;
    }
  }
  return applier.finish();
}

proto::TreeEntry entry(proto::TreeKind kind, const std::string& path, const std::string& link = "", uint64_t size = 0) {
  proto::TreeEntry e;
  e.kind = kind;
  e.path = path;
  e.mode = kind == proto::TreeKind::kDir ? 0755 : 0644;
  e.link = link;
  e.size = size;
  e.mtime_sec = 1600000000;
  return e;
}

}  // namespace

TEST_CASE("tree: a round trip keeps files, modes, times, links, FIFOs and empty directories", "[tree]") {
  unit::TempDir t("tree");
  const std::string src = t.path + "/src", dst = t.path + "/out/dst";
  REQUIRE(::mkdir(src.c_str(), 0750) == 0);
  REQUIRE(::mkdir((src + "/empty").c_str(), 0700) == 0);
  REQUIRE(::mkdir((src + "/ro").c_str(), 0755) == 0);
  write(src + "/ro/inside", "in a read-only directory", 0400);
  REQUIRE(::chmod((src + "/ro").c_str(), 0555) == 0);
  std::string big(3 << 20, 'x');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 7 + i / 4096);
  write(src + "/big", big, 04755);  // a set-user-ID bit, kept without strict
  write(src + "/first", "linked");
  REQUIRE(::link((src + "/first").c_str(), (src + "/empty/../second").c_str()) == 0);
  REQUIRE(::symlink("first", (src + "/rel-link").c_str()) == 0);
  REQUIRE(::symlink("/etc/passwd", (src + "/abs-link").c_str()) == 0);
  REQUIRE(::mkfifo((src + "/fifo").c_str(), 0600) == 0);
  REQUIRE(::chmod((src + "/fifo").c_str(), 0620) == 0);  // (past the umask)
  struct timespec ts[2] = {{1500000000, 123456789}, {1500000000, 123456789}};
  REQUIRE(::utimensat(AT_FDCWD, (src + "/first").c_str(), ts, 0) == 0);

  tree::ApplyOptions a;
  a.chown = false;
  const tree::TreeStatus st = copy(src, dst, a);
  INFO(st.message);
  REQUIRE(st.ok());
  CHECK(read(dst + "/big") == big);
  CHECK((lstat_of(dst + "/big").st_mode & 07777) == 04755);
  CHECK((lstat_of(dst).st_mode & 07777) == 0750);
  CHECK((lstat_of(dst + "/empty").st_mode & 07777) == 0700);
  CHECK((lstat_of(dst + "/ro").st_mode & 07777) == 0555);
  CHECK(read(dst + "/ro/inside") == "in a read-only directory");
  CHECK(lstat_of(dst + "/first").st_ino == lstat_of(dst + "/second").st_ino);  // one file, two names
  CHECK(lstat_of(dst + "/first").st_mtim.tv_sec == 1500000000);
  CHECK(lstat_of(dst + "/first").st_mtim.tv_nsec == 123456789);
  char target[64] = {};
  CHECK(::readlink((dst + "/abs-link").c_str(), target, sizeof target - 1) == 11);
  CHECK(std::string(target) == "/etc/passwd");
  CHECK(S_ISLNK(lstat_of(dst + "/rel-link").st_mode));
  CHECK(S_ISFIFO(lstat_of(dst + "/fifo").st_mode));
  CHECK((lstat_of(dst + "/fifo").st_mode & 07777) == 0620);
  ::chmod((src + "/ro").c_str(), 0755);
  ::chmod((dst + "/ro").c_str(), 0755);

  SECTION("strict (the host, copying out of a sandbox) drops set-id bits") {
    const std::string again = t.path + "/strict";
    REQUIRE(copy(src, again, strict()).ok());
    CHECK((lstat_of(again + "/big").st_mode & 07777) == 0755);
    ::chmod((again + "/ro").c_str(), 0755);
  }
  SECTION("a copy merges into an existing directory and replaces files, links and FIFOs there") {
    write(dst + "/first", "old");  // (breaks the link with "second": replaced by a fresh copy below)
    REQUIRE(copy(src, dst, a).ok());
    CHECK(read(dst + "/first") == "linked");
    ::chmod((dst + "/ro").c_str(), 0755);
  }
  SECTION("one file, or one link, is a tree of its own") {
    const tree::TreeStatus one = copy(src + "/first", t.path + "/single", a);
    INFO(one.message);
    REQUIRE(one.ok());
    CHECK(read(t.path + "/single") == "linked");
    REQUIRE(copy(src + "/abs-link", t.path + "/single-link", a).ok());
    CHECK(S_ISLNK(lstat_of(t.path + "/single-link").st_mode));
    tree::WalkOptions follow;
    follow.follow_root = true;
    REQUIRE(copy(src + "/rel-link", t.path + "/followed", a, follow).ok());
    CHECK(read(t.path + "/followed") == "linked");
  }
}

TEST_CASE("tree: nothing is written outside the destination", "[tree]") {
  unit::TempDir t("tree");
  const std::string dest = t.path + "/dest", outside = t.path + "/outside";
  REQUIRE(::mkdir(outside.c_str(), 0755) == 0);
  write(outside + "/victim", "untouched");
  const std::string data = "evil";
  using K = proto::TreeKind;

  for (bool is_strict : {true, false}) {
    INFO("strict " << is_strict);
    tree::ApplyOptions a = is_strict ? strict() : tree::ApplyOptions{};
    a.chown = false;
    a.strict = is_strict;
    ::system(("rm -rf " + dest).c_str());
    // A link made by the copy, then entries through it: absolute, and climbing with "..".
    for (const std::string& link : {outside, std::string("../outside"), std::string("sub/../../outside")}) {
      const tree::TreeStatus st =
          apply(dest, {entry(K::kDir, ""), entry(K::kDir, "sub"), entry(K::kSymlink, "esc", link),
                       entry(K::kFile, "esc/victim", "", data.size())},
                a, data);
      CHECK_FALSE(st.ok());
      // (strict: the link itself is left out, so its path has no directory; with outside links allowed,
      // the link is made and is not followed)
      CHECK(st.code == (is_strict ? SANDLET_NOT_FOUND : SANDLET_PERMISSION_DENIED));
      CHECK(read(outside + "/victim") == "untouched");
      ::system(("rm -rf " + dest).c_str());
      if (is_strict) {
        tree::ApplyOptions links = a;
        links.outside_links = true;
        const tree::TreeStatus made =
            apply(dest, {entry(K::kDir, ""), entry(K::kDir, "sub"), entry(K::kSymlink, "esc", link),
                         entry(K::kFile, "esc/victim", "", data.size())},
                  links, data);
        CHECK(made.code == SANDLET_PERMISSION_DENIED);
        CHECK(read(outside + "/victim") == "untouched");
        ::system(("rm -rf " + dest).c_str());
      }
    }
    // A link already in the destination, pointing out: a file of that name replaces the link.
    REQUIRE(::mkdir(dest.c_str(), 0755) == 0);
    REQUIRE(::symlink((outside + "/victim").c_str(), (dest + "/victim").c_str()) == 0);
    REQUIRE(apply(dest, {entry(K::kDir, ""), entry(K::kFile, "victim", "", data.size())}, a, data).ok());
    CHECK(read(outside + "/victim") == "untouched");
    CHECK(read(dest + "/victim") == data);
    CHECK(S_ISREG(lstat_of(dest + "/victim").st_mode));
    // A hard link to a file outside by a path that climbs: the decoder refuses the entry.
    proto::TreeEntry hl = entry(K::kHardlink, "hl", "../outside/victim");
    proto::TreeEntry decoded;
    CHECK_FALSE(proto::TreeEntry::decode(hl.encode(), &decoded));
  }
  // Strict: links that would point outside are left out and counted; links inside are made.
  {
    ::system(("rm -rf " + dest).c_str());
    tree::TreeApplier ap;
    REQUIRE(ap.begin(dest, strict()).ok());
    for (const auto& e : {entry(K::kDir, ""), entry(K::kDir, "d"), entry(K::kSymlink, "abs", "/etc/passwd"),
                          entry(K::kSymlink, "d/up", "../../x"), entry(K::kSymlink, "d/in", "../abs"),
                          entry(K::kSymlink, "d/dots", "./.././d")})
      REQUIRE(ap.entry(e).ok());
    REQUIRE(ap.finish().ok());
    CHECK(ap.skipped() == 2);
    CHECK(::access((dest + "/abs").c_str(), F_OK) != 0);
    CHECK(S_ISLNK(lstat_of(dest + "/d/in").st_mode));
    CHECK(S_ISLNK(lstat_of(dest + "/d/dots").st_mode));
    tree::TreeApplier lone;
    REQUIRE(lone.begin(t.path + "/lone", strict()).ok());
    CHECK(lone.entry(entry(K::kSymlink, "", "target")).code == SANDLET_FAILED_PRECONDITION);
  }
  // Strict: a hard link may only name a file the copy made (not one that was already there).
  ::system(("rm -rf " + dest).c_str());
  REQUIRE(::mkdir(dest.c_str(), 0755) == 0);
  write(dest + "/existing", "host file");
  const tree::TreeStatus st = apply(dest, {entry(K::kDir, ""), entry(K::kHardlink, "hl", "existing")}, strict());
  CHECK(st.code == SANDLET_INVALID_ARGUMENT);
  CHECK(::access((dest + "/hl").c_str(), F_OK) != 0);
  // And strict follows no link at all below the destination, even one that stays inside it.
  ::system(("rm -rf " + dest).c_str());
  const tree::TreeStatus inner =
      apply(dest, {entry(K::kDir, ""), entry(K::kDir, "real"), entry(K::kSymlink, "alias", "real"),
                   entry(K::kFile, "alias/f", "", data.size())},
            strict(), data);
  CHECK(inner.code == SANDLET_PERMISSION_DENIED);
  CHECK(::access((dest + "/real/f").c_str(), F_OK) != 0);
  // No temporary file is left by the failures above.
  CHECK(read(outside + "/victim") == "untouched");
}

TEST_CASE("tree: malformed streams are refused", "[tree]") {
  unit::TempDir t("tree");
  using K = proto::TreeKind;
  tree::ApplyOptions a;
  a.chown = false;
  CHECK(apply(t.path + "/d1", {entry(K::kFile, "not-root")}, a).code == SANDLET_INVALID_ARGUMENT);
  CHECK(apply(t.path + "/d2", {entry(K::kDir, ""), entry(K::kDir, "")}, a).code == SANDLET_INVALID_ARGUMENT);
  CHECK(apply(t.path + "/d3", {entry(K::kFile, ""), entry(K::kFile, "below-a-file")}, a).code == SANDLET_INVALID_ARGUMENT);
  CHECK(apply(t.path + "/d4", {entry(K::kDir, ""), entry(K::kFile, "missing-parent/f")}, a).code == SANDLET_NOT_FOUND);
  {
    tree::TreeApplier ap;
    REQUIRE(ap.begin(t.path + "/d5", a).ok());
    REQUIRE(ap.entry(entry(K::kDir, "")).ok());
    REQUIRE(ap.entry(entry(K::kFile, "f", "", 10)).ok());
    CHECK(ap.data("0123456789AB", 12).code == SANDLET_INVALID_ARGUMENT);  // more than its size
    CHECK(ap.finish().code == SANDLET_INVALID_ARGUMENT);                   // its data never came
    ap.abort();
  }
  // The temporary file of the unfinished one is gone.
  std::string listing;
  for (const char* d : {"/d5"}) {
    std::string cmd = "ls -A " + t.path + d;
    FILE* p = ::popen(cmd.c_str(), "r");
    char buf[256];
    while (std::fgets(buf, sizeof buf, p)) listing += buf;
    ::pclose(p);
  }
  CHECK(listing.empty());

  // The decoder: tree paths only, kinds and links where they belong.
  for (const char* bad : {"/abs", "../up", "a/../b", "a//b", "a/", ".", "a/./b"}) {
    INFO(bad);
    CHECK(proto::tree_path_problem(bad, true) != nullptr);
    proto::TreeEntry d;
    CHECK_FALSE(proto::TreeEntry::decode(entry(K::kFile, bad).encode(), &d));
  }
  CHECK(proto::tree_path_problem("..dots/are.fine", false) == nullptr);
  CHECK(proto::tree_path_problem("", true) == nullptr);
  CHECK(proto::tree_path_problem("", false) != nullptr);
  proto::TreeEntry d;
  CHECK_FALSE(proto::TreeEntry::decode(entry(K::kDir, "d", "", 5).encode(), &d));       // size on a directory
  CHECK_FALSE(proto::TreeEntry::decode(entry(K::kSymlink, "l", "").encode(), &d));      // a link to nothing
  CHECK_FALSE(proto::TreeEntry::decode(entry(K::kHardlink, "", "x").encode(), &d));     // the root as a link
  CHECK_FALSE(proto::TreeEntry::decode(entry(K::kFile, "f", "x").encode(), &d));        // a file with a target
  proto::TreeEntry mode = entry(K::kFile, "f");
  mode.mode = 010644;
  CHECK_FALSE(proto::TreeEntry::decode(mode.encode(), &d));
}
