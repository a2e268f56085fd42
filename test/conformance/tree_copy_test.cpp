// Directory copies every backend must give (sandlet_copy.h): a tree into a sandbox and back out keeps what
// docker cp keeps; owners follow the user; nothing leaves the destination on either side; tar streams
// both ways; the caps and errors name what they refuse.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <fstream>

#include "conformance/conformance.hpp"

using namespace conformance;

namespace {

struct HostDir {
  std::string path;
  HostDir() {
    char tmpl[] = "/tmp/sandlet-copy-test-XXXXXX";
    REQUIRE(::mkdtemp(tmpl) != nullptr);
    path = tmpl;
  }
  ~HostDir() { std::system(("chmod -R u+rwx " + path + " 2>/dev/null; rm -rf " + path).c_str()); }
};

void put(const std::string& path, const std::string& data, mode_t mode) {
  std::ofstream(path, std::ios::binary) << data;
  REQUIRE(::chmod(path.c_str(), mode) == 0);
}

std::string host(const std::string& cmd) {
  std::string result;
  FILE* p = ::popen(cmd.c_str(), "r");
  REQUIRE(p != nullptr);
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) result.append(buf, n);
  ::pclose(p);
  return result;
}

// A listing to compare trees by: type, mode, mtime, a file's size and a link's target of every entry (the
// root included), sorted. (A directory's size is the file system's, not the tree's.)
const char* const kListing =
    "cd %s && find . | sort | while read -r p; do stat -c '%%n %%F %%a %%Y' \"$p\"; "
    "if [ -L \"$p\" ]; then readlink \"$p\"; elif [ -f \"$p\" ]; then stat -c %%s \"$p\"; fi; done; true";

std::string listing_host(const std::string& dir) {
  char cmd[512];
  std::snprintf(cmd, sizeof cmd, kListing, dir.c_str());
  return host(cmd);
}
std::string listing_inside(sandlet::Sandbox& sb, const std::string& dir) {
  char cmd[512];
  std::snprintf(cmd, sizeof cmd, kListing, dir.c_str());
  return out(sb, cmd);
}

// The source tree of the round trips.
void make_tree(const std::string& src) {
  REQUIRE(::mkdir(src.c_str(), 0755) == 0);
  for (const char* d : {"/empty", "/a", "/a/b", "/a/b/c"}) REQUIRE(::mkdir((src + d).c_str(), 0750) == 0);
  std::string big(2 << 20, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 131 + i / 977);
  put(src + "/a/b/c/big.bin", big, 0600);
  put(src + "/script.sh", "#!/bin/sh\necho hi\n", 04755);
  put(src + "/a/readme", "hello", 0444);
  REQUIRE(::link((src + "/a/readme").c_str(), (src + "/a/b/again").c_str()) == 0);
  REQUIRE(::symlink("a/readme", (src + "/rel").c_str()) == 0);
  REQUIRE(::symlink("/etc/passwd", (src + "/abs").c_str()) == 0);
  REQUIRE(::mkfifo((src + "/pipe").c_str(), 0600) == 0);
  host("touch -h -d '2021-02-03 04:05:06' " + src + "/rel " + src + "/a/readme " + src + "/empty");
}

}  // namespace

