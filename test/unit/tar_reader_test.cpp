// Unit tests for src/image: byte_reader (plain/gzip/zstd, raw digest) and tar_reader (GNU tar's pax and gnu
// formats, hand-made headers for the old, rare and malformed cases).
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "image/byte_reader.hpp"
#include "image/sha256.hpp"
#include "image/tar_reader.hpp"
#include "sys/fs_util.hpp"
#include "unit_helpers.hpp"

using namespace sandlet;
using namespace sandlet::image;
using Type = TarEntry::Type;

using unit::expect_error;
using unit::sh;
using unit::write_file;

namespace {

// A temp dir named after these tests.
struct TempDir : unit::TempDir {
  TempDir() : unit::TempDir("tar") {}
};

void set_mtime(const std::string& path, int64_t sec, long nsec) {
  struct timespec ts[2] = {{static_cast<time_t>(sec), nsec}, {static_cast<time_t>(sec), nsec}};
  REQUIRE(::utimensat(AT_FDCWD, path.c_str(), ts, AT_SYMLINK_NOFOLLOW) == 0);
}

// A ByteReader over a string, handing out at most `chunk` bytes per read (exercises short reads).
class StringReader final : public ByteReader {
 public:
  explicit StringReader(std::string s, size_t chunk = 1 << 20) : s_(std::move(s)), chunk_(chunk) {}
  size_t read(void* buf, size_t n) override {
    n = std::min({n, chunk_, s_.size() - pos_});
    std::memcpy(buf, s_.data() + pos_, n);
    pos_ += n;
    return n;
  }
  uint64_t input_bytes() const override { return pos_; }

 private:
  std::string s_;
  size_t chunk_, pos_ = 0;
};

struct Read {
  TarEntry e;
  std::string data;
};

std::vector<Read> read_all(ByteReader& in, bool read_data = true) {
  TarReader tar(in, "test.tar");
  std::vector<Read> out;
  TarEntry e;
  while (tar.next(e)) {
    Read r{e, ""};
    char buf[3];  // odd size: many partial reads
    if (read_data)
      for (size_t n; (n = tar.read_data(buf, sizeof buf)) > 0;) r.data.append(buf, n);
    out.push_back(std::move(r));
  }
  return out;
}

std::vector<Read> read_string(const std::string& archive, bool read_data = true) {
  StringReader in(archive, 7);
  return read_all(in, read_data);
}

const Read& find(const std::vector<Read>& all, const std::string& path) {
  for (const auto& r : all)
    if (r.e.path == path) return r;
  FAIL("no entry " << path);
  return all.front();
}

// ---- hand-made archives -------------------------------------------------------------------------------

struct Hdr {
  std::string name;
  char type = '0';
  uint32_t mode = 0644;
  uint64_t uid = 1000, gid = 1000, size = 0;
  int64_t mtime = 1700000000;
  std::string linkname, prefix;
  uint32_t devmajor = 0, devminor = 0;
  enum { kUstar, kGnu, kV7 } format = kUstar;
  bool base256_size = false, base256_mtime = false;
  bool bad_checksum = false;
};

void put_octal(char* f, size_t len, uint64_t v) { std::snprintf(f, len, "%0*llo", int(len - 1), (unsigned long long)v); }

void put_base256(char* f, size_t len, int64_t v) {
  uint64_t u = static_cast<uint64_t>(v);
  for (size_t i = len; i-- > 0;) {
    f[i] = static_cast<char>(u & 0xff);
    u = static_cast<uint64_t>(static_cast<int64_t>(u) >> 8);  // sign-extending
  }
  f[0] = static_cast<char>(v < 0 ? 0xff : 0x80);
}

std::string header(const Hdr& h) {
  std::string b(512, '\0');
  char* p = b.data();
  std::memcpy(p, h.name.data(), std::min<size_t>(h.name.size(), 100));
  put_octal(p + 100, 8, h.mode);
  put_octal(p + 108, 8, h.uid);
  put_octal(p + 116, 8, h.gid);
  if (h.base256_size) put_base256(p + 124, 12, static_cast<int64_t>(h.size)); else put_octal(p + 124, 12, h.size);
  if (h.base256_mtime) put_base256(p + 136, 12, h.mtime); else put_octal(p + 136, 12, static_cast<uint64_t>(h.mtime));
  p[156] = h.type;
  std::memcpy(p + 157, h.linkname.data(), std::min<size_t>(h.linkname.size(), 100));
  if (h.format == Hdr::kUstar) std::memcpy(p + 257, "ustar\0" "00", 8);
  if (h.format == Hdr::kGnu) std::memcpy(p + 257, "ustar  \0", 8);
  if (h.format != Hdr::kV7) {
    put_octal(p + 329, 8, h.devmajor);
    put_octal(p + 337, 8, h.devminor);
  }
  if (h.format == Hdr::kUstar) std::memcpy(p + 345, h.prefix.data(), std::min<size_t>(h.prefix.size(), 155));
  std::memset(p + 148, ' ', 8);
  unsigned sum = 0;
  for (unsigned char c : b) sum += c;
  if (h.bad_checksum) sum += 1;
  std::snprintf(p + 148, 8, "%06o", sum);  // six digits, NUL, space
  p[155] = ' ';
  return b;
}

std::string padded(std::string data) {
  data.resize((data.size() + 511) / 512 * 512, '\0');
  return data;
}

// A member: header plus data (the header's size is set from the data unless given).
std::string member(Hdr h, const std::string& data = "") {
  if (h.size == 0) h.size = data.size();
  return header(h) + padded(data);
}

std::string pax_record(const std::string& key, const std::string& value) {
  std::string body = " " + key + "=" + value + "\n";
  size_t len = body.size() + 1;
  while (std::to_string(len).size() + body.size() != len) ++len;
  return std::to_string(len) + body;
}

std::string pax(const std::vector<std::pair<std::string, std::string>>& recs, char type = 'x') {
  std::string data;
  for (const auto& [k, v] : recs) data += pax_record(k, v);
  Hdr h;
  h.name = "PaxHeaders/x";
  h.type = type;
  return member(h, data);
}

const std::string kEnd(1024, '\0');

Hdr file_hdr(const std::string& name) {
  Hdr h;
  h.name = name;
  return h;
}

}  // namespace

