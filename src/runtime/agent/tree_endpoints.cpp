#include "runtime/agent/tree_endpoints.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <ctime>
#include <cstring>
#include <deque>
#include <set>

#include "common/error.hpp"
#include "image/byte_reader.hpp"
#include "image/byte_writer.hpp"
#include "image/tar_reader.hpp"
#include "image/tar_writer.hpp"
#include "tree/tree_apply.hpp"
#include "tree/tree_walk.hpp"

namespace sandlet {
namespace {

[[noreturn]] void throw_tree(const tree::TreeStatus& st) {
  throw Error(static_cast<Code>(st.code), st.message, st.err_no);
}

class HostDirSource final : public TreeSource {
 public:
  HostDirSource(const std::string& path, const HostTreeOptions& o) {
    tree::WalkOptions w;
    w.follow_root = o.follow_root;
    if (tree::TreeStatus st = walker_.open(path, w); !st.ok()) throw_tree(st);
  }
  bool next(proto::TreeEntry* out) override {
    tree::TreeStatus st;
    if (walker_.next(out, &st)) return true;
    if (!st.ok()) throw_tree(st);
    return false;
  }
  size_t read(char* buf, size_t n) override {
    tree::TreeStatus st;
    const long got = walker_.read(buf, n, &st);
    if (got < 0) throw_tree(st);
    return static_cast<size_t>(got);
  }
  uint64_t skipped() const override { return walker_.skipped(); }

 private:
  tree::TreeWalker walker_;
};

class HostDirSink final : public TreeSink {
 public:
  HostDirSink(const std::string& path, const HostTreeOptions& o) {
    tree::ApplyOptions a;
    a.strict = true;
    a.keep_owners = o.keep_owners;
    a.outside_links = o.outside_links;
    a.chown = false;
    a.mkdir_parents = true;
    if (tree::TreeStatus st = applier_.begin(path, a); !st.ok()) throw_tree(st);
  }
  void entry(const proto::TreeEntry& e) override { check(applier_.entry(e)); }
  void data(const char* p, size_t n) override { check(applier_.data(p, n)); }
  void finish() override { check(applier_.finish()); }
  uint64_t skipped() const override { return applier_.skipped(); }

 private:
  void check(const tree::TreeStatus& st) {
    if (st.ok()) return;
    applier_.abort();
    throw_tree(st);
  }
  tree::TreeApplier applier_;
};

proto::TreeEntry implicit_dir(const std::string& rel) {
  proto::TreeEntry e;
  e.kind = proto::TreeKind::kDir;
  e.path = rel;
  e.mode = 0755;
  e.mtime_sec = ::time(nullptr);
  return e;
}

class TarSource final : public TreeSource {
 public:
  TarSource(int fd, std::string name) : name_(std::move(name)) {
    const int copy = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
    if (copy < 0) throw Error(Code::kInternal, name_ + ": " + std::strerror(errno), errno);
    in_ = image::open_decompressing_fd(sys::UniqueFd(copy), name_, image::Compression::kAuto, nullptr);
    reader_ = std::make_unique<image::TarReader>(*in_, name_);
  }
  bool next(proto::TreeEntry* out) override {
    while (pending_.empty()) {
      image::TarEntry t;
      if (!reader_->next(t)) return false;
      add(t);
    }
    *out = std::move(pending_.front());
    pending_.pop_front();
    return true;
  }
  size_t read(char* buf, size_t n) override { return reader_->read_data(buf, n); }
  uint64_t skipped() const override { return skipped_; }

