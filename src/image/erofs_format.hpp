// EROFS on-disk structures the writer emits (uncompressed images only), after the kernel's
// Documentation/filesystems/erofs.rst. All integers are little-endian (x86-64 and arm64 hosts are).
#pragma once
#include <cstdint>

namespace sandlet::image::erofs {

constexpr uint32_t kMagic = 0xE0F5E1E2;
constexpr uint32_t kSuperOffset = 1024;
constexpr unsigned kBlockBits = 12;
constexpr uint32_t kBlockSize = 1u << kBlockBits;
constexpr uint32_t kNullAddr = 0xFFFFFFFFu;  // a chunk with no data: reads as zeros (holes)

constexpr uint32_t kIncompatChunkedFile = 0x4;
constexpr uint32_t kIncompatDeviceTable = 0x8;

// i_format: bit 0 = extended inode; bits 1..3 = data layout.
constexpr uint16_t kInodeExtended = 1;
constexpr uint16_t kLayoutFlatPlain = 0;   // data in consecutive blocks at raw_blkaddr
constexpr uint16_t kLayoutFlatInline = 2;  // data (< one block) right after the inode and its xattrs
constexpr uint16_t kLayoutChunkBased = 4;  // a table of chunk indexes after the inode

constexpr uint16_t kChunkFormatIndexes = 0x20;  // 8-byte indexes carrying a device id (else 4-byte block map)

// Directory entry file types.
enum FileType : uint8_t { kFtUnknown, kFtReg, kFtDir, kFtChr, kFtBlk, kFtFifo, kFtSock, kFtSymlink };
// A directory entry's type for an inode's mode (the writer writes it, the reader checks it).
inline uint8_t file_type_of(unsigned mode) {
  switch (mode & 0170000) {
    case 0100000: return kFtReg;
    case 0040000: return kFtDir;
    case 0020000: return kFtChr;
    case 0060000: return kFtBlk;
    case 0010000: return kFtFifo;
    case 0140000: return kFtSock;
    case 0120000: return kFtSymlink;
    default: return kFtUnknown;
  }
}

// Xattr name prefixes (e_name_index).
enum XattrIndex : uint8_t { kXUser = 1, kXPosixAclAccess = 2, kXPosixAclDefault = 3, kXTrusted = 4, kXSecurity = 6 };

#pragma pack(push, 1)
struct SuperBlock {
  uint32_t magic;
  uint32_t checksum;
  uint32_t feature_compat;
  uint8_t blkszbits;
  uint8_t sb_extslots;
  uint16_t root_nid;
  uint64_t inos;
  uint64_t build_time;
  uint32_t build_time_nsec;
  uint32_t blocks;
  uint32_t meta_blkaddr;
  uint32_t xattr_blkaddr;
  uint8_t uuid[16];
  uint8_t volume_name[16];
  uint32_t feature_incompat;
  uint16_t available_compr_algs;
  uint16_t extra_devices;
  uint16_t devt_slotoff;  // device table offset = devt_slotoff * sizeof(DeviceSlot)
  uint8_t dirblkbits;
  uint8_t xattr_prefix_count;
  uint32_t xattr_prefix_start;
  uint64_t packed_nid;
  uint8_t xattr_filter_reserved;
  uint8_t reserved2[23];
};
static_assert(sizeof(SuperBlock) == 128);

struct DeviceSlot {
  uint8_t tag[64];  // sandlet: the blob's sha256 in hex, so the table names exactly the data it needs
  uint32_t blocks;
  uint32_t mapped_blkaddr;
  uint8_t reserved[56];
};
static_assert(sizeof(DeviceSlot) == 128);

struct InodeExtended {
  uint16_t i_format;
  uint16_t i_xattr_icount;
  uint16_t i_mode;
  uint16_t i_reserved;
  uint64_t i_size;
  uint32_t i_u;  // raw_blkaddr, rdev, or chunk format (low 16 bits)
  uint32_t i_ino;
  uint32_t i_uid;
  uint32_t i_gid;
  uint64_t i_mtime;
  uint32_t i_mtime_nsec;
  uint32_t i_nlink;
  uint8_t i_reserved2[16];
};
static_assert(sizeof(InodeExtended) == 64);

struct ChunkIndex {
  uint16_t advise;
  uint16_t device_id;
  uint32_t blkaddr;
};
static_assert(sizeof(ChunkIndex) == 8);

struct XattrIbodyHeader {
  uint32_t h_name_filter;
  uint8_t h_shared_count;
  uint8_t h_reserved2[7];
};
static_assert(sizeof(XattrIbodyHeader) == 12);

struct XattrEntry {
  uint8_t e_name_len;
  uint8_t e_name_index;
  uint16_t e_value_size;
};
static_assert(sizeof(XattrEntry) == 4);

struct Dirent {
  uint64_t nid;
  uint16_t nameoff;
  uint8_t file_type;
  uint8_t reserved;
};
static_assert(sizeof(Dirent) == 12);
#pragma pack(pop)

constexpr uint32_t kInodeSlot = 32;  // nid = byte offset / 32

}  // namespace sandlet::image::erofs
