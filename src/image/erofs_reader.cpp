#include "image/erofs_reader.hpp"

#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <set>
#include <string_view>
#include <unordered_map>

#include "common/error.hpp"
#include "image/blob_builder.hpp"
#include "image/erofs_format.hpp"

namespace sandlet::image {

namespace {

using namespace erofs;

constexpr uint64_t kInodeAreaStart = kSuperOffset + sizeof(SuperBlock);  // where the writer's device table goes
constexpr uint32_t kMaxSymlink = 4095;                                    // PATH_MAX - 1, as the importers allow

[[noreturn]] void corrupt(const std::string& where, const std::string& why) {
  throw Error(Code::kDataLoss, "layer metadata " + where + ": " + why);
}

uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

bool all_zero(const void* p, size_t n) {
  const auto* b = static_cast<const uint8_t*>(p);
  return std::all_of(b, b + n, [](uint8_t c) { return c == 0; });
}

std::string nid_name(uint64_t nid) { return "inode at nid " + std::to_string(nid); }

// A directory whose entries are still to be read (breadth first, as the writer lays them out).
struct DirJob {
  uint64_t nid;
  uint32_t index;       // in the tree
  uint64_t parent_nid;  // what ".." must name
  uint32_t depth;
  uint64_t path_len;    // of its path from the root ("" for the root)
  uint64_t data_off;
  uint64_t data_len;
};

class Reader final {
 public:
  explicit Reader(const std::string& img)
      : img_(img), budget_(img.size()), path_budget_(kErofsPathBytesSlack + 4 * uint64_t{img.size()}) {}

  FsTree read(std::vector<ErofsDevice>* devices_out) {
    uint64_t root_nid = superblock();
    DirJob root{};
    if (read_inode(root_nid, &root, FsTree::kRoot) != FsTree::kRoot || !tree_.at(FsTree::kRoot).is_dir()) {
      corrupt("superblock", "the root is not a directory");
    }
    root.parent_nid = root_nid;
    refs_[FsTree::kRoot] = 2;
    std::deque<DirJob> queue{root};
    while (!queue.empty()) {
      DirJob job = queue.front();
      queue.pop_front();
      read_dir(job, &queue);
    }
    if (inos_ != tree_.inode_count()) {
      corrupt("superblock", "it counts " + std::to_string(inos_) + " inodes, the tree has " +
                                std::to_string(tree_.inode_count()));
    }
    for (size_t i = 0; i < tree_.inode_count(); ++i) {
      if (nlink_[i] != refs_[i]) {
        corrupt(nid_name(nid_of_[i]), "link count " + std::to_string(nlink_[i]) + ", but " +
                                          std::to_string(refs_[i]) + " by the directories");
      }
    }
    // The writer lists exactly the blobs that chunks point into.
    for (size_t d = 0; d < devices_.size(); ++d) {
      if (!device_used_[d]) corrupt("device table", "device " + std::to_string(d + 1) + " is referenced by no chunk");
    }
    tree_.blobs.clear();
    for (const auto& d : devices_) tree_.blobs.push_back(d.tag);
    if (devices_out) *devices_out = devices_;
    return std::move(tree_);
  }

 private:
  const char* bytes(uint64_t off, uint64_t len, const std::string& where, const char* what) const {
    if (off > img_.size() || len > img_.size() - off) corrupt(where, std::string(what) + " extends beyond the image");
    return img_.data() + off;
  }
  template <typename T>
  T get(uint64_t off, const std::string& where, const char* what) const {
    T v;
    std::memcpy(&v, bytes(off, sizeof v, where, what), sizeof v);
    return v;
  }
  // Regions a valid image stores once (inodes, xattrs, chunk tables, payloads): a hostile image that makes
  // them overlap to multiply what the tree holds runs out of this.
  void take(uint64_t n, const std::string& where) {
    if (n > budget_) corrupt(where, "its regions overlap others (more metadata than the image holds)");
    budget_ -= n;
  }