TEST_CASE("byte_reader: plain, gzip, zstd, multi-member streams and the raw digest", "[tar]") {
  TempDir t;
  std::string data;
  for (int64_t i = 0; i < 300000; ++i) data += std::to_string(i * 7919 % 1000003) + ",";  // ~2 MB, compressible
  write_file(t / "plain", data);
  sh("cd " + t.path + " && gzip -k -c plain > plain.gz && zstd -q -c plain > plain.zst");
  // Concatenated gzip members and multiple zstd frames must read as one stream.
  write_file(t / "part1", data.substr(0, 1000000));
  write_file(t / "part2", data.substr(1000000));
  sh("cd " + t.path + " && (gzip -c part1; gzip -c part2) > multi.gz && (zstd -q -c part1; zstd -q -c part2) > multi.zst");

  struct Case { std::string file; Compression c; };
  for (const auto& [file, c] : std::vector<Case>{{"plain", Compression::kAuto}, {"plain", Compression::kNone},
                                                 {"plain.gz", Compression::kAuto}, {"plain.gz", Compression::kGzip},
                                                 {"plain.zst", Compression::kAuto}, {"plain.zst", Compression::kZstd},
                                                 {"multi.gz", Compression::kAuto}, {"multi.zst", Compression::kAuto}}) {
    INFO(file << " compression " << int(c));
    Sha256 raw;
    auto r = open_decompressing(t / file, c, &raw);
    std::string got;
    std::vector<char> buf(100000);
    for (size_t n; (n = r->read(buf.data(), buf.size())) > 0;) got.append(buf.data(), n);
    CHECK(got == data);
    drain(*r);
    struct stat st;
    REQUIRE(::stat((t / file).c_str(), &st) == 0);
    CHECK(r->input_bytes() == static_cast<uint64_t>(st.st_size));
    CHECK(to_hex(raw.finish()) == to_hex(sha256_file(t / file)));
  }

  SECTION("open_decompressing_fd takes an open fd") {
    sys::UniqueFd fd(::open((t / "plain.zst").c_str(), O_RDONLY | O_CLOEXEC));
    REQUIRE(fd);
    auto r = open_decompressing_fd(std::move(fd), "my blob", Compression::kAuto, nullptr);
    std::string got;
    std::vector<char> buf(1 << 20);
    for (size_t n; (n = r->read(buf.data(), buf.size())) > 0;) got.append(buf.data(), n);
    CHECK(got == data);
  }

  SECTION("truncated, corrupt and trailing garbage are kDataLoss naming the file") {
    std::string gz = sys::read_file(t / "plain.gz", 64 << 20), zst = sys::read_file(t / "plain.zst", 64 << 20);
    write_file(t / "trunc.gz", gz.substr(0, gz.size() / 2));
    write_file(t / "trunc.zst", zst.substr(0, zst.size() / 2));
    write_file(t / "trunc-trailer.gz", gz.substr(0, gz.size() - 3));  // CRC/size trailer cut
    std::string bad = gz;
    bad[bad.size() / 2] ^= 0x55;
    write_file(t / "corrupt.gz", bad);
    bad = zst;
    bad[bad.size() / 2] ^= 0x55;
    write_file(t / "corrupt.zst", bad);
    write_file(t / "trailing.gz", gz + "garbage");
    write_file(t / "empty", "");
    for (std::string f : {"trunc.gz", "trunc.zst", "trunc-trailer.gz", "corrupt.gz", "corrupt.zst", "trailing.gz"}) {
      INFO(f);
      auto r = open_decompressing(t / f);
      Error e = expect_error([&] { drain(*r); });
      CHECK(e.code() == Code::kDataLoss);
      CHECK_THAT(e.what(), Catch::Contains(t / f));
    }
    // An empty file is an empty plain stream, but not a gzip or zstd one.
    CHECK_NOTHROW(drain(*open_decompressing(t / "empty")));
    CHECK(expect_error([&] { drain(*open_decompressing(t / "empty", Compression::kGzip)); }).code() == Code::kDataLoss);
    CHECK(expect_error([&] { drain(*open_decompressing(t / "empty", Compression::kZstd)); }).code() == Code::kDataLoss);
  }

  SECTION("a missing file is kNotFound naming it") {
    Error e = expect_error([&] { open_decompressing(t / "nope"); });
    CHECK(e.code() == Code::kNotFound);
    CHECK_THAT(e.what(), Catch::Contains(t / "nope"));
  }
}

