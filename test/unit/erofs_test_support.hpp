// Shared by the EROFS writer and layer store tests (erofs_writer_test.cpp, erofs_store_test.cpp): temp
// stores, awkward trees, and comparisons of a source tree with its kernel mount.
#pragma once
#include <catch2/catch.hpp>

#include <dirent.h>
#include <fcntl.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "image/layer_mounts.hpp"
#include "image/layer_store.hpp"
#include "image/sha256.hpp"
#include "runtime/runtime.hpp"
#include "runtime/sandbox.hpp"
#include "sys/fd.hpp"
#include "sys/fs_util.hpp"
#include "oci_blobs.hpp"
#include "unit_helpers.hpp"

namespace erofs_test {

using namespace sandlet;
using namespace sandlet::image;
namespace json = boost::json;
using unit::expect_error;
using unit::run;
using unit::sh;
using unit::write_file;

struct TempDir : unit::TempDir {
  TempDir() : unit::TempDir("erofs") {}
};

inline std::string slurp_file(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return "";
  std::string out;
  char buf[65536];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
  std::fclose(f);
  return out;
}

// Mounts whose mount point (field 5 of mountinfo) lies under `dir`.
inline size_t mounts_under(const std::string& dir) {
  std::string m = slurp_file("/proc/self/mountinfo");
  size_t count = 0;
  for (size_t at = 0; at < m.size();) {
    size_t eol = m.find('\n', at);
    if (eol == std::string::npos) eol = m.size();
    std::string line = m.substr(at, eol - at);
    at = eol + 1;
    size_t f = 0;
    for (int i = 0; i < 4 && f != std::string::npos; ++i) f = line.find(' ', f + (i ? 1 : 0));
    if (f == std::string::npos) continue;
    std::string mp = line.substr(f + 1, line.find(' ', f + 1) - f - 1);
    if (mp.rfind(dir + "/", 0) == 0) ++count;
  }
  return count;
}

inline std::string random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string s(n, '\0');
  for (auto& c : s) c = static_cast<char>(rng());
  return s;
}

inline std::string file_hex(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return "missing";
  return to_hex(sha256_file(path));
}

// A layer store in a temp dir with its mounts; the destructor unmounts everything it mounted.
struct Store {
  TempDir tmp;
  std::unique_ptr<LayerStore> store;
  std::unique_ptr<LayerMounts> mounts;
  std::vector<sys::UniqueFd> holds;
  Store() {
    store = std::make_unique<LayerStore>(tmp / "layers");
    mounts = std::make_unique<LayerMounts>(*store, tmp / "layers/mounts");
  }
  ~Store() { release(); }
  // The same store as another process opens it (it did not write these files itself).
  void reopen() {
    release();
    mounts.reset();
    store = std::make_unique<LayerStore>(tmp / "layers");
    mounts = std::make_unique<LayerMounts>(*store, tmp / "layers/mounts");
  }
  void release() {
    holds.clear();
    try {
      mounts->release_unused(nullptr, [] { return std::set<std::string>{}; });
    } catch (...) {
    }
  }
  std::string mount(const std::string& digest) {
    holds.emplace_back();
    return mounts->acquire(digest, &holds.back());
  }
  LayerInfo import(const std::string& path, bool* existed = nullptr, ImportOptions o = {}) {
    ImportResult r = store->import(path, o);
    REQUIRE(r.layers.size() == 1);
    if (existed) *existed = r.existed[0];
    return r.layers[0];
  }
  size_t erofs_mounts() const { return mounts_under(tmp.path); }
};

inline void set_mtime(const std::string& path, int64_t sec, long nsec) {
  struct timespec ts[2] = {{sec, nsec}, {sec, nsec}};
  REQUIRE(::utimensat(AT_FDCWD, path.c_str(), ts, AT_SYMLINK_NOFOLLOW) == 0);
}

inline void set_xattr(const std::string& path, const std::string& name, const std::string& value) {
  INFO(path << " " << name);
  REQUIRE(::lsetxattr(path.c_str(), name.c_str(), value.data(), value.size(), 0) == 0);
}

