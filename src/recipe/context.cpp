// Finding, checking and hashing the context files of a COPY / ADD (context.hpp).
#include "recipe/context.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <filesystem>

#include "common/error.hpp"
#include "image/sha256.hpp"
#include "sys/fd.hpp"

namespace sandlet::build {
namespace {

bool has_glob(const std::string& s) { return s.find_first_of("*?[") != std::string::npos; }

bool inside(const std::string& root, const std::string& path) {
  return path == root || (path.size() > root.size() && path.compare(0, root.size(), root) == 0 && path[root.size()] == '/');
}

std::string join(const std::string& a, const std::string& b) {
  if (b.empty()) return a;
  return a == "/" ? "/" + b : a + "/" + b;
}

class Collector {
 public:
  Collector(const std::string& root, const Step& step, const std::string& recipe)
      : root_(root), step_(step), recipe_(recipe) {}

  CopyInputs run() {
    const std::string what = step_.kind == Kind::kAdd ? "ADD" : "COPY";
    std::vector<std::pair<std::string, std::string>> matches;  // (relative path as matched, its name)
    for (const std::string& src : step_.sources) {
      if (src[0] == '/') fail(what + " " + src + ": the source must be relative to the context (no absolute paths)");
      std::string norm = std::filesystem::path(src).lexically_normal().string();
      while (norm.size() > 1 && norm.back() == '/') norm.pop_back();
      if (norm == ".." || norm.rfind("../", 0) == 0) fail(what + " " + src + ": the source is outside the context");
      if (norm == ".") norm = "";
      size_t before = matches.size();
      if (has_glob(norm)) {
        glob("", norm, matches);
        if (matches.size() == before) fail(what + " " + src + ": no file of the context matches");
      } else {
        struct stat st;
        if (::lstat(join(root_, norm).c_str(), &st) != 0) fail(what + " " + src + ": no such file or directory in the context");
        matches.push_back({norm, std::filesystem::path(norm).filename().string()});
      }
    }
    std::string dest = step_.dest;
    const bool dest_dir = dest.back() == '/';
    if (dest_dir && dest.size() > 1) dest.pop_back();
    if (matches.size() > 1 && !dest_dir) fail(what + ": several files match, so the destination must end in '/'");

    for (const auto& [rel, name] : matches) {
      std::string host = resolve_inside(rel);
      struct stat st;
      if (::lstat(host.c_str(), &st) != 0) fail(what + " " + rel + ": cannot stat it");
      if (S_ISDIR(st.st_mode)) {
        out_.dest_dirs.push_back(dest);
        out_.dir_roots.push_back(dest);
        walk(host, dest);
      } else if (S_ISREG(st.st_mode)) {
        if (step_.kind == Kind::kAdd) refuse_archive(host, rel);
        std::string to = dest_dir ? join(dest, name) : dest;
        if (matches.size() == 1 && !dest_dir) {
          out_.dest_may_be_dir = true;
          out_.file_name = name;
        }
        out_.dest_dirs.push_back(std::filesystem::path(to).parent_path().string());
        add_file(host, to, st);
      } else {
        fail(what + " " + rel + ": not a regular file or directory");
      }
    }
    digest();
    return std::move(out_);
  }

 private:
  [[noreturn]] void fail(const std::string& why) const { refuse(recipe_, step_.line, why); }

  // The host path of `rel`, every symlink on its way followed: must stay inside the context.
  std::string resolve_inside(const std::string& rel) {
    std::string host = join(root_, rel);
    char buf[PATH_MAX];
    if (!::realpath(host.c_str(), buf)) fail("COPY " + rel + ": cannot resolve it (a dangling symlink?)");
    if (!inside(root_, buf)) fail("COPY " + rel + ": it is a symlink to " + std::string(buf) + ", outside the context");
    return buf;
  }

  // Component-wise match of `pattern` below `dir` (relative to the root); never descends through symlinks.
  void glob(const std::string& dir, const std::string& pattern, std::vector<std::pair<std::string, std::string>>& out) {
    size_t slash = pattern.find('/');
    std::string head = pattern.substr(0, slash);
    std::string tail = slash == std::string::npos ? "" : pattern.substr(slash + 1);
    std::vector<std::string> names;
    if (!has_glob(head)) {
      names.push_back(head);
    } else {
      DIR* d = ::opendir(join(root_, dir).c_str());
      if (!d) return;
      while (dirent* e = ::readdir(d)) {
        std::string n = e->d_name;
        if (n == "." || n == "..") continue;
        if (::fnmatch(head.c_str(), n.c_str(), 0) == 0) names.push_back(n);
      }
      ::closedir(d);
      std::sort(names.begin(), names.end());
    }
    for (const std::string& n : names) {
      std::string rel = dir.empty() ? n : dir + "/" + n;
      struct stat st;
      if (::lstat(join(root_, rel).c_str(), &st) != 0) continue;
      if (tail.empty()) out.push_back({rel, n});
      else if (S_ISDIR(st.st_mode)) glob(rel, tail, out);
    }
  }

  void count(uint64_t bytes) {
    total_ += bytes;
    if (out_.entries.size() > kMaxCopyEntries)
      fail("the copy holds more than " + std::to_string(kMaxCopyEntries) + " files: too large for a build step");
    if (total_ > kMaxCopyBytes) fail("the copy holds more than 2 GiB: too large for a build step");
  }