TEST_CASE("tar_reader: GNU tar pax archive with xattrs, every field, plain/gzip/zstd", "[tar]") {
  TempDir t;
  const std::string src = t / "src";
  sys::mkdir_p(src + "/d/sub");
  write_file(src + "/d/f.txt", "hello");
  REQUIRE(::chmod((src + "/d/f.txt").c_str(), 04755) == 0);
  REQUIRE(::setxattr((src + "/d/f.txt").c_str(), "user.foo", "bar", 3, 0) == 0);
  REQUIRE(::setxattr((src + "/d/f.txt").c_str(), "user.bin", "\0\x01\xff", 3, 0) == 0);
  REQUIRE(::setxattr((src + "/d/f.txt").c_str(), "user.empty", "", 0, 0) == 0);
  REQUIRE(::symlink("../x/y", (src + "/d/sym").c_str()) == 0);
  REQUIRE(::link((src + "/d/f.txt").c_str(), (src + "/d/hard").c_str()) == 0);
  REQUIRE(::mkfifo((src + "/d/fifo").c_str(), 0600) == 0);
  const std::string long_name = "d/sub/" + std::string(150, 'n') + "/" + std::string(120, 'm');
  sys::mkdir_p(src + "/d/sub/" + std::string(150, 'n'));
  std::string big(70000, 'z');
  big[12345] = 'q';
  write_file(src + "/" + long_name, big);
  REQUIRE(::chmod((src + "/d/sub").c_str(), 01777) == 0);
  set_mtime(src + "/d/f.txt", 1672628645, 123456789);
  set_mtime(src + "/d/sym", 1600000000, 0);
  set_mtime(src + "/d/sub", 1500000000, 500000000);

  sh("cd " + src + " && tar --format=pax --xattrs --xattrs-include='*' --sort=name --owner=alice:3000000000 "
     "--group=:7 -cf ../a.tar . && gzip -k ../a.tar && zstd -q ../a.tar");

  for (std::string file : {"a.tar", "a.tar.gz", "a.tar.zst"}) {
    INFO(file);
    Sha256 raw;
    auto in = open_decompressing(t / file, Compression::kAuto, &raw);
    auto all = read_all(*in);
    drain(*in);
    CHECK(to_hex(raw.finish()) == to_hex(sha256_file(t / file)));

    std::vector<std::string> paths;
    for (const auto& r : all) paths.push_back(r.e.path);
    CHECK(paths == std::vector<std::string>{"", "d", "d/f.txt", "d/fifo", "d/hard", "d/sub",
                                            "d/sub/" + std::string(150, 'n'), long_name, "d/sym"});
    for (const auto& r : all) {
      CHECK(r.e.uid == 3000000000u);  // beyond the octal field: a pax record
      CHECK(r.e.gid == 7u);
    }
    const auto& root = find(all, "");
    CHECK(root.e.type == Type::kDir);

    const auto& f = find(all, "d/f.txt");
    CHECK(f.e.type == Type::kFile);
    CHECK(f.e.mode == 04755);
    CHECK(f.e.size == 5);
    CHECK(f.data == "hello");
    CHECK(f.e.mtime_sec == 1672628645);
    CHECK(f.e.mtime_nsec == 123456789);
    CHECK(f.e.link_target.empty());
    using X = std::vector<std::pair<std::string, std::string>>;
    CHECK(f.e.xattrs == X{{"user.bin", std::string("\0\x01\xff", 3)}, {"user.empty", ""}, {"user.foo", "bar"}});

    const auto& hard = find(all, "d/hard");
    CHECK(hard.e.type == Type::kHardlink);
    CHECK(hard.e.link_target == "d/f.txt");  // "./d/f.txt" normalized
    CHECK(hard.e.size == 0);
    CHECK(hard.data.empty());

    const auto& sym = find(all, "d/sym");
    CHECK(sym.e.type == Type::kSymlink);
    CHECK(sym.e.link_target == "../x/y");  // verbatim
    CHECK(sym.e.mode == 0777);
    CHECK(sym.e.mtime_sec == 1600000000);
    CHECK(sym.e.mtime_nsec == 0);

    const auto& fifo = find(all, "d/fifo");
    CHECK(fifo.e.type == Type::kFifo);
    CHECK(fifo.e.mode == 0600);

    const auto& sub = find(all, "d/sub");
    CHECK(sub.e.type == Type::kDir);
    CHECK(sub.e.mode == 01777);
    CHECK(sub.e.mtime_sec == 1500000000);
    CHECK(sub.e.mtime_nsec == 500000000);
    CHECK(sub.e.xattrs.empty());

    const auto& l = find(all, long_name);
    CHECK(l.e.size == big.size());
    CHECK(l.data == big);
  }

  SECTION("unread data is skipped by next()") {
    auto in = open_decompressing(t / "a.tar.zst");
    auto all = read_all(*in, false);
    CHECK(all.size() == 9);
    CHECK(find(all, long_name).e.size == big.size());
  }
}