TEST_CASE("copy: a tree round-trips with modes, times, links, FIFOs and empty directories", "[conformance][copy]") {
  Fixture f;
  auto sb = f.create();
  HostDir t;
  make_tree(t.path + "/src");
  const std::string expected = listing_host(t.path + "/src");
  REQUIRE(contains(expected, "./a/b/c/big.bin regular file 600 "));
  REQUIRE(contains(expected, "./pipe fifo 600 "));
  REQUIRE(contains(expected, "./rel symbolic link 777 1612325106\na/readme\n"));

  const sandlet_copy_stats_t in = sb.copy_in(t.path + "/src", "/work/tree");
  CHECK(in.entries == 12);
  CHECK(in.bytes == (2u << 20) + 18 + 5);
  CHECK(listing_inside(sb, "/work/tree") == expected);
  // One file with two names inside too, and everything owned by the sandbox's user (root here).
  CHECK(out(sb, "stat -c %i /work/tree/a/readme /work/tree/a/b/again | uniq | wc -l") == "1\n");
  CHECK(out(sb, "find /work/tree ! -user 0 | wc -l") == "0\n");

  // (the tree's "abs" link points outside it: made on the host only when asked for)
  sandlet::CopyOptions links;
  links.allow_outside_links = true;
  const sandlet_copy_stats_t back = sb.copy_out("/work/tree", t.path + "/back", links);
  CHECK(back.entries == in.entries);
  CHECK(back.bytes == in.bytes);
  CHECK(back.skipped == 0);
  const sandlet_copy_stats_t safe = sb.copy_out("/work/tree", t.path + "/safe");
  CHECK(safe.skipped == 1);
  CHECK(::access((t.path + "/safe/abs").c_str(), F_OK) != 0);
  CHECK(host("readlink " + t.path + "/safe/rel") == "a/readme\n");
  // Out of a sandbox, set-id bits are dropped; everything else is as it was.
  std::string without_setid = expected;
  const size_t at = without_setid.find("regular file 4755");
  REQUIRE(at != std::string::npos);
  without_setid.replace(at, 17, "regular file 755");
  INFO(expected);
  CHECK(listing_host(t.path + "/back") == without_setid);
  CHECK(host("cmp " + t.path + "/src/a/b/c/big.bin " + t.path + "/back/a/b/c/big.bin && echo same") == "same\n");
  struct stat s1 {}, s2 {};
  REQUIRE(::stat((t.path + "/back/a/readme").c_str(), &s1) == 0);
  REQUIRE(::stat((t.path + "/back/a/b/again").c_str(), &s2) == 0);
  CHECK(s1.st_ino == s2.st_ino);

  // Into an existing directory: merged; a file replaces a file.
  out(sb, "mkdir -p /merge/a && echo keep > /merge/kept && echo old > /merge/script.sh");
  sb.copy_in(t.path + "/src", "/merge");
  CHECK(out(sb, "cat /merge/kept /merge/script.sh") == "keep\n#!/bin/sh\necho hi\n");
  // One file, and a link copied as a link (or followed when asked).
  sb.copy_in(t.path + "/src/a/readme", "/one/file");
  CHECK(out(sb, "cat /one/file; stat -c %a /one/file") == "hello444\n");
  sb.copy_in(t.path + "/src/rel", "/one/link");
  CHECK(out(sb, "readlink /one/link") == "a/readme\n");
  sandlet::CopyOptions follow;
  follow.follow_links = true;
  sb.copy_in(t.path + "/src/rel", "/one/followed", follow);
  CHECK(out(sb, "cat /one/followed") == "hello");
  f.check_no_leaks();
}

TEST_CASE("copy: owners are the user's, or the source's with keep_owners", "[conformance][copy]") {
  Fixture f;
  auto sb = f.create(Fixture::spec().user("sandbox"));
  HostDir t;
  REQUIRE(::mkdir((t.path + "/src").c_str(), 0755) == 0);
  put(t.path + "/src/f", "data", 0644);
  REQUIRE(::chown((t.path + "/src/f").c_str(), 4321, 8765) == 0);
  sb.copy_in(t.path + "/src", "/home/sandbox/in");
  CHECK(out(sb, "stat -c %u:%g /home/sandbox/in /home/sandbox/in/f") == "1000:1000\n1000:1000\n");
  sandlet::CopyOptions keep;
  keep.keep_owners = true;
  sb.copy_in(t.path + "/src", "/kept", keep);
  CHECK(out(sb, "stat -c %u:%g /kept/f") == "4321:8765\n");
  // The user's own credentials act: a root-only directory refuses it, as the kernel would.
  sandlet::Error e = error_of([&] { sb.copy_in(t.path + "/src", "/root/denied"); });
  CHECK(e.code() == SANDLET_PERMISSION_DENIED);
  CHECK(contains(e.what(), "/root"));
  // And reading: a file the user may not read fails the copy out, named.
  sandlet::ExecOptions as_root({"sh", "-c", "mkdir -p /srv/t && echo x > /srv/t/secret && chmod 600 /srv/t/secret"});
  as_root.user = "0";
  REQUIRE(sb.exec(as_root).exit_code == 0);
  e = error_of([&] { sb.copy_out("/srv/t", t.path + "/out"); });
  CHECK(e.code() == SANDLET_PERMISSION_DENIED);
  CHECK(contains(e.what(), "/srv/t/secret"));
  sandlet::CopyOptions root;
  root.user = "0";
  sb.copy_out("/srv/t", t.path + "/out", root);
  CHECK(host("cat " + t.path + "/out/secret") == "x\n");
  f.check_no_leaks();
}