  void add_file(const std::string& host, const std::string& dest, const struct stat& st) {
    if (static_cast<uint64_t>(st.st_size) > kMaxCopyFileBytes)
      fail(host + " is larger than 512 MiB: too large to copy in a build step");
    ContextEntry e;
    e.type = ContextEntry::kFile;
    e.host = host;
    e.dest = dest;
    e.mode = st.st_mode & 07777;
    e.size = static_cast<uint64_t>(st.st_size);
    try {
      e.sha256 = image::to_hex(image::sha256_file(host));
    } catch (const Error& err) {
      fail(std::string("cannot read a file of the context: ") + err.what());
    }
    out_.entries.push_back(std::move(e));
    count(static_cast<uint64_t>(st.st_size));
  }

  // The contents of directory `host` into `dest` (the directory itself is made by the step).
  void walk(const std::string& host, const std::string& dest) {
    std::vector<std::string> names;
    DIR* d = ::opendir(host.c_str());
    if (!d) fail("cannot read the directory " + host + " of the context");
    while (dirent* e = ::readdir(d)) {
      std::string n = e->d_name;
      if (n != "." && n != "..") names.push_back(n);
    }
    ::closedir(d);
    std::sort(names.begin(), names.end());
    for (const std::string& n : names) {
      std::string h = host + "/" + n, to = join(dest, n);
      struct stat st;
      if (::lstat(h.c_str(), &st) != 0) fail("cannot stat " + h);
      if (S_ISDIR(st.st_mode)) {
        out_.entries.push_back({ContextEntry::kDir, h, to, static_cast<uint32_t>(st.st_mode & 07777), 0, "", ""});
        count(0);
        walk(h, to);
      } else if (S_ISREG(st.st_mode)) {
        add_file(h, to, st);
      } else if (S_ISLNK(st.st_mode)) {
        add_link(h, to);
      } else {
        fail(h + " is a device, fifo or socket: only files, directories and symlinks are copied");
      }
    }
  }

  void add_link(const std::string& host, const std::string& dest) {
    char buf[PATH_MAX];
    ssize_t n = ::readlink(host.c_str(), buf, sizeof buf - 1);
    if (n < 0) fail("cannot read the symlink " + host);
    std::string target(buf, static_cast<size_t>(n));
    std::string lexical = std::filesystem::path(std::filesystem::path(host).parent_path() / target).lexically_normal().string();
    if (target.empty() || target[0] == '/' || !inside(root_, lexical))
      fail("the symlink " + host + " -> " + target + " points outside the context");
    out_.entries.push_back({ContextEntry::kSymlink, host, dest, 0777, 0, "", target});
    count(0);
  }

  // ADD unpacks local archives where Docker does; that is refused, whatever the file's name.
  void refuse_archive(const std::string& host, const std::string& rel) {
    sys::UniqueFd fd(::open(host.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
    unsigned char b[512] = {};
    ssize_t n = fd ? ::pread(fd.get(), b, sizeof b, 0) : 0;
    bool gz = n >= 2 && b[0] == 0x1f && b[1] == 0x8b;
    bool bz = n >= 3 && b[0] == 'B' && b[1] == 'Z' && b[2] == 'h';
    bool xz = n >= 6 && b[0] == 0xfd && b[1] == '7' && b[2] == 'z' && b[3] == 'X' && b[4] == 'Z' && b[5] == 0;
    bool zst = n >= 4 && b[0] == 0x28 && b[1] == 0xb5 && b[2] == 0x2f && b[3] == 0xfd;
    bool tar = n >= 262 && std::string_view(reinterpret_cast<char*>(b) + 257, 5) == "ustar";
    if (gz || bz || xz || zst || tar)
      fail("ADD would unpack the archive " + rel + ": archive extraction is not supported (COPY it and unpack it in a RUN)");
  }

  void digest() {
    image::Sha256 h;
    auto field = [&](const std::string& s) {
      h.update(std::to_string(s.size()) + ":");
      h.update(s);
    };
    for (const auto& d : out_.dest_dirs) field("dir " + d);
    for (const auto& e : out_.entries) {
      field(std::to_string(static_cast<int>(e.type)) + " " + std::to_string(e.mode) + " " + std::to_string(e.size));
      field(e.dest);
      field(e.sha256);
      field(e.target);
    }
    field(out_.dest_may_be_dir ? "maybe-dir " + out_.file_name : "");
    out_.digest = image::to_hex(h.finish());
  }

  const std::string& root_;
  const Step& step_;
  const std::string& recipe_;
  CopyInputs out_;
  uint64_t total_ = 0;
};

}  // namespace

std::string open_context(const std::string& dir) {
  char buf[PATH_MAX];
  if (dir.empty() || !::realpath(dir.c_str(), buf))
    throw Error(Code::kInvalidArgument, "build context '" + dir + "': " + std::strerror(errno), errno);
  struct stat st;
  if (::stat(buf, &st) != 0 || !S_ISDIR(st.st_mode))
    throw Error(Code::kInvalidArgument, "build context '" + dir + "' is not a directory");
  return buf;
}

CopyInputs collect_copy(const std::string& root, const Step& step, const std::string& recipe) {
  return Collector(root, step, recipe).run();
}

}  // namespace sandlet::build