TEST_CASE("tar_reader: GNU format long names, long link names, base-256 numbers", "[tar]") {
  TempDir t;
  const std::string src = t / "src";
  const std::string dir = std::string(120, 'a');
  const std::string name = dir + "/" + std::string(110, 'b');
  sys::mkdir_p(src + "/" + dir);
  write_file(src + "/" + name, "data");
  const std::string target = "/" + std::string(200, 't');
  REQUIRE(::symlink(target.c_str(), (src + "/" + dir + "/sym").c_str()) == 0);
  REQUIRE(::link((src + "/" + name).c_str(), (src + "/" + dir + "/" + std::string(105, 'h')).c_str()) == 0);
  sh("cd " + src + " && tar --format=gnu --sort=name --owner=:3000000000 --group=:4000000000 -cf ../g.tar " + dir +
     " && gzip -c ../g.tar > ../g.tgz");

  for (std::string file : {"g.tar", "g.tgz"}) {
    INFO(file);
    auto in = open_decompressing(t / file);
    auto all = read_all(*in);
    REQUIRE(all.size() == 4);
    CHECK(all[0].e.path == dir);
    CHECK(all[0].e.type == Type::kDir);
    const auto& f = find(all, name);
    CHECK(f.e.type == Type::kFile);
    CHECK(f.data == "data");
    CHECK(f.e.uid == 3000000000u);  // base-256 in the GNU format
    CHECK(f.e.gid == 4000000000u);
    const auto& h = find(all, dir + "/" + std::string(105, 'h'));
    CHECK(h.e.type == Type::kHardlink);
    CHECK(h.e.link_target == name);  // a GNU 'K' long link name, normalized
    const auto& s = find(all, dir + "/sym");
    CHECK(s.e.type == Type::kSymlink);
    CHECK(s.e.link_target == target);  // verbatim, leading '/' kept
  }
}

