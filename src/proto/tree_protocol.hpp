// Directory trees over the agent protocol: the messages of a put-tree (host -> agent) and a get-tree
// (agent -> host) request. A tree travels as a sequence of entries in pre-order, each a TreeEntry frame,
// a regular file's entry followed by exactly its size in data frames. The entries carry what a tar header
// carries (kind, relative path, mode, owner, mtime, link target); the host converts to and from real tar
// streams (runtime/tree_tar.hpp), so the agent never parses tar. Header-only: the static guest includes it.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

#include "proto/wire.hpp"

namespace sandlet::proto {

constexpr uint32_t kMaxTreePath = 4095;  // PATH_MAX less its NUL
constexpr uint32_t kTreeEntryMin = 41;
constexpr uint32_t kTreeEntryMax = kTreeEntryMin + 2 * kMaxTreePath;

enum class TreeKind : uint8_t { kFile = 1, kDir = 2, kSymlink = 3, kHardlink = 4, kFifo = 5 };

// Why `path` is not a tree path (components joined by single '/', none empty, "." or "..", no NUL, no
// leading or trailing '/'); nullptr when it is. "" (the tree's root itself) is one only when `root_ok`.
inline const char* tree_path_problem(std::string_view path, bool root_ok) {
  if (path.empty()) return root_ok ? nullptr : "is empty";
  if (path.size() > kMaxTreePath) return "is longer than PATH_MAX";
  size_t start = 0;
  for (;;) {
    const size_t slash = path.find('/', start);
    const std::string_view comp = path.substr(start, slash == std::string_view::npos ? slash : slash - start);
    if (comp.empty()) return "has an empty component (a leading, trailing or double '/')";
    if (comp == "." || comp == "..") return "has a '.' or '..' component";
    if (comp.find('\0') != std::string_view::npos) return "contains a NUL byte";
    if (slash == std::string_view::npos) return nullptr;
    start = slash + 1;
  }
}

struct TreeEntry {
  TreeKind kind = TreeKind::kFile;
  std::string path;      // relative to the tree's root; "" = the root (always the first entry)
  uint32_t mode = 0;     // permission bits, 07777
  uint32_t uid = 0, gid = 0;
  int64_t mtime_sec = 0;
  uint32_t mtime_nsec = 0;
  uint64_t size = 0;     // kFile: data bytes that follow; 0 for every other kind
  std::string link;      // kSymlink: the target, verbatim; kHardlink: an earlier entry's path

  std::string encode() const {
    wire::Writer w;
    w.u8(static_cast<uint8_t>(kind)); w.str(path); w.u32(mode); w.u32(uid); w.u32(gid);
    w.u64(static_cast<uint64_t>(mtime_sec)); w.u32(mtime_nsec); w.u64(size); w.str(link);
    return std::move(w.data());
  }
  // Checks everything a receiver relies on: a known kind, tree paths, a link only where one belongs.
  static bool decode(std::string_view p, TreeEntry* out) {
    wire::Reader r(p);
    const uint8_t kind = r.u8();
    out->path = r.str(); out->mode = r.u32(); out->uid = r.u32(); out->gid = r.u32();
    out->mtime_sec = static_cast<int64_t>(r.u64()); out->mtime_nsec = r.u32(); out->size = r.u64();
    out->link = r.str();
    if (!r.ok() || !r.at_end() || kind < 1 || kind > 5 || (out->mode & ~07777u) != 0 || out->mtime_nsec >= 1000000000u)
      return false;
    out->kind = static_cast<TreeKind>(kind);
    if (tree_path_problem(out->path, true) != nullptr) return false;
    if (out->kind != TreeKind::kFile && out->size != 0) return false;
    switch (out->kind) {
      case TreeKind::kSymlink:
        return !out->link.empty() && out->link.size() <= kMaxTreePath && out->link.find('\0') == std::string::npos;
      case TreeKind::kHardlink:
        return !out->path.empty() && tree_path_problem(out->link, false) == nullptr;
      default:
        return out->link.empty();
    }
  }
};

enum TreeFlags : uint32_t {
  kTreeKeepOwners = 1,    // put: owners from the entries (done as root); else the request's user owns all
  kTreeMkdirParents = 2,  // put: create missing parents of the destination
  kTreeFollowRoot = 4,    // get: a symlink at the path is followed (else it is copied as a link)
};

struct PutTreeRequest {
  std::string path;  // absolute: becomes the tree's root (an existing directory is merged into)
  std::string user;  // whose credentials create everything, and its owner; empty = config user
  uint32_t flags = kTreeMkdirParents;

  std::string encode() const {
    wire::Writer w;
    w.str(path); w.str(user); w.u32(flags);
    return std::move(w.data());
  }
  static bool decode(std::string_view p, PutTreeRequest* out) {
    wire::Reader r(p);
    out->path = r.str(); out->user = r.str(); out->flags = r.u32();
    return r.ok() && r.at_end() && !out->path.empty() && (out->flags & ~7u) == 0;
  }
};

struct GetTreeRequest {
  std::string path;
  std::string user;             // whose credentials read the tree; empty = config user
  uint64_t max_bytes = ~0ull;   // file data in all; more is refused with OUT_OF_RANGE
  uint32_t flags = 0;

  std::string encode() const {
    wire::Writer w;
    w.str(path); w.str(user); w.u64(max_bytes); w.u32(flags);
    return std::move(w.data());
  }
  static bool decode(std::string_view p, GetTreeRequest* out) {
    wire::Reader r(p);
    out->path = r.str(); out->user = r.str(); out->max_bytes = r.u64(); out->flags = r.u32();
    return r.ok() && r.at_end() && !out->path.empty() && (out->flags & ~7u) == 0;
  }
};

// The last frame of a successful get-tree (and the reply of a put-tree): what was copied.
struct TreeDone {
  uint64_t entries = 0;
  uint64_t bytes = 0;    // file data
  uint64_t skipped = 0;  // sockets and device nodes, which a copy does not carry
  static constexpr uint32_t kSize = 24;

  std::string encode() const {
    wire::Writer w;
    w.u64(entries); w.u64(bytes); w.u64(skipped);
    return std::move(w.data());
  }
  static bool decode(std::string_view p, TreeDone* out) {
    wire::Reader r(p);
    out->entries = r.u64(); out->bytes = r.u64(); out->skipped = r.u64();
    return r.ok() && r.at_end();
  }
};

}  // namespace sandlet::proto