  uint64_t superblock() {
    if (img_.size() < kInodeAreaStart || img_.size() % kBlockSize != 0) {
      corrupt("image", "size " + std::to_string(img_.size()) + " is not a whole number of 4 KiB blocks");
    }
    auto sb = get<SuperBlock>(kSuperOffset, "superblock", "it");
    if (sb.magic != kMagic) corrupt("superblock", "no EROFS magic");
    if (sb.blkszbits != kBlockBits) corrupt("superblock", "block size is not 4 KiB");
    if (uint64_t{sb.blocks} * kBlockSize != img_.size()) {
      corrupt("superblock", "it says " + std::to_string(sb.blocks) + " blocks, the image has " +
                                std::to_string(img_.size() / kBlockSize) + " (truncated?)");
    }
    // Features and fields the writer leaves unset: each would change how the kernel reads the image.
    if (sb.feature_compat != 0 || sb.checksum != 0 || sb.sb_extslots != 0 || sb.meta_blkaddr != 0 ||
        sb.xattr_blkaddr != 0 || sb.available_compr_algs != 0 || sb.dirblkbits != 0 || sb.xattr_prefix_count != 0 ||
        sb.xattr_prefix_start != 0 || sb.packed_nid != 0 || sb.xattr_filter_reserved != 0 ||
        !all_zero(sb.reserved2, sizeof sb.reserved2)) {
      corrupt("superblock", "a feature or field sandlet's writer does not use is set");
    }
    if (sb.feature_incompat & ~(kIncompatChunkedFile | kIncompatDeviceTable)) {
      corrupt("superblock", "unsupported incompatible features 0x" + std::to_string(sb.feature_incompat));
    }
    bool has_table = (sb.feature_incompat & kIncompatDeviceTable) != 0;
    if (has_table != (sb.extra_devices > 0)) corrupt("superblock", "device table flag and device count disagree");
    if (sb.extra_devices > 4096) corrupt("superblock", "more than 4096 devices");
    if (sb.inos > kErofsMaxInodes || sb.inos > img_.size() / sizeof(InodeExtended)) {
      corrupt("superblock", "inode count " + std::to_string(sb.inos) + " is too large");
    }
    inos_ = sb.inos;
    if (has_table && sb.devt_slotoff * sizeof(DeviceSlot) != kInodeAreaStart) {
      corrupt("superblock", "the device table is not where the writer puts it");
    }
    for (uint32_t d = 0; d < sb.extra_devices; ++d) {
      std::string where = "device " + std::to_string(d + 1);
      auto slot = get<DeviceSlot>(kInodeAreaStart + d * sizeof(DeviceSlot), where, "its slot");
      std::string tag(reinterpret_cast<const char*>(slot.tag), sizeof slot.tag);
      if (!std::all_of(tag.begin(), tag.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); })) {
        corrupt(where, "its tag is not a sha256 in hex");
      }
      if (slot.mapped_blkaddr != 0 || !all_zero(slot.reserved, sizeof slot.reserved)) {
        corrupt(where, "mapped address or reserved bytes set");
      }
      for (const auto& prev : devices_) {
        if (prev.tag == tag) corrupt(where, "blob " + tag + " is listed twice");
      }
      devices_.push_back({tag, slot.blocks});
    }
    device_used_.assign(devices_.size(), false);
    inode_area_ = align_up(kInodeAreaStart + devices_.size() * sizeof(DeviceSlot), kInodeSlot);
    return sb.root_nid;
  }

  // The inline xattr area of the inode at `pos` (`size` bytes from pos + 64) into `n`.
  void read_xattrs(uint64_t pos, uint64_t size, Inode& n, const std::string& where) {
    uint64_t at = pos + sizeof(InodeExtended);
    auto h = get<XattrIbodyHeader>(at, where, "xattr header");
    if (h.h_shared_count != 0 || h.h_name_filter != 0 || !all_zero(h.h_reserved2, sizeof h.h_reserved2)) {
      corrupt(where, "shared xattrs or a name filter (sandlet writes neither)");
    }
    const char* p = bytes(at, size, where, "xattr area");
    std::set<std::string> names;  // owned: views into n.xattrs would dangle when it grows
    for (uint64_t off = sizeof h; off < size;) {
      if (size - off < sizeof(XattrEntry)) corrupt(where, "a partial xattr entry");
      XattrEntry e;
      std::memcpy(&e, p + off, sizeof e);
      uint64_t entry = align_up(sizeof e + e.e_name_len + uint64_t{e.e_value_size}, 4);
      if (entry > size - off) corrupt(where, "an xattr entry extends beyond the xattr area");
      const char* prefix = nullptr;
      bool whole = false;  // the ACL indexes name the whole xattr
      switch (e.e_name_index) {
        case kXUser: prefix = "user."; break;
        case kXTrusted: prefix = "trusted."; break;
        case kXSecurity: prefix = "security."; break;
        case kXPosixAclAccess: prefix = "system.posix_acl_access"; whole = true; break;
        case kXPosixAclDefault: prefix = "system.posix_acl_default"; whole = true; break;
        default: corrupt(where, "xattr prefix index " + std::to_string(e.e_name_index) + " is not one sandlet writes");
      }
      std::string_view suffix(p + off + sizeof e, e.e_name_len);
      if (whole ? !suffix.empty() : suffix.empty()) corrupt(where, "an xattr name does not fit its prefix");
      if (suffix.find('\0') != std::string_view::npos) corrupt(where, "an xattr name holds a NUL byte");
      uint64_t used = sizeof e + e.e_name_len + uint64_t{e.e_value_size};
      if (!all_zero(p + off + used, entry - used)) corrupt(where, "xattr padding is not zero");
      n.xattrs.emplace_back(prefix + std::string(suffix),
                            std::string(p + off + sizeof e + e.e_name_len, e.e_value_size));
      if (!names.insert(n.xattrs.back().first).second) corrupt(where, "xattr '" + n.xattrs.back().first + "' twice");
      off += entry;
    }
  }