TEST_CASE("tar_reader: hand-made headers: old formats, devices, pax records, normalization", "[tar]") {
  SECTION("v7, '\\0' and '7' types, trailing slash directories, ustar prefix") {
    Hdr v7 = file_hdr("old/dir/");
    v7.format = Hdr::kV7;
    v7.type = '\0';
    Hdr v7f = file_hdr("old/dir/file");
    v7f.format = Hdr::kV7;
    v7f.type = '\0';
    Hdr cont = file_hdr("contig");
    cont.type = '7';
    Hdr pre = file_hdr("name");
    pre.prefix = "some/prefix";
    Hdr zero_dir = file_hdr("./zero/");  // type '0' with a trailing slash
    auto all = read_string(member(v7) + member(v7f, "v7 data") + member(cont, "c") + member(pre, "p") +
                           member(zero_dir) + kEnd);
    REQUIRE(all.size() == 5);
    CHECK(all[0].e.path == "old/dir");
    CHECK(all[0].e.type == Type::kDir);
    CHECK(all[1].e.type == Type::kFile);
    CHECK(all[1].data == "v7 data");
    CHECK(all[1].e.uid == 1000);
    CHECK(all[1].e.mtime_sec == 1700000000);
    CHECK(all[2].e.type == Type::kFile);
    CHECK(all[2].data == "c");
    CHECK(all[3].e.path == "some/prefix/name");
    CHECK(all[3].data == "p");
    CHECK(all[4].e.path == "zero");
    CHECK(all[4].e.type == Type::kDir);
  }

  SECTION("devices, modes masked to 07777, base-256 size and negative mtime, EOF without zero blocks") {
    Hdr c = file_hdr("dev/null");
    c.type = '3';
    c.mode = 0100666;
    c.devmajor = 1;
    c.devminor = 3;
    Hdr b = file_hdr("dev/sda");
    b.type = '4';
    b.devmajor = 8;
    b.devminor = 0;
    b.format = Hdr::kGnu;
    Hdr f = file_hdr("f");
    f.base256_size = true;
    f.base256_mtime = true;
    f.mtime = -86400;
    auto all = read_string(member(c) + member(b) + member(f, "xyz"));  // no end blocks: ends at EOF
    REQUIRE(all.size() == 3);
    CHECK(all[0].e.type == Type::kCharDev);
    CHECK(all[0].e.mode == 0666);
    CHECK(all[0].e.dev_major == 1);
    CHECK(all[0].e.dev_minor == 3);
    CHECK(all[1].e.type == Type::kBlockDev);
    CHECK(all[1].e.dev_major == 8);
    CHECK(all[2].data == "xyz");
    CHECK(all[2].e.size == 3);
    CHECK(all[2].e.mtime_sec == -86400);
  }

  SECTION("path normalization") {
    Hdr l = file_hdr("/abs//x/./y/");
    l.type = '1';
    l.linkname = "./a//b/.";
    Hdr root = file_hdr("./");
    root.type = '5';
    auto all = read_string(member(root) + member(file_hdr("./a//b/./c")) + member(l) + kEnd);
    REQUIRE(all.size() == 3);
    CHECK(all[0].e.path == "");
    CHECK(all[0].e.type == Type::kDir);
    CHECK(all[1].e.path == "a/b/c");
    CHECK(all[2].e.path == "abs/x/y");
    CHECK(all[2].e.type == Type::kHardlink);
    CHECK(all[2].e.link_target == "a/b");
  }

  SECTION("pax: global and per-file records, precedence, LIBARCHIVE xattrs, negative fractional mtime") {
    std::string a;
    a += pax({{"uid", "42"}, {"mtime", "100.25"}, {"SCHILY.xattr.user.global", "g"}, {"comment", "ignored"}}, 'g');
    a += member(file_hdr("one"), "1");
    a += pax({{"path", "renamed/two"}, {"uid", "7"}, {"gid", "8"}, {"mtime", "-1.5"}, {"size", "2"},
              {"LIBARCHIVE.xattr.user.b%3Dx", "AAH/"}, {"SCHILY.xattr.security.capability", "cap"},
              {"SCHILY.xattr.user.global", ""}});
    Hdr two = file_hdr("two-short-name");
    two.size = 2;
    a += header(two) + padded("22");
    a += pax({{"linkpath", "/very/long/target"}, {"mtime", ""}});  // empty value: back to the header's
    Hdr sym = file_hdr("sym");
    sym.type = '2';
    sym.linkname = "short";
    a += member(sym);
    a += member(file_hdr("three"), "333");
    a += kEnd;
    auto all = read_string(a);
    REQUIRE(all.size() == 4);
    using X = std::vector<std::pair<std::string, std::string>>;
    CHECK(all[0].e.path == "one");
    CHECK(all[0].e.uid == 42);
    CHECK(all[0].e.gid == 1000);
    CHECK(all[0].e.mtime_sec == 100);
    CHECK(all[0].e.mtime_nsec == 250000000);
    CHECK(all[0].e.xattrs == X{{"user.global", "g"}});
    CHECK(all[1].e.path == "renamed/two");
    CHECK(all[1].e.uid == 7);
    CHECK(all[1].e.gid == 8);
    CHECK(all[1].e.mtime_sec == -2);
    CHECK(all[1].e.mtime_nsec == 500000000);
    CHECK(all[1].data == "22");
    CHECK(all[1].e.xattrs == X{{"security.capability", "cap"}, {"user.b=x", std::string("\0\x01\xff", 3)},
                               {"user.global", ""}});
    CHECK(all[2].e.link_target == "/very/long/target");
    CHECK(all[2].e.mtime_sec == 1700000000);
    CHECK(all[2].e.uid == 42);
    CHECK(all[3].e.path == "three");
    CHECK(all[3].e.uid == 42);  // globals persist
    CHECK(all[3].data == "333");
  }

  SECTION("vendor extensions are skipped with their data; 'D' is a directory") {
    Hdr vol = file_hdr("volume label");
    vol.type = 'V';
    Hdr dump = file_hdr("dumped/");
    dump.type = 'D';
    auto all = read_string(member(vol, std::string(700, 'v')) + member(dump, std::string(10, 'l')) +
                           member(file_hdr("after"), "ok") + kEnd);
    REQUIRE(all.size() == 2);
    CHECK(all[0].e.path == "dumped");
    CHECK(all[0].e.type == Type::kDir);
    CHECK(all[1].data == "ok");
  }
}