TEST_CASE("copy: a symlink never leads a copy outside its destination", "[conformance][copy][security]") {
  Fixture f;
  auto sb = f.create();
  HostDir t;
  // Into the sandbox: links already at the destination that point elsewhere in the sandbox, and one to a
  // directory inside it (merged through, as tar's --keep-directory-symlink does).
  out(sb, "mkdir -p /dest/real /elsewhere && ln -s /elsewhere /dest/abs && ln -s ../elsewhere /dest/up && "
          "echo original > /elsewhere/f && ln -s /elsewhere/f /dest/f && ln -s real /dest/inner");
  REQUIRE(::mkdir((t.path + "/src").c_str(), 0755) == 0);
  REQUIRE(::mkdir((t.path + "/src/abs").c_str(), 0755) == 0);
  put(t.path + "/src/abs/planted", "evil", 0644);
  sandlet::Error e = error_of([&] { sb.copy_in(t.path + "/src", "/dest"); });
  CHECK(e.code() == SANDLET_PERMISSION_DENIED);
  CHECK(out(sb, "ls /elsewhere") == "f\n");
  std::system(("rm -rf " + t.path + "/src/abs && mkdir " + t.path + "/src/up && echo evil > " + t.path +
               "/src/up/planted").c_str());
  e = error_of([&] { sb.copy_in(t.path + "/src", "/dest"); });
  CHECK(e.code() == SANDLET_PERMISSION_DENIED);
  CHECK(out(sb, "ls /elsewhere") == "f\n");
  // A file of the link's name replaces the link, not what it points at; a link inside is merged through.
  std::system(("rm -rf " + t.path + "/src/up && echo new > " + t.path + "/src/f && mkdir " + t.path +
               "/src/inner && echo through > " + t.path + "/src/inner/g").c_str());
  sb.copy_in(t.path + "/src", "/dest");
  CHECK(out(sb, "cat /elsewhere/f; cat /dest/f; [ -L /dest/f ] || echo replaced") == "original\nnew\nreplaced\n");
  CHECK(out(sb, "cat /dest/real/g; [ -L /dest/inner ] && echo kept") == "through\nkept\n");

  // Out of the sandbox: links pointing at host paths are left out (a host program following one later would
  // read the host's file); asked for, they arrive as links, and nothing is read or written through them.
  const std::string victim = t.path + "/victim";
  put(victim, "host data", 0644);
  out(sb, "mkdir -p /out && ln -s " + victim + " /out/to-victim && ln -s / /out/to-root && ln -s ../.. /out/up");
  CHECK(sb.copy_out("/out", t.path + "/safe").skipped == 3);
  CHECK(host("ls -A " + t.path + "/safe") == "");
  e = error_of([&] { sb.copy_out("/out/to-victim", t.path + "/one-link"); });  // a lone such link: refused
  CHECK(e.code() == SANDLET_FAILED_PRECONDITION);
  sandlet::CopyOptions follow;
  follow.follow_links = true;  // ... or followed inside the sandbox, where the host's path names nothing
  CHECK(error_of([&] { sb.copy_out("/out/to-victim", t.path + "/one-link", follow); }).code() == SANDLET_NOT_FOUND);
  sandlet::CopyOptions links;
  links.allow_outside_links = true;
  sb.copy_out("/out", t.path + "/got", links);
  char target[512] = {};
  CHECK(::readlink((t.path + "/got/to-victim").c_str(), target, sizeof target - 1) > 0);
  CHECK(std::string(target) == victim);
  CHECK(host("cat " + victim) == "host data");
  // A second copy over the first: the links at the destination are replaced, not written through.
  out(sb, "rm /out/to-victim && echo overwrite > /out/to-victim");
  sb.copy_out("/out", t.path + "/got", links);
  CHECK(host("cat " + victim) == "host data");
  CHECK(host("cat " + t.path + "/got/to-victim") == "overwrite\n");
  f.check_no_leaks();
}