  // Inline or flat-plain data of `size` bytes; `data_at` is where inline data would start.
  std::string_view payload(uint16_t layout, uint32_t i_u, uint64_t size, uint64_t pos, uint64_t data_at,
                           const std::string& where) {
    if (layout == kLayoutFlatInline) {
      // The kernel reads inline data from the inode's own block: it must fit there.
      if (size == 0 || size >= kBlockSize || i_u != 0) corrupt(where, "bad inline data size or address");
      if (data_at - pos / kBlockSize * kBlockSize + size > kBlockSize) corrupt(where, "inline data crosses a block");
      take(size, where);
      return {bytes(data_at, size, where, "inline data"), size};
    }
    if (layout != kLayoutFlatPlain) corrupt(where, "data layout does not fit the file type");
    if (size == 0) {
      if (i_u != 0) corrupt(where, "an empty inode with a block address");
      return {};
    }
    take(size, where);
    return {bytes(uint64_t{i_u} * kBlockSize, size, where, "data"), size};
  }

  void read_chunks(const InodeExtended& ino, uint64_t data_at, Inode& n, const std::string& where) {
    const uint16_t bits = __builtin_ctz(kChunkSize) - kBlockBits;
    if (ino.i_u != (kChunkFormatIndexes | bits)) corrupt(where, "chunk format is not 64 KiB chunks with indexes");
    if (ino.i_size == 0) corrupt(where, "a chunked file of size 0");
    uint64_t count = (ino.i_size - 1) / kChunkSize + 1;
    uint64_t at = align_up(data_at, sizeof(ChunkIndex));
    if (count > img_.size() / sizeof(ChunkIndex)) corrupt(where, "chunk table extends beyond the image");
    take(count * sizeof(ChunkIndex), where);
    const char* p = bytes(at, count * sizeof(ChunkIndex), where, "chunk table");
    n.chunks.reserve(count);
    for (uint64_t i = 0; i < count; ++i) {
      ChunkIndex ci;
      std::memcpy(&ci, p + i * sizeof ci, sizeof ci);
      if (ci.advise != 0) corrupt(where, "chunk " + std::to_string(i) + " has advise bits");
      if (ci.blkaddr == kNullAddr) {
        if (ci.device_id != 0) corrupt(where, "hole " + std::to_string(i) + " names a device");
        n.chunks.push_back(ChunkRef{});
        continue;
      }
      if (ci.device_id == 0 || ci.device_id > devices_.size()) {
        corrupt(where, "chunk " + std::to_string(i) + " names device " + std::to_string(ci.device_id) +
                           " of " + std::to_string(devices_.size()));
      }
      uint64_t len = std::min<uint64_t>(kChunkSize, ino.i_size - i * kChunkSize);
      if (uint64_t{ci.blkaddr} + (len + kBlockSize - 1) / kBlockSize > devices_[ci.device_id - 1].blocks) {
        corrupt(where, "chunk " + std::to_string(i) + " lies beyond the end of its blob");
      }
      device_used_[ci.device_id - 1] = true;
      n.chunks.push_back(ChunkRef{static_cast<uint32_t>(ci.device_id - 1), ci.blkaddr});
    }
  }

