#include "image/fs_tree.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <unordered_map>

#include "common/error.hpp"

namespace sandlet::image {

void Inode::set_xattr(const std::string& name, std::string value) {
  auto it = std::lower_bound(xattrs.begin(), xattrs.end(), name,
                             [](const auto& kv, const std::string& n) { return kv.first < n; });
  if (it != xattrs.end() && it->first == name) {
    it->second = std::move(value);
  } else {
    xattrs.insert(it, {name, std::move(value)});
  }
}

void Inode::remove_xattr(const std::string& name) {
  std::erase_if(xattrs, [&](const auto& kv) { return kv.first == name; });
}

FsTree::FsTree() {
  Inode root;
  root.mode = S_IFDIR | 0755;
  add_inode(std::move(root));
}

uint32_t FsTree::add_inode(Inode inode) {
  inodes_.push_back(std::make_unique<Inode>(std::move(inode)));
  return static_cast<uint32_t>(inodes_.size() - 1);
}

std::vector<std::string> split_path(const std::string& path, const std::string& what) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (start <= path.size() && !path.empty()) {
    size_t slash = path.find('/', start);
    if (slash == std::string::npos) slash = path.size();
    std::string part = path.substr(start, slash - start);
    if (part.empty() || part == "." || part == ".." || part.find('\0') != std::string::npos) {
      throw Error(Code::kInvalidArgument, what + ": bad path component in '" + path + "'");
    }
    if (part.size() > 255) throw Error(Code::kInvalidArgument, what + ": name longer than 255 bytes in '" + path + "'");
    parts.push_back(std::move(part));
    start = slash + 1;
  }
  return parts;
}

int64_t FsTree::lookup(const std::string& path) const {
  uint32_t cur = kRoot;
  for (const auto& part : split_path(path, "lookup")) {
    const Inode& dir = at(cur);
    if (!dir.is_dir()) return -1;
    auto it = dir.children.find(part);
    if (it == dir.children.end()) return -1;
    cur = it->second;
  }
  return cur;
}

uint32_t FsTree::parent_dir(const std::string& path, std::string* leaf) {
  auto parts = split_path(path, "path");
  if (parts.empty()) throw Error(Code::kInvalidArgument, "path: the root has no parent");
  uint32_t cur = kRoot;
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    auto& children = at(cur).children;
    auto it = children.find(parts[i]);
    if (it == children.end()) {
      Inode dir;
      dir.mode = S_IFDIR | 0755;
      uint32_t idx = add_inode(std::move(dir));
      at(cur).children.emplace(parts[i], idx);
      cur = idx;
    } else {
      if (!at(it->second).is_dir()) {
        throw Error(Code::kInvalidArgument, "path '" + path + "': '" + parts[i] + "' is not a directory");
      }
      cur = it->second;
    }
  }
  *leaf = parts.back();
  return cur;
}

void FsTree::link(const std::string& path, uint32_t index) {
  std::string leaf;
  uint32_t dir = parent_dir(path, &leaf);
  at(dir).children[leaf] = index;
}

void FsTree::unlink(const std::string& path) {
  auto parts = split_path(path, "path");
  if (parts.empty()) return;
  std::string leaf;
  int64_t parent = lookup(path.substr(0, path.size() - parts.back().size() - (parts.size() > 1 ? 1 : 0)));
  if (parent < 0 || !at(static_cast<uint32_t>(parent)).is_dir()) return;
  at(static_cast<uint32_t>(parent)).children.erase(parts.back());
}

namespace {

void put_u64(Sha256& h, uint64_t v) { h.update(&v, sizeof v); }
void put_str(Sha256& h, const std::string& s) {
  put_u64(h, s.size());
  h.update(s);
}

}  // namespace

Digest FsTree::content_digest(uint32_t chunk_size) const {
  Sha256 h;
  h.update("sandlet-layer-content-v1");
  put_u64(h, chunk_size);
  std::unordered_map<uint32_t, std::string> first_path;  // hard links: inode -> first path seen
  // Depth-first in byte order; an explicit stack keeps deep trees off the call stack.
  std::vector<std::pair<std::string, uint32_t>> stack{{"", kRoot}};
  while (!stack.empty()) {
    auto [path, idx] = std::move(stack.back());
    stack.pop_back();
    const Inode& n = at(idx);
    put_str(h, path);
    if (!n.is_dir()) {
      auto [it, fresh] = first_path.emplace(idx, path);
      if (!fresh) {
        h.update("L");
        put_str(h, it->second);
        continue;
      }
    }
    h.update("I");
    put_u64(h, n.mode);
    put_u64(h, n.uid);
    put_u64(h, n.gid);
    put_u64(h, static_cast<uint64_t>(n.mtime_sec));
    put_u64(h, n.mtime_nsec);
    put_u64(h, n.rdev);
    put_u64(h, n.xattrs.size());
    for (const auto& [k, v] : n.xattrs) {
      put_str(h, k);
      put_str(h, v);
    }
    put_u64(h, n.size);
    put_str(h, n.inline_data);
    put_u64(h, n.chunk_digests.size());
    for (const auto& d : n.chunk_digests) h.update(d.data(), d.size());
    if (n.is_dir()) {
      put_u64(h, n.children.size());
      // Push in reverse so names pop in byte order.
      for (auto it = n.children.rbegin(); it != n.children.rend(); ++it) {
        stack.emplace_back(path.empty() ? it->first : path + "/" + it->first, it->second);
      }
    }
  }
  return h.finish();
}

}  // namespace sandlet::image
