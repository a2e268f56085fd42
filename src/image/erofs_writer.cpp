#include "image/erofs_writer.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <deque>

#include "common/error.hpp"
#include "image/blob_builder.hpp"
#include "image/erofs_format.hpp"
#include "sys/fd.hpp"

namespace sandlet::image {

namespace {

using namespace erofs;

uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

// The inline xattr area: header, then entries (prefix index, suffix, value) each padded to 4 bytes.
std::string serialize_xattrs(const Inode& n, const std::string& where) {
  if (n.xattrs.empty()) return {};
  static const struct {
    const char* prefix;
    uint8_t index;
    bool whole;  // the name is exactly the prefix (ACLs)
  } kPrefixes[] = {{"user.", kXUser, false},
                   {"trusted.", kXTrusted, false},
                   {"security.", kXSecurity, false},
                   {"system.posix_acl_access", kXPosixAclAccess, true},
                   {"system.posix_acl_default", kXPosixAclDefault, true}};
  std::string out(sizeof(XattrIbodyHeader), '\0');
  for (const auto& [name, value] : n.xattrs) {
    const auto* match = std::find_if(std::begin(kPrefixes), std::end(kPrefixes), [&](const auto& p) {
      return p.whole ? name == p.prefix : name.rfind(p.prefix, 0) == 0 && name.size() > std::strlen(p.prefix);
    });
    if (match == std::end(kPrefixes)) {
      throw Error(Code::kUnimplemented, where + ": xattr '" + name + "' has a namespace EROFS cannot store");
    }
    std::string suffix = match->whole ? "" : name.substr(std::strlen(match->prefix));
    if (suffix.size() > 255 || value.size() > 65535) {
      throw Error(Code::kInvalidArgument, where + ": xattr '" + name + "' is too large");
    }
    XattrEntry e{static_cast<uint8_t>(suffix.size()), match->index, static_cast<uint16_t>(value.size())};
    out.append(reinterpret_cast<const char*>(&e), sizeof e);
    out += suffix;
    out += value;
    out.resize(align_up(out.size(), 4), '\0');
  }
  return out;
}

struct Layout {
  uint32_t index = 0;      // into the tree
  uint32_t parent = 0;     // tree index of the parent directory (dirs)
  uint32_t ino = 0;
  uint32_t nlink = 0;
  uint64_t pos = 0;        // byte offset of the inode; nid = pos / 32
  std::string xattrs;
  uint64_t payload_size = 0;  // directories, symlinks and inline files: bytes of data
  uint16_t layout = kLayoutFlatPlain;
  uint32_t raw_blkaddr = 0;   // flat plain payload blocks
};

// Directory data: blocks of entries sorted by name, each block holding its dirents then their names.
struct DirEntryOut {
  std::string name;
  uint32_t target;  // tree index
};

std::vector<DirEntryOut> dir_entries(const FsTree& tree, const Layout& l) {
  std::vector<DirEntryOut> ents;
  ents.push_back({".", l.index});
  ents.push_back({"..", l.parent});
  for (const auto& [name, idx] : tree.at(l.index).children) ents.push_back({name, idx});
  std::sort(ents.begin(), ents.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  return ents;
}

// Splits entries into blocks; returns, per block, the [begin, end) entry range. Total size through `size`.
std::vector<std::pair<size_t, size_t>> pack_dir(const std::vector<DirEntryOut>& ents, uint64_t* size) {
  std::vector<std::pair<size_t, size_t>> blocks;
  size_t begin = 0, used = 0;
  for (size_t i = 0; i < ents.size(); ++i) {
    size_t need = sizeof(Dirent) + ents[i].name.size();
    if (used + need > kBlockSize) {
      blocks.emplace_back(begin, i);
      begin = i;
      used = 0;
    }
    used += need;
  }
  blocks.emplace_back(begin, ents.size());
  *size = (blocks.size() - 1) * uint64_t{kBlockSize} + used;
  return blocks;
}

}  // namespace

ErofsImageInfo write_erofs(const FsTree& tree, uint32_t chunk_size, const std::map<std::string, uint64_t>& blob_blocks,
                           const std::string& path) {
  if (chunk_size < kBlockSize || (chunk_size & (chunk_size - 1)) != 0) {
    throw Error(Code::kInvalidArgument, "erofs: chunk size must be a power of two >= 4096");
  }
  const auto chunk_bits = static_cast<uint16_t>(__builtin_ctz(chunk_size) - kBlockBits);

  // 1. Reachable inodes in breadth-first order (root first: its nid must fit 16 bits), link counts.
  std::vector<Layout> order;
  std::vector<int64_t> slot(tree.inode_count(), -1);
  std::deque<std::pair<uint32_t, uint32_t>> queue{{FsTree::kRoot, FsTree::kRoot}};
  while (!queue.empty()) {
    auto [idx, parent] = queue.front();
    queue.pop_front();
    if (slot[idx] >= 0) {  // a hard link to an inode already placed
      ++order[static_cast<size_t>(slot[idx])].nlink;
      continue;
    }
    slot[idx] = static_cast<int64_t>(order.size());
    Layout l;
    l.index = idx;
    l.parent = parent;
    l.ino = static_cast<uint32_t>(order.size() + 1);
    l.nlink = 1;
    const Inode& n = tree.at(idx);
    if (n.is_dir()) {
      l.nlink = 2;
      for (const auto& [name, child] : n.children) {
        if (tree.at(child).is_dir()) {
          if (slot[child] >= 0) throw Error(Code::kInvalidArgument, "erofs: a directory is linked twice");
          ++l.nlink;
        }
        queue.emplace_back(child, idx);
      }
    }
    order.push_back(std::move(l));
  }

  // 2. Devices: the blobs reachable chunks point into, in the tree's blob order.
  std::vector<int> device_of(tree.blobs.size(), 0);
  for (const auto& l : order) {
    for (const auto& c : tree.at(l.index).chunks) {
      if (c.blkaddr != ChunkRef::kHole) device_of.at(c.blob) = 1;
    }
  }
  ErofsImageInfo info;
  for (size_t b = 0, next = 1; b < tree.blobs.size(); ++b) {
    if (!device_of[b]) continue;
    if (tree.blobs[b].size() != 64) throw Error(Code::kInternal, "erofs: a referenced blob has no digest yet");
    device_of[b] = static_cast<int>(next++);
    info.devices.push_back(tree.blobs[b]);
  }
  if (info.devices.size() > 4096) throw Error(Code::kOutOfRange, "erofs: a layer may reference at most 4096 blobs");

  // 3. Sizes, data layouts and positions of the inodes.
  constexpr uint64_t kDevtOffset = kSuperOffset + sizeof(SuperBlock);  // 1152: slot 9
  uint64_t pos = align_up(kDevtOffset + info.devices.size() * sizeof(DeviceSlot), kInodeSlot);
  for (auto& l : order) {
    const Inode& n = tree.at(l.index);
    l.xattrs = serialize_xattrs(n, "erofs inode " + std::to_string(l.ino));
    uint64_t head = sizeof(InodeExtended) + l.xattrs.size();
    uint64_t tail = 0;
    if (n.is_dir()) {
      pack_dir(dir_entries(tree, l), &l.payload_size);
    } else if (S_ISLNK(n.mode)) {
      l.payload_size = n.inline_data.size();
    } else if (S_ISREG(n.mode) && n.chunks.empty()) {
      l.payload_size = n.inline_data.size();
      if (l.payload_size != n.size) throw Error(Code::kInternal, "erofs: inline file size mismatch");
    }
    if (S_ISREG(n.mode) && !n.chunks.empty()) {
      l.layout = kLayoutChunkBased;
      if (n.chunks.size() != (n.size + chunk_size - 1) / chunk_size) {
        throw Error(Code::kInternal, "erofs: chunk count does not match the file size");
      }
      tail = 8 + n.chunks.size() * sizeof(ChunkIndex);  // worst-case alignment pad + indexes
    } else if (l.payload_size > 0 && l.payload_size <= kInlineMax && head + l.payload_size <= kBlockSize) {
      l.layout = kLayoutFlatInline;
      tail = l.payload_size;
    }
    // Keep the inode, its xattrs and any inline data inside one block.
    uint64_t must_fit = head + (l.layout == kLayoutFlatInline ? tail : 0);
    if (must_fit <= kBlockSize && pos % kBlockSize + must_fit > kBlockSize) pos = align_up(pos, kBlockSize);
    l.pos = pos;
    if (l.layout == kLayoutChunkBased) {
      pos = align_up(pos + head, 8) + n.chunks.size() * sizeof(ChunkIndex);
    } else {
      pos += head + tail;
    }
    pos = align_up(pos, kInodeSlot);
  }
  if (order[0].pos / kInodeSlot > 0xFFFF) throw Error(Code::kInternal, "erofs: root inode beyond nid 65535");
  // Flat-plain payloads (large directories, long symlinks) follow the inode area, block aligned.
  uint64_t blk = align_up(pos, kBlockSize) / kBlockSize;
  for (auto& l : order) {
    if (l.layout == kLayoutFlatPlain && l.payload_size > 0) {
      l.raw_blkaddr = static_cast<uint32_t>(blk);
      blk += align_up(l.payload_size, kBlockSize) / kBlockSize;
    }
  }
  if (blk > 0xFFFFFFF0u) throw Error(Code::kOutOfRange, "erofs: metadata image larger than 16 TiB");

  // 4. Serialize.
  std::string img(blk * kBlockSize, '\0');
  auto put = [&](uint64_t at, const void* p, size_t n) { std::memcpy(img.data() + at, p, n); };
  auto nid_of = [&](uint32_t tree_index) { return order[static_cast<size_t>(slot[tree_index])].pos / kInodeSlot; };

  SuperBlock sb{};
  sb.magic = kMagic;
  sb.blkszbits = kBlockBits;
  sb.root_nid = static_cast<uint16_t>(order[0].pos / kInodeSlot);
  sb.inos = order.size();
  sb.blocks = static_cast<uint32_t>(blk);
  std::memcpy(sb.volume_name, "sandlet", 7);
  if (!info.devices.empty()) {
    sb.feature_incompat |= kIncompatDeviceTable;
    sb.extra_devices = static_cast<uint16_t>(info.devices.size());
    sb.devt_slotoff = static_cast<uint16_t>(kDevtOffset / sizeof(DeviceSlot));
  }
  for (size_t d = 0; d < info.devices.size(); ++d) {
    DeviceSlot s{};
    std::memcpy(s.tag, info.devices[d].data(), 64);
    auto it = blob_blocks.find(info.devices[d]);
    if (it == blob_blocks.end()) throw Error(Code::kInternal, "erofs: size of blob " + info.devices[d] + " unknown");
    s.blocks = static_cast<uint32_t>(it->second);
    put(kDevtOffset + d * sizeof(DeviceSlot), &s, sizeof s);
  }
  put(kSuperOffset, &sb, sizeof sb);

  for (const auto& l : order) {
    const Inode& n = tree.at(l.index);
    InodeExtended ino{};
    ino.i_format = static_cast<uint16_t>(kInodeExtended | (l.layout << 1));
    ino.i_xattr_icount = l.xattrs.empty() ? 0 : static_cast<uint16_t>((l.xattrs.size() - 12) / 4 + 1);
    ino.i_mode = static_cast<uint16_t>(n.mode);
    ino.i_size = S_ISREG(n.mode) ? n.size : l.payload_size;
    ino.i_ino = l.ino;
    ino.i_uid = n.uid;
    ino.i_gid = n.gid;
    ino.i_mtime = static_cast<uint64_t>(n.mtime_sec);
    ino.i_mtime_nsec = n.mtime_nsec;
    ino.i_nlink = l.nlink;
    if (S_ISCHR(n.mode) || S_ISBLK(n.mode)) {
      unsigned maj = major(n.rdev), min = minor(n.rdev);
      ino.i_u = (min & 0xff) | (maj << 8) | ((min & ~0xffu) << 12);  // the kernel's new_encode_dev
    } else if (l.layout == kLayoutChunkBased) {
      ino.i_u = kChunkFormatIndexes | chunk_bits;
    } else if (l.layout == kLayoutFlatPlain) {
      ino.i_u = l.raw_blkaddr;
    }
    put(l.pos, &ino, sizeof ino);
    uint64_t at = l.pos + sizeof ino;
    if (!l.xattrs.empty()) put(at, l.xattrs.data(), l.xattrs.size());
    at += l.xattrs.size();

    if (l.layout == kLayoutChunkBased) {
      at = align_up(at, 8);
      for (const auto& c : n.chunks) {
        ChunkIndex ci{};
        if (c.blkaddr == ChunkRef::kHole) {
          ci.blkaddr = kNullAddr;
        } else {
          ci.device_id = static_cast<uint16_t>(device_of[c.blob]);
          ci.blkaddr = c.blkaddr;
        }
        put(at, &ci, sizeof ci);
        at += sizeof ci;
      }
      continue;
    }
    uint64_t data_at = l.layout == kLayoutFlatInline ? at : uint64_t{l.raw_blkaddr} * kBlockSize;
    if (n.is_dir()) {
      auto ents = dir_entries(tree, l);
      uint64_t size;
      auto blocks = pack_dir(ents, &size);
      for (size_t b = 0; b < blocks.size(); ++b) {
        uint64_t base = data_at + b * kBlockSize;
        auto [first, last] = blocks[b];
        uint64_t name_at = (last - first) * sizeof(Dirent);
        for (size_t i = first; i < last; ++i) {
          Dirent de{};
          de.nid = nid_of(ents[i].target);
          de.nameoff = static_cast<uint16_t>(name_at);
          de.file_type = file_type_of(tree.at(ents[i].target).mode);
          put(base + (i - first) * sizeof(Dirent), &de, sizeof de);
          put(base + name_at, ents[i].name.data(), ents[i].name.size());
          name_at += ents[i].name.size();
        }
      }
    } else if (l.payload_size > 0) {
      put(data_at, n.inline_data.data(), n.inline_data.size());
    }
  }

  sys::UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (!fd) throw_errno("create " + path);
  for (size_t done = 0; done < img.size();) {
    ssize_t w = ::write(fd.get(), img.data() + done, img.size() - done);
    if (w < 0) {
      if (errno == EINTR) continue;
      throw_errno("write " + path);
    }
    done += static_cast<size_t>(w);
  }
  if (::fsync(fd.get()) != 0) throw_errno("fsync " + path);
  info.inodes = order.size();
  info.bytes = img.size();
  return info;
}

}  // namespace sandlet::image