TEST_CASE("tar_reader: malformed archives are refused with a clear error", "[tar]") {
  auto fails = [](const std::string& archive, Code code, const std::string& text) {
    Error e = expect_error([&] { read_string(archive); });
    CHECK(e.code() == code);
    CHECK_THAT(e.what(), Catch::Contains(text) && Catch::Contains("test.tar"));
  };
  const std::string ok = member(file_hdr("fine"), "data");

  SECTION("checksum mismatch") {
    Hdr h = file_hdr("broken");
    h.bad_checksum = true;
    fails(ok + member(h, "x") + kEnd, Code::kDataLoss, "'broken' at offset 1024: header checksum mismatch");
    fails(std::string(1024, 'x'), Code::kDataLoss, "tar header at offset 0: header checksum mismatch (not a tar archive");
  }
  SECTION("'..' components") {
    fails(member(file_hdr("a/../../etc/passwd")) + kEnd, Code::kInvalidArgument, "'..' component");
    Hdr l = file_hdr("link");
    l.type = '1';
    l.linkname = "../outside";
    fails(member(l) + kEnd, Code::kInvalidArgument, "hard link target has a '..' component");
    fails(pax({{"path", "x/.."}}) + member(file_hdr("x")) + kEnd, Code::kInvalidArgument, "'..' component");
  }
  SECTION("truncated archives") {
    std::string a = ok + member(file_hdr("big"), std::string(2000, 'b'));
    fails(a.substr(0, 1024 + 700), Code::kDataLoss, "truncated");  // inside the data
    fails(a.substr(0, 1024 + 100), Code::kDataLoss, "truncated");  // inside a header
    fails(ok + pax({{"path", "p"}}), Code::kDataLoss, "extended header without a member");
    fails(ok + std::string(512, '\0') + ok, Code::kDataLoss, "zero block is followed by a header");
  }
  SECTION("sparse members") {
    Hdr s = file_hdr("sparse");
    s.type = 'S';
    fails(member(s) + kEnd, Code::kUnimplemented, "sparse tar members are not supported");
    fails(pax({{"GNU.sparse.major", "1"}, {"GNU.sparse.minor", "0"}}) + ok + kEnd, Code::kUnimplemented,
          "sparse tar members are not supported");
  }
  SECTION("unknown types, NUL in names, oversized names and pax headers, malformed records") {
    Hdr u = file_hdr("odd");
    u.type = 'q';
    fails(member(u) + kEnd, Code::kInvalidArgument, "unsupported entry type 'q'");
    fails(pax({{"path", std::string("a\0b", 3)}}) + ok + kEnd, Code::kInvalidArgument, "NUL byte in the name");
    Hdr l = file_hdr("././@LongLink");
    l.type = 'L';
    fails(member(l, std::string("a\0b\0", 4)) + ok + kEnd, Code::kInvalidArgument, "NUL byte");
    fails(member(l, std::string(5000, 'n')) + ok + kEnd, Code::kInvalidArgument, "longer than 4096");
    fails(pax({{"path", std::string(5000, 'p')}}) + ok + kEnd, Code::kInvalidArgument, "longer than 4096");
    fails(pax({{"comment", std::string(1100000, 'c')}}) + ok + kEnd, Code::kInvalidArgument, "larger than 1 MiB");
    Hdr bad_pax = file_hdr("PaxHeaders/bad");
    bad_pax.type = 'x';
    fails(member(bad_pax, "5 a=b\n") + ok + kEnd, Code::kInvalidArgument, "malformed pax extended header");
    fails(pax({{"uid", "-3"}}) + ok + kEnd, Code::kInvalidArgument, "malformed pax uid record");
    fails(pax({{"mtime", "1.x"}}) + ok + kEnd, Code::kInvalidArgument, "malformed pax mtime record");
    fails(pax({{"LIBARCHIVE.xattr.user.a", "!!"}}) + ok + kEnd, Code::kInvalidArgument, "malformed pax record");
    Hdr root_file = file_hdr(".");
    fails(member(root_file) + kEnd, Code::kInvalidArgument, "names the root directory but is not a directory");
  }
}