TEST_CASE("copy: tar streams in and out, caps and errors", "[conformance][copy]") {
  Fixture f;
  auto sb = f.create();
  HostDir t;
  make_tree(t.path + "/src");
  // A tar made by tar(1), gzip-compressed, unpacked at a path that becomes its root.
  host("tar -C " + t.path + "/src -czf " + t.path + "/in.tgz .");
  int fd = ::open((t.path + "/in.tgz").c_str(), O_RDONLY | O_CLOEXEC);
  REQUIRE(fd >= 0);
  const sandlet_copy_stats_t st = sb.put_archive(fd, "/from-tar");
  ::close(fd);
  // (busybox's tar, the VM suites' host tool, may store FIFOs and hard links its own way: compared whole
  // only against GNU tar's archive)
  if (contains(host("tar --version 2>&1"), "GNU tar")) {
    CHECK(st.entries == 12);
    CHECK(listing_inside(sb, "/from-tar") == listing_host(t.path + "/src"));
  }
  CHECK(out(sb, "cat /from-tar/a/readme") == "hello");
  // Out as tar: members under the path's last component, readable by tar(1).
  fd = ::open((t.path + "/out.tar").c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  REQUIRE(fd >= 0);
  sb.get_archive("/from-tar", fd);
  ::close(fd);
  const std::string names = host("tar -tf " + t.path + "/out.tar | sort | head -3");
  CHECK(names == "from-tar/\nfrom-tar/a/\nfrom-tar/a/b/\n");
  host("mkdir " + t.path + "/x && tar -C " + t.path + "/x -xf " + t.path + "/out.tar");
  CHECK(host("cmp " + t.path + "/src/a/b/c/big.bin " + t.path + "/x/from-tar/a/b/c/big.bin && echo same") == "same\n");

  // Caps on what a sandbox may send.
  sandlet::CopyOptions small;
  small.max_bytes = 1000;
  sandlet::Error e = error_of([&] { sb.copy_out("/from-tar", t.path + "/capped", small); });
  CHECK(e.code() == SANDLET_OUT_OF_RANGE);
  sandlet::CopyOptions few;
  few.max_entries = 5;
  e = error_of([&] { sb.copy_out("/from-tar", t.path + "/capped2", few); });
  CHECK(e.code() == SANDLET_OUT_OF_RANGE);
  CHECK(contains(e.what(), "max_entries"));
  // Errors name the path; sockets and devices are counted as skipped.
  e = error_of([&] { sb.copy_out("/no/such", t.path + "/none"); });
  CHECK(e.code() == SANDLET_NOT_FOUND);
  CHECK(contains(e.what(), "/no/such"));
  e = error_of([&] { sb.copy_in(t.path + "/no-such", "/x"); });
  CHECK(e.code() == SANDLET_NOT_FOUND);
  e = error_of([&] { sb.copy_in(t.path + "/src", "relative"); });
  CHECK(e.code() == SANDLET_INVALID_ARGUMENT);
  CHECK(contains(e.what(), "'path'"));
  const sandlet_copy_stats_t devs = sb.copy_out("/dev", t.path + "/dev-copy");
  CHECK(devs.skipped > 0);
  CHECK(host("find " + t.path + "/dev-copy -type c -o -type b | wc -l") == "0\n");
  // A paused sandbox is resumed for the copy.
  sb.pause();
  sb.copy_in(t.path + "/src/a/readme", "/after-pause");
  CHECK(out(sb, "cat /after-pause") == "hello");
  f.check_no_leaks();
}