// The awkward tree of the round-trip test. `with_socket`: tar cannot archive sockets.
inline void make_awkward_tree(const std::string& d, bool with_socket) {
  sys::mkdir_p(d, 0755);
  write_file(d + "/empty", "");
  write_file(d + "/one", "x");
  write_file(d + "/f2048", random_bytes(2048, 1));
  write_file(d + "/f2049", random_bytes(2049, 2));
  write_file(d + "/f4096", random_bytes(4096, 3));
  write_file(d + "/f65536", random_bytes(65536, 4));
  write_file(d + "/f65537", random_bytes(65537, 5));
  write_file(d + "/random300k", random_bytes(300 * 1024, 6));
  {
    sys::UniqueFd fd(::open((d + "/sparse").c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    REQUIRE(fd);
    std::string mid = random_bytes(100000, 7), tail = random_bytes(5000, 8);
    REQUIRE(::pwrite(fd.get(), mid.data(), mid.size(), 5 << 20) == static_cast<ssize_t>(mid.size()));
    REQUIRE(::pwrite(fd.get(), tail.data(), tail.size(), (10 << 20) - 5000) == static_cast<ssize_t>(tail.size()));
  }
  write_file(d + "/linked", random_bytes(70000, 9));
  REQUIRE(::link((d + "/linked").c_str(), (d + "/link2").c_str()) == 0);
  sys::mkdir_p(d + "/sub", 0750);
  REQUIRE(::link((d + "/linked").c_str(), (d + "/sub/link3").c_str()) == 0);
  write_file(d + "/small_linked", "tiny");
  REQUIRE(::link((d + "/small_linked").c_str(), (d + "/sub/small_link2").c_str()) == 0);
  REQUIRE(::symlink("one", (d + "/short_link").c_str()) == 0);
  std::string long_target;
  while (long_target.size() < 3000) long_target += "abcdefghi/";
  long_target.resize(3000);
  REQUIRE(::symlink(long_target.c_str(), (d + "/long_link").c_str()) == 0);
  REQUIRE(::mknod((d + "/chardev").c_str(), S_IFCHR | 0620, makedev(1, 3)) == 0);
  REQUIRE(::mknod((d + "/blockdev").c_str(), S_IFBLK | 0640, makedev(259, 70000)) == 0);
  REQUIRE(::mkfifo((d + "/fifo").c_str(), 0600) == 0);
  if (with_socket) {
    int s = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    REQUIRE(s >= 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::string p = d + "/sock";
    REQUIRE(p.size() < sizeof addr.sun_path);
    std::memcpy(addr.sun_path, p.c_str(), p.size() + 1);
    int rc = ::bind(s, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    ::close(s);
    REQUIRE(rc == 0);
  }
  write_file(d + "/setuid", "#!/bin/sh\n", 0755);
  REQUIRE(::chmod((d + "/setuid").c_str(), 04755) == 0);
  write_file(d + "/sticky_sgid", "x", 0644);
  REQUIRE(::chmod((d + "/sticky_sgid").c_str(), 03711) == 0);
  write_file(d + "/owned", random_bytes(5000, 10), 0640);
  REQUIRE(::lchown((d + "/owned").c_str(), 1234, 5678) == 0);
  REQUIRE(::lchown((d + "/short_link").c_str(), 1234, 5678) == 0);
  REQUIRE(::lchown((d + "/sub").c_str(), 1234, 5678) == 0);
  write_file(d + "/xattrs", "data with xattrs");
  set_xattr(d + "/xattrs", "user.small", "v");
  set_xattr(d + "/xattrs", "user.binary", std::string("\0\1\2\xff", 4));
  set_xattr(d + "/xattrs", "user.big", std::string(1500, 'q'));
  set_xattr(d + "/xattrs", "trusted.thing", "t");
  set_xattr(d + "/sub", "user.on_dir", "dir");
  set_xattr(d + "/sub", "user.empty", "");
  REQUIRE(::mknod((d + "/whiteout").c_str(), S_IFCHR | 0000, makedev(0, 0)) == 0);
  sys::mkdir_p(d + "/opaque", 0755);
  write_file(d + "/opaque/inside", "inside");
  set_xattr(d + "/opaque", "trusted.overlay.opaque", "y");
  write_file(d + "/" + std::string(255, 'n'), "long name");
  write_file(d + "/bad\xff\xfename", "not utf-8");
  sys::mkdir_p(d + "/many", 0755);
  for (int i = 0; i < 2000; ++i) {
    char name[64];
    std::snprintf(name, sizeof name, "/many/entry-with-a-longish-name-%05d", i);
    if (i % 100 == 0) {
      write_file(d + name, std::to_string(i));
    } else {
      write_file(d + name, "");
    }
  }
  // Explicit timestamps with nanoseconds (directories last: adding entries moves their mtime).
  set_mtime(d + "/one", 1234567890, 123456789);
  set_mtime(d + "/short_link", 1500000000, 999999999);
  set_mtime(d + "/long_link", -1, 5);
  set_mtime(d + "/sparse", 4102444800, 1);  // 2100: beyond 32 bits
  set_mtime(d + "/linked", 1600000000, 500000000);
  set_mtime(d + "/chardev", 1700000000, 42);
  for (const char* dir : {"/sub", "/opaque", "/many"}) set_mtime(d + dir, 1650000000, 777777777);
  set_mtime(d, 1660000000, 123);
  REQUIRE(::chmod(d.c_str(), 0711) == 0);
}

inline std::map<std::string, std::string> xattrs_of(const std::string& path) {
  std::map<std::string, std::string> out;
  ssize_t n = ::llistxattr(path.c_str(), nullptr, 0);
  if (n <= 0) return out;
  std::string names(static_cast<size_t>(n), '\0');
  n = ::llistxattr(path.c_str(), names.data(), names.size());
  REQUIRE(n >= 0);
  names.resize(static_cast<size_t>(n));
  for (size_t at = 0; at < names.size();) {
    std::string name = names.c_str() + at;
    at += name.size() + 1;
    ssize_t vn = ::lgetxattr(path.c_str(), name.c_str(), nullptr, 0);
    REQUIRE(vn >= 0);
    std::string value(static_cast<size_t>(vn), '\0');
    vn = ::lgetxattr(path.c_str(), name.c_str(), value.data(), value.size());
    REQUIRE(vn >= 0);
    value.resize(static_cast<size_t>(vn));
    out[name] = value;
  }
  return out;
}

inline std::vector<std::string> list_names(const std::string& dir) {
  std::vector<std::string> out;
  DIR* d = ::opendir(dir.c_str());
  REQUIRE(d != nullptr);
  while (dirent* e = ::readdir(d)) {
    std::string n = e->d_name;
    if (n != "." && n != "..") out.push_back(n);
  }
  ::closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

// Compares every entry under `src` and `mnt` (both walked), returns the number of entries compared.
inline size_t compare_trees(const std::string& src, const std::string& mnt) {
  size_t compared = 0;
  std::map<ino_t, std::vector<std::string>> links;  // source inode -> relative paths
  std::function<void(const std::string&)> walk = [&](const std::string& rel) {
    std::string a = src + rel, b = mnt + rel;
    INFO("entry '" << (rel.empty() ? "/" : rel) << "'");
    struct stat sa, sb;
    REQUIRE(::lstat(a.c_str(), &sa) == 0);
    REQUIRE(::lstat(b.c_str(), &sb) == 0);
    ++compared;
    CHECK((sa.st_mode & S_IFMT) == (sb.st_mode & S_IFMT));
    CHECK((sa.st_mode & 07777) == (sb.st_mode & 07777));
    CHECK(sa.st_uid == sb.st_uid);
    CHECK(sa.st_gid == sb.st_gid);
    CHECK(sa.st_mtim.tv_sec == sb.st_mtim.tv_sec);
    CHECK(sa.st_mtim.tv_nsec == sb.st_mtim.tv_nsec);
    CHECK(xattrs_of(a) == xattrs_of(b));
    if (!S_ISDIR(sa.st_mode)) {
      CHECK(sa.st_nlink == sb.st_nlink);
      CHECK(sa.st_size == sb.st_size);
      links[sa.st_ino].push_back(rel);
    }
    if (S_ISCHR(sa.st_mode) || S_ISBLK(sa.st_mode)) CHECK(sa.st_rdev == sb.st_rdev);
    if (S_ISLNK(sa.st_mode)) {
      char ta[8192], tb[8192];
      ssize_t na = ::readlink(a.c_str(), ta, sizeof ta), nb = ::readlink(b.c_str(), tb, sizeof tb);
      REQUIRE(na > 0);
      CHECK(std::string(ta, static_cast<size_t>(na)) == std::string(tb, nb > 0 ? static_cast<size_t>(nb) : 0));
    }
    if (S_ISREG(sa.st_mode)) {
      std::string da = slurp_file(a), db = slurp_file(b);
      CHECK(da.size() == static_cast<size_t>(sa.st_size));
      size_t diff = 0;
      while (diff < da.size() && diff < db.size() && da[diff] == db[diff]) ++diff;
      INFO("mounted size " << db.size() << ", first difference at byte " << diff);
      CHECK((da == db));
    }
    if (S_ISDIR(sa.st_mode)) {
      auto na = list_names(a), nb = list_names(b);
      CHECK(na == nb);
      for (const auto& n : na) walk(rel + "/" + n);
    }
  };
  walk("");
  // Hard links: the same inode in the mount too, and only for the same source inode.
  std::map<ino_t, ino_t> mounted_of;
  for (const auto& [ino, paths] : links) {
    struct stat first;
    REQUIRE(::lstat((mnt + paths[0]).c_str(), &first) == 0);
    for (const auto& p : paths) {
      struct stat st;
      REQUIRE(::lstat((mnt + p).c_str(), &st) == 0);
      INFO("hard link " << p << " of " << paths[0]);
      CHECK(st.st_ino == first.st_ino);
    }
    INFO("inode of " << paths[0] << " shared with another source inode");
    CHECK(mounted_of.emplace(first.st_ino, ino).second);
  }
  return compared;
}

inline std::string fsck_cmd(const Store& s, const LayerInfo& l) {
  std::string cmd = "fsck.erofs";
  for (const auto& b : l.blobs) cmd += " --device=" + s.store->blob_path(b);
  return cmd + " " + s.store->meta_path(l.digest);
}

}  // namespace erofs_test
