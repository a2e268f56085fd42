// Tar import: entries applied in archive order onto the tree; OCI whiteouts optionally converted to the
// overlay form the layer stack understands.
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <cstring>

#include "common/error.hpp"
#include "image/byte_reader.hpp"
#include "image/importers.hpp"
#include "image/tar_reader.hpp"

namespace sandlet::image {

namespace {

constexpr const char* kWhiteoutPrefix = ".wh.";
constexpr const char* kOpaqueMarker = ".wh..wh..opq";

mode_t type_bits(TarEntry::Type t) {
  switch (t) {
    case TarEntry::Type::kFile: return S_IFREG;
    case TarEntry::Type::kSymlink: return S_IFLNK;
    case TarEntry::Type::kCharDev: return S_IFCHR;
    case TarEntry::Type::kBlockDev: return S_IFBLK;
    case TarEntry::Type::kDir: return S_IFDIR;
    case TarEntry::Type::kFifo: return S_IFIFO;
    case TarEntry::Type::kSocket: return S_IFSOCK;
    case TarEntry::Type::kHardlink: break;
  }
  return 0;
}

std::string leaf_of(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string dir_of(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? "" : path.substr(0, slash);
}

std::string join(const std::string& dir, const std::string& leaf) { return dir.empty() ? leaf : dir + "/" + leaf; }

}  // namespace

void import_tar(ByteReader& in, const std::string& name, FsTree& tree, BlobBuilder& blobs, bool oci_whiteouts,
                const ProgressFn& progress, uint64_t total_bytes, bool* ended_with_marker) {
  TarReader tar(in, name);
  TarEntry e;
  ImportProgress p;
  p.total_bytes = total_bytes;
  while (tar.next(e)) {
    const std::string where = name + ": member '" + e.path + "'";
    ++p.files;
    if (progress && p.files % 256 == 0) {
      p.bytes = in.input_bytes();
      progress(p);
    }
    std::string leaf = leaf_of(e.path);
    if (oci_whiteouts && leaf.rfind(kWhiteoutPrefix, 0) == 0) {
      std::string dir = dir_of(e.path);
      if (leaf == kOpaqueMarker) {
        // Everything below this directory in lower layers is hidden; entries of this layer stay.
        int64_t d = tree.lookup(dir);
        uint32_t di;
        if (d < 0) {
          Inode n;
          n.mode = S_IFDIR | 0755;
          di = tree.add_inode(std::move(n));
          tree.link(dir, di);  // creates missing parents
        } else {
          di = static_cast<uint32_t>(d);
        }
        if (!tree.at(di).is_dir()) throw Error(Code::kInvalidArgument, where + ": opaque marker in a non-directory");
        tree.at(di).set_xattr("trusted.overlay.opaque", "y");
        continue;
      }
      std::string hidden = leaf.substr(std::strlen(kWhiteoutPrefix));
      if (hidden.empty() || hidden == "." || hidden == "..") {
        throw Error(Code::kInvalidArgument, where + ": malformed whiteout");
      }
      Inode wh;
      wh.mode = S_IFCHR;  // an overlay whiteout: a 0/0 character device, mode 0 like the kernel makes
      wh.mtime_sec = e.mtime_sec;
      tree.link(join(dir, hidden), tree.add_inode(std::move(wh)));
      continue;
    }
    if (e.path.empty()) {  // the archive's "./": metadata of the root
      Inode& root = tree.at(FsTree::kRoot);
      if (e.type != TarEntry::Type::kDir) throw Error(Code::kInvalidArgument, where + ": root is not a directory");
      root.mode = S_IFDIR | (e.mode & 07777);
      root.uid = e.uid, root.gid = e.gid;
      root.mtime_sec = e.mtime_sec, root.mtime_nsec = e.mtime_nsec;
      root.xattrs = e.xattrs;
      continue;
    }
    if (e.type == TarEntry::Type::kHardlink) {
      int64_t target = tree.lookup(e.link_target);
      if (target < 0 || tree.at(static_cast<uint32_t>(target)).is_dir()) {
        throw Error(Code::kInvalidArgument, where + ": hard link to '" + e.link_target +
                                                "', which is not an earlier non-directory member");
      }
      tree.link(e.path, static_cast<uint32_t>(target));
      continue;
    }
    // A directory that already exists keeps its children and takes the new metadata.
    if (e.type == TarEntry::Type::kDir) {
      int64_t existing = tree.lookup(e.path);
      if (existing >= 0 && tree.at(static_cast<uint32_t>(existing)).is_dir()) {
        Inode& d = tree.at(static_cast<uint32_t>(existing));
        d.mode = S_IFDIR | (e.mode & 07777);
        d.uid = e.uid, d.gid = e.gid;
        d.mtime_sec = e.mtime_sec, d.mtime_nsec = e.mtime_nsec;
        d.xattrs = e.xattrs;
        continue;
      }
    }
    Inode n;
    n.mode = type_bits(e.type) | (e.mode & 07777);
    n.uid = e.uid, n.gid = e.gid;
    n.mtime_sec = e.mtime_sec, n.mtime_nsec = e.mtime_nsec;
    n.xattrs = e.xattrs;
    if (e.type == TarEntry::Type::kCharDev || e.type == TarEntry::Type::kBlockDev) {
      n.rdev = makedev(e.dev_major, e.dev_minor);
    } else if (e.type == TarEntry::Type::kSymlink) {
      if (e.link_target.empty() || e.link_target.size() > 4095) {
        throw Error(Code::kInvalidArgument, where + ": symlink target empty or longer than 4095 bytes");
      }
      n.inline_data = e.link_target;
    } else if (e.type == TarEntry::Type::kFile) {
      blobs.add_stream(n, e.size, [&](void* buf, size_t len) { return tar.read_data(buf, len); }, where);
    }
    tree.link(e.path, tree.add_inode(std::move(n)));
  }
  if (ended_with_marker) *ended_with_marker = tar.ended_with_marker();
  if (progress) {
    p.bytes = in.input_bytes();
    progress(p);
  }
}

}  // namespace sandlet::image