  // Parses the inode `nid` into the tree (at `index` for the root, else a new one); returns its index. For a
  // directory, `dir` receives where its entries are.
  uint32_t read_inode(uint64_t nid, DirJob* dir, int64_t index = -1) {
    std::string where = nid_name(nid);
    if (nid > img_.size() / kInodeSlot || nid * kInodeSlot < inode_area_) corrupt(where, "outside the inode area");
    if (tree_.inode_count() >= kErofsMaxInodes) corrupt(where, "too many inodes");
    uint64_t pos = nid * kInodeSlot;
    auto ino = get<InodeExtended>(pos, where, "inode");
    if (!(ino.i_format & kInodeExtended)) corrupt(where, "a compact inode (sandlet writes extended ones)");
    if ((ino.i_format & ~0xF) != 0 || ino.i_reserved != 0 || !all_zero(ino.i_reserved2, sizeof ino.i_reserved2)) {
      corrupt(where, "unknown format bits or reserved fields set");
    }
    auto layout = static_cast<uint16_t>(ino.i_format >> 1);
    uint64_t xsize = ino.i_xattr_icount ? sizeof(XattrIbodyHeader) + (ino.i_xattr_icount - 1) * 4u : 0;
    bytes(pos, sizeof ino + xsize, where, "inode with its xattrs");
    take(sizeof ino + xsize, where);
    Inode n;
    n.mode = ino.i_mode;
    n.uid = ino.i_uid;
    n.gid = ino.i_gid;
    n.mtime_sec = static_cast<int64_t>(ino.i_mtime);
    n.mtime_nsec = ino.i_mtime_nsec;
    if (xsize) read_xattrs(pos, xsize, n, where);
    uint64_t data_at = pos + sizeof ino + xsize;
    switch (n.mode & S_IFMT) {
      case S_IFREG:
        n.size = ino.i_size;
        if (layout == kLayoutChunkBased) {
          read_chunks(ino, data_at, n, where);
        } else {
          n.inline_data = std::string(payload(layout, ino.i_u, ino.i_size, pos, data_at, where));
        }
        break;
      case S_IFLNK:
        if (ino.i_size > kMaxSymlink) corrupt(where, "symlink target longer than 4095 bytes");
        n.inline_data = std::string(payload(layout, ino.i_u, ino.i_size, pos, data_at, where));
        break;
      case S_IFDIR: {
        if (ino.i_size > kErofsMaxDirBytes) corrupt(where, "directory larger than 256 MiB");
        auto data = payload(layout, ino.i_u, ino.i_size, pos, data_at, where);
        if (data.empty()) corrupt(where, "a directory without entries");
        dir->nid = nid;
        dir->data_off = static_cast<uint64_t>(data.data() - img_.data());
        dir->data_len = data.size();
        break;
      }
      case S_IFCHR:
      case S_IFBLK:
        if (layout != kLayoutFlatPlain || ino.i_size != 0) corrupt(where, "a device with data");
        // The kernel's new_decode_dev (the writer encodes with new_encode_dev).
        n.rdev = makedev((ino.i_u & 0xfff00) >> 8, (ino.i_u & 0xff) | ((ino.i_u >> 12) & 0xfff00));
        break;
      case S_IFIFO:
      case S_IFSOCK:
        if (layout != kLayoutFlatPlain || ino.i_size != 0 || ino.i_u != 0) corrupt(where, "a fifo or socket with data");
        break;
      default:
        corrupt(where, "unknown file type in mode 0" + std::to_string(n.mode));
    }
    uint32_t idx;
    if (index >= 0) {
      idx = static_cast<uint32_t>(index);
      tree_.at(idx) = std::move(n);
    } else {
      idx = tree_.add_inode(std::move(n));
    }
    by_nid_.emplace(nid, idx);
    nid_of_.resize(tree_.inode_count());
    nlink_.resize(tree_.inode_count());
    refs_.resize(tree_.inode_count());
    nid_of_[idx] = nid;
    nlink_[idx] = ino.i_nlink;
    return idx;
  }