 private:
  void add(const image::TarEntry& t) {
    using T = image::TarEntry::Type;
    proto::TreeEntry e;
    switch (t.type) {
      case T::kFile: e.kind = proto::TreeKind::kFile; break;
      case T::kDir: e.kind = proto::TreeKind::kDir; break;
      case T::kSymlink: e.kind = proto::TreeKind::kSymlink; break;
      case T::kHardlink: e.kind = proto::TreeKind::kHardlink; break;
      case T::kFifo: e.kind = proto::TreeKind::kFifo; break;
      default: ++skipped_; return;  // device nodes and sockets
    }
    if (const char* why = proto::tree_path_problem(t.path, true))
      throw Error(Code::kInvalidArgument, name_ + ": member \"" + t.path + "\": its path " + why);
    e.path = t.path;
    e.mode = t.mode & 07777;
    e.uid = t.uid;
    e.gid = t.gid;
    e.mtime_sec = t.mtime_sec;
    e.mtime_nsec = t.mtime_nsec;
    e.size = e.kind == proto::TreeKind::kFile ? t.size : 0;
    e.link = t.link_target;
    if (e.kind == proto::TreeKind::kSymlink && e.link.empty())
      throw Error(Code::kInvalidArgument, name_ + ": member \"" + t.path + "\": a symlink without a target");
    if (e.path.empty()) {
      if (e.kind != proto::TreeKind::kDir)
        throw Error(Code::kInvalidArgument, name_ + ": the archive's root member is not a directory");
      if (root_done_) return;  // a repeated "./"
      root_done_ = true;
      pending_.push_back(std::move(e));
      return;
    }
    if (!root_done_) {
      root_done_ = true;
      pending_.push_back(implicit_dir(""));
    }
    if (e.kind == proto::TreeKind::kHardlink && !files_.count(e.link))
      throw Error(Code::kInvalidArgument, name_ + ": member \"" + t.path + "\": a hard link to \"" + e.link +
                                              "\", which is not an earlier file of the archive");
    for (size_t slash = e.path.find('/'); slash != std::string::npos; slash = e.path.find('/', slash + 1)) {
      std::string parent = e.path.substr(0, slash);
      if (dirs_.insert(parent).second) pending_.push_back(implicit_dir(parent));
    }
    if (e.kind == proto::TreeKind::kDir && !dirs_.insert(e.path).second) return;  // made already (implicitly)
    if (e.kind == proto::TreeKind::kFile) files_.insert(e.path);
    pending_.push_back(std::move(e));
  }

  std::string name_;
  std::unique_ptr<image::ByteReader> in_;
  std::unique_ptr<image::TarReader> reader_;
  std::deque<proto::TreeEntry> pending_;
  std::set<std::string> dirs_, files_;
  bool root_done_ = false;
  uint64_t skipped_ = 0;
};

class TarSink final : public TreeSink {
 public:
  TarSink(int fd, std::string name, std::string top)
      : out_(image::open_writer_fd(fd, name, 0)), writer_(*out_, name), top_(std::move(top)) {}
  void entry(const proto::TreeEntry& e) override {
    image::TarMember m;
    m.path = under_top(e.path);
    switch (e.kind) {
      case proto::TreeKind::kFile: m.type = '0'; break;
      case proto::TreeKind::kHardlink: m.type = '1'; m.link = under_top(e.link); break;
      case proto::TreeKind::kSymlink: m.type = '2'; m.link = e.link; break;
      case proto::TreeKind::kDir: m.type = '5'; break;
      case proto::TreeKind::kFifo: m.type = '6'; break;
    }
    m.mode = e.mode;
    m.uid = e.uid;
    m.gid = e.gid;
    m.mtime_sec = e.mtime_sec;
    m.mtime_nsec = e.mtime_nsec;
    m.size = e.size;
    writer_.begin(m);
  }
  void data(const char* p, size_t n) override { writer_.data(p, n); }
  void finish() override {
    writer_.finish();
    out_->finish();
  }

 private:
  std::string under_top(const std::string& rel) const {
    if (top_.empty()) return rel;
    return rel.empty() ? top_ : top_ + "/" + rel;
  }
  std::unique_ptr<image::ByteWriter> out_;
  image::TarWriter writer_;
  std::string top_;
};

}  // namespace

std::unique_ptr<TreeSource> host_dir_source(const std::string& path, const HostTreeOptions& options) {
  return std::make_unique<HostDirSource>(path, options);
}
std::unique_ptr<TreeSink> host_dir_sink(const std::string& path, const HostTreeOptions& options) {
  return std::make_unique<HostDirSink>(path, options);
}
std::unique_ptr<TreeSource> tar_source(int fd, std::string name_for_errors) {
  return std::make_unique<TarSource>(fd, std::move(name_for_errors));
}
std::unique_ptr<TreeSink> tar_sink(int fd, std::string name_for_errors, std::string top) {
  return std::make_unique<TarSink>(fd, std::move(name_for_errors), std::move(top));
}

}  // namespace sandlet