  // One directory's entries: blocks of dirents then names, sorted by name across the whole directory.
  void read_dir(const DirJob& job, std::deque<DirJob>* queue) {
    std::string where = nid_name(job.nid) + " (directory)";
    const char* data = img_.data() + job.data_off;
    std::string prev;
    bool first = true, dot = false, dotdot = false;
    for (uint64_t blk = 0; blk < job.data_len; blk += kBlockSize) {
      const char* b = data + blk;
      auto maxsize = static_cast<uint32_t>(std::min<uint64_t>(kBlockSize, job.data_len - blk));
      if (maxsize < sizeof(Dirent)) corrupt(where, "a block too short for an entry");
      Dirent d0;
      std::memcpy(&d0, b, sizeof d0);
      if (d0.nameoff < sizeof(Dirent) || d0.nameoff % sizeof(Dirent) != 0 || d0.nameoff >= maxsize) {
        corrupt(where, "bad first name offset " + std::to_string(d0.nameoff));
      }
      uint32_t count = d0.nameoff / sizeof(Dirent);
      for (uint32_t i = 0; i < count; ++i) {
        Dirent d;
        std::memcpy(&d, b + i * sizeof d, sizeof d);
        uint32_t end = maxsize;  // the last name runs to the block's end (or a NUL)
        if (i + 1 < count) {
          Dirent next;
          std::memcpy(&next, b + (i + 1) * sizeof next, sizeof next);
          end = next.nameoff;
        }
        if (d.nameoff < d0.nameoff || end <= d.nameoff || end > maxsize || d.reserved != 0) {
          corrupt(where, "bad name offsets or reserved byte");
        }
        size_t len = end - d.nameoff;
        if (i + 1 == count) {  // the last name ends at a NUL or at the block's end
          len = strnlen(b + d.nameoff, len);
          if (!all_zero(b + d.nameoff + len, end - d.nameoff - len)) corrupt(where, "bytes after the last name");
        }
        std::string name(b + d.nameoff, len);
        if (name.empty() || name.size() > 255 || name.find('\0') != std::string::npos ||
            name.find('/') != std::string::npos) {
          corrupt(where, "a bad entry name");
        }
        if (!first && !(prev < name)) corrupt(where, "entries out of order or repeated at '" + name + "'");
        first = false;
        entry(job, name, d, &dot, &dotdot, queue, where);
        prev = std::move(name);
      }
    }
    if (!dot || !dotdot) corrupt(where, "no '.' or '..' entry");
  }

  void entry(const DirJob& job, const std::string& name, const Dirent& d, bool* dot, bool* dotdot,
             std::deque<DirJob>* queue, const std::string& where) {
    if (name == "." || name == "..") {
      uint64_t want = name == "." ? job.nid : job.parent_nid;
      if (d.nid != want || d.file_type != kFtDir) corrupt(where, "'" + name + "' names another inode");
      *(name == "." ? dot : dotdot) = true;
      return;
    }
    uint64_t path_len = job.path_len + (job.path_len ? 1 : 0) + name.size();
    if (path_len > path_budget_) corrupt(where, "paths longer in total than the image allows");
    path_budget_ -= path_len;
    uint32_t idx;
    if (auto it = by_nid_.find(d.nid); it != by_nid_.end()) {
      idx = it->second;
      // A directory reached twice is a loop or a directory hard link: the writer makes neither.
      if (tree_.at(idx).is_dir()) corrupt(where, "entry '" + name + "' links a directory seen before");
      ++refs_[idx];
    } else {
      DirJob child{};
      idx = read_inode(d.nid, &child);
      if (tree_.at(idx).is_dir()) {
        if (job.depth + 1 > kErofsMaxDepth) corrupt(where, "directories nested deeper than 1024");
        child.index = idx;
        child.parent_nid = job.nid;
        child.depth = job.depth + 1;
        child.path_len = path_len;
        refs_[idx] = 2;
        ++refs_[job.index];
        queue->push_back(child);
      } else {
        refs_[idx] = 1;
      }
    }
    if (d.file_type != file_type_of(tree_.at(idx).mode)) corrupt(where, "entry '" + name + "' has the wrong type");
    tree_.at(job.index).children.emplace(name, idx);
  }

  const std::string& img_;
  FsTree tree_;
  std::vector<ErofsDevice> devices_;
  std::vector<bool> device_used_;
  uint64_t inode_area_ = 0;
  uint64_t inos_ = 0;
  uint64_t budget_;
  uint64_t path_budget_;
  std::unordered_map<uint64_t, uint32_t> by_nid_;
  std::vector<uint64_t> nid_of_;  // per tree index
  std::vector<uint32_t> nlink_;   // as the inode says
  std::vector<uint32_t> refs_;    // as the directories say (2 + subdirectories for a directory)
};

}  // namespace

FsTree read_erofs_image(const std::string& image_bytes, std::vector<ErofsDevice>* devices) {
  return Reader(image_bytes).read(devices);
}

FsTree read_erofs_tree(const std::string& image_bytes, std::vector<std::string>* device_tags) {
  std::vector<ErofsDevice> devices;
  FsTree tree = read_erofs_image(image_bytes, &devices);
  if (device_tags) {
    device_tags->clear();
    for (auto& d : devices) device_tags->push_back(std::move(d.tag));
  }
  return tree;
}

}  // namespace sandlet::image
