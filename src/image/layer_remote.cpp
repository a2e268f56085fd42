// Pushing layers to a remote store and pulling them from one (eagerly, or lazily: metadata only).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <set>

#include "common/error.hpp"
#include "image/layer_store.hpp"
#include "image/layer_verify.hpp"
#include "image/sha256.hpp"
#include "image/store_files.hpp"
#include "sys/fs_util.hpp"

namespace sandlet::image {
namespace {

constexpr size_t kMaxManifest = 256u << 10;
constexpr size_t kMaxMeta = 512u << 20;
constexpr size_t kMaxIndex = 640u << 20;  // 16 Mi chunks
constexpr size_t kPullPiece = 8u << 20;  // an eager pull reads blobs in pieces this large
constexpr int kMaxDepth = 64;            // layers below layers below ...
constexpr size_t kMaxOrderHint = 4u << 20;  // a prefetch hint: chunk numbers (u32), first use first

std::string manifest_key(const std::string& d) { return "layers/" + d + ".json"; }
std::string meta_key(const std::string& d) { return "meta/" + d + ".erofs"; }
std::string blob_key(const std::string& b) { return "blobs/" + b; }
std::string index_key(const std::string& b) { return "blobs/" + b + ".chunks"; }
std::string name_key(const std::string& n) { return "names/" + n; }

bool hex64(const std::string& s) {
  return s.size() == 64 &&
         std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

bool exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

uint64_t file_size(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
}

// The layers `top` needs below it (parent chain, a snapshot's stack: store digests only), lowest first.
std::vector<std::string> dependencies(const LayerInfo& l) {
  std::vector<std::string> deps;
  if (!l.parent.empty()) deps.push_back(l.parent);
  for (const auto& s : l.stack)
    if (is_store_ref(s)) deps.push_back(s);
  return deps;
}

// A blob fetched whole: each chunk checked against the index as it arrives, then the whole against its name.
void fetch_blob(store::BlobStore& from, const std::string& blob, const std::vector<ChunkRecord>& index,
                const std::string& out_path, uint64_t* fetched) {
  uint64_t size = 0;
  for (const auto& r : index) size = std::max<uint64_t>(size, (uint64_t{r.blkaddr} * 4096 + r.length + 4095) / 4096 * 4096);
  sys::UniqueFd out(::open(out_path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (!out) throw_errno("create " + out_path);
  Sha256 whole;
  std::vector<char> buf;
  size_t next = 0;  // next index record to check
  for (uint64_t off = 0; off < size; off += kPullPiece) {
    size_t len = static_cast<size_t>(std::min<uint64_t>(kPullPiece, size - off));
    buf.resize(len);
    from.get_range(blob_key(blob), off, len, buf.data());
    *fetched += len;
    whole.update(buf.data(), len);
    // Chunks wholly inside what has arrived so far (pieces are block multiples; chunks may straddle them,
    // so a straddling chunk is checked from the file once its end is in).
    if (::pwrite(out.get(), buf.data(), len, static_cast<off_t>(off)) != static_cast<ssize_t>(len))
      throw_errno("write " + out_path);
    while (next < index.size() && uint64_t{index[next].blkaddr} * 4096 + index[next].length <= off + len) {
      const auto& r = index[next];
      std::vector<char> chunk(r.length);
      if (::pread(out.get(), chunk.data(), r.length, static_cast<off_t>(uint64_t{r.blkaddr} * 4096)) !=
          static_cast<ssize_t>(r.length))
        throw_errno("read back " + out_path);
      Sha256 h;
      h.update(chunk.data(), chunk.size());
      if (h.finish() != r.digest)
        throw Error(Code::kDataLoss, "blob " + blob + " from " + from.config().url + ": chunk at block " +
                                         std::to_string(r.blkaddr) + " does not match its digest");
      ++next;
    }
  }
  if (to_hex(whole.finish()) != blob)
    throw Error(Code::kDataLoss, "blob " + blob + " from " + from.config().url + " does not match its digest");
  if (::fsync(out.get()) != 0) throw_errno("fsync " + out_path);
}

}  // namespace

bool LayerStore::has_blob_data(const std::string& blob) const { return exists(blob_path(blob)); }

PushResult LayerStore::push(const std::string& ref, store::BlobStore& to) {
  to.check();
  PushResult r;
  std::vector<LayerInfo> order;
  std::set<std::string> seen;
  std::function<void(const LayerInfo&, int)> collect = [&](const LayerInfo& l, int depth) {
    if (depth > kMaxDepth) throw Error(Code::kFailedPrecondition, "layer " + l.digest + ": layers nested too deep");
    if (!seen.insert(l.digest).second) return;
    for (const auto& d : dependencies(l)) {
      auto dep = find(d);
      if (!dep) throw Error(Code::kFailedPrecondition, "layer " + l.digest + " needs layer " + d + ", which " + dir_ + " lacks");
      collect(*dep, depth + 1);
    }
    order.push_back(l);
  };
  collect(inspect(ref), 0);
  auto send_file = [&](const std::string& key, const std::string& path) {
    if (to.head(key)) {
      ++r.objects_skipped;
      return;
    }
    to.put_file(key, path);
    ++r.objects_sent;
    r.bytes_sent += file_size(path);
  };
  for (const auto& l : order) {
    for (const auto& b : l.blobs) {
      if (!has_blob_data(b) && !to.head(blob_key(b)))
        throw Error(Code::kFailedPrecondition, "layer " + l.digest + " is lazy and blob " + b + " is not in " +
                                                   to.config().url + "; pull the layer eagerly first");
      if (has_blob_data(b)) send_file(blob_key(b), blob_path(b));
      send_file(index_key(b), blob_path(b) + ".chunks");
      // What earlier uses read first, for other nodes' prefetch (a hint; never trusted as data).
      std::string order_file = dir_ + "/cache/" + b + ".order";
      if (exists(order_file) && !to.head(blob_key(b) + ".order")) to.put_file(blob_key(b) + ".order", order_file);
    }
    send_file(meta_key(l.digest), meta_path(l.digest));
    LayerInfo shared = l;
    shared.store.clear();
    std::string manifest = shared.to_json();
    to.put(manifest_key(l.digest), manifest);
    ++r.objects_sent;
    r.bytes_sent += manifest.size();
    // Every name this store gives the layer (a layer imported twice under two names has both).
    for (const auto& n : sys::list_dir(dir_ + "/names")) {
      auto target = sys::read_file_if_exists(dir_ + "/names/" + n, 256);
      if (target && target->substr(0, 64) == l.digest) to.put(name_key(n), l.digest + "\n");
    }
    r.layers.push_back(l.digest);
  }
  return r;
}

PullResult LayerStore::pull(const std::string& ref_in, store::BlobStore& from, const std::string& store_url, bool lazy) {
  from.check();
  PullResult r;
  std::string ref = ref_in.rfind("sha256:", 0) == 0 ? ref_in.substr(7) : ref_in;
  std::string top;
  bool by_name = !hex64(ref);
  if (by_name) {
    check_layer_name(ref, "ref");
    std::string target;
    try {
      target = from.get(name_key(ref), 256);
    } catch (const Error& e) {
      if (e.code() == Code::kNotFound) throw Error(Code::kNotFound, "layer '" + ref + "' not found in " + from.config().url);
      throw;
    }
    r.bytes_fetched += target.size();
    top = target.substr(0, 64);
    if (!hex64(top)) throw Error(Code::kDataLoss, from.config().url + ": name " + ref + " does not name a digest");
  } else {
    top = ref;
  }
  std::set<std::string> done;
  std::function<void(const std::string&, int)> pull_one = [&](const std::string& digest, int depth) {
    if (depth > kMaxDepth) throw Error(Code::kDataLoss, "layer " + digest + ": layers nested too deep");
    if (!done.insert(digest).second) return;
    if (auto here = find(digest)) {
      r.layers.push_back(digest);
      r.image_bytes += here->size;
      return;
    }
    std::string where = from.config().url + "/" + manifest_key(digest);
    std::string text;
    try {
      text = from.get(manifest_key(digest), kMaxManifest);
    } catch (const Error& e) {
      if (e.code() == Code::kNotFound) throw Error(Code::kNotFound, "layer " + digest + " not found in " + from.config().url);
      throw;
    }
    r.bytes_fetched += text.size();
    LayerInfo l = LayerInfo::from_json(text, where);
    if (l.digest != digest) throw Error(Code::kDataLoss, where + ": names layer " + l.digest + ", not " + digest);
    for (const auto& b : l.blobs)
      if (!hex64(b)) throw Error(Code::kDataLoss, where + ": bad blob digest");
    if (!l.parent.empty() && !hex64(l.parent)) throw Error(Code::kDataLoss, where + ": bad parent digest");
    for (const auto& s : l.stack)
      if (is_store_ref(s) && !hex64(s)) throw Error(Code::kDataLoss, where + ": bad stack entry");
    if (!l.name.empty()) {
      try {
        check_layer_name(l.name, "name");
      } catch (const Error&) {
        l.name.clear();
      }
    }
    for (const auto& d : dependencies(l)) pull_one(d, depth + 1);

    std::string meta = from.get(meta_key(digest), kMaxMeta);
    r.bytes_fetched += meta.size();
    {
      Sha256 h;
      h.update(meta.data(), meta.size());
      if (to_hex(h.finish()) != l.meta_sha256)
        throw Error(Code::kDataLoss, "layer " + digest + ": metadata image from " + from.config().url + " does not match its manifest");
    }
    std::vector<std::vector<ChunkRecord>> indexes;
    std::vector<std::string> index_bytes;
    for (const auto& b : l.blobs) {
      std::string bytes;
      if (auto local = sys::read_file_if_exists(blob_path(b) + ".chunks", kMaxIndex)) {
        bytes = *local;
      } else {
        bytes = from.get(index_key(b), kMaxIndex);
        r.bytes_fetched += bytes.size();
      }
      indexes.push_back(parse_chunk_index(bytes, b));
      index_bytes.push_back(std::move(bytes));
    }
    // The metadata and indexes are the layer the digest names (no data read): anything else is refused here.
    verify_layer_metadata(meta, l.blobs, indexes, l.stack, digest);

    std::string tmp = dir_ + "/tmp/" + sys::random_hex(8);
    sys::mkdir_p(tmp, 0700);
    struct Cleanup {
      std::string dir;
      ~Cleanup() {
        try {
          sys::remove_tree(dir);
        } catch (...) {
        }
      }
    } cleanup{tmp};
    FileLock tmp_lock(tmp + "/lock");
    sys::write_new_file(tmp + "/meta.erofs", meta, 0444);
    bool all_local = true;
    std::vector<std::string> fetched_blobs;
    for (size_t i = 0; i < l.blobs.size(); ++i) {
      const auto& b = l.blobs[i];
      if (has_blob_data(b)) continue;
      if (lazy) {
        all_local = false;
        // What earlier uses on other nodes read first (pushed with the blob): the loader prefetches it.
        std::string order = dir_ + "/cache/" + b + ".order";
        if (!exists(order)) {
          try {
            std::string hint = from.get(blob_key(b) + ".order", kMaxOrderHint);
            sys::mkdir_p(dir_ + "/cache", 0700);
            sys::write_file_atomic(order, hint.substr(0, hint.size() / 4 * 4), 0644);
            r.bytes_fetched += hint.size();
          } catch (const Error& e) {
            if (e.code() != Code::kNotFound) throw;
          }
        }
        continue;
      }
      fetch_blob(from, b, indexes[i], tmp + "/" + b, &r.bytes_fetched);
      fetched_blobs.push_back(b);
    }
    l.store = all_local ? "" : store_url;
    l.stored_bytes = meta.size();
    FileLock lock(dir_ + "/lock");
    for (size_t i = 0; i < l.blobs.size(); ++i) {
      const auto& b = l.blobs[i];
      if (!exists(blob_path(b) + ".chunks")) sys::write_file_atomic(blob_path(b) + ".chunks", index_bytes[i], 0644);
    }
    for (const auto& b : fetched_blobs) {
      if (exists(blob_path(b))) continue;
      if (::chmod((tmp + "/" + b).c_str(), 0444) != 0) throw_errno("chmod blob");
      if (::rename((tmp + "/" + b).c_str(), blob_path(b).c_str()) != 0) throw_errno("install blob " + b);
      l.stored_bytes += file_size(blob_path(b));
    }
    if (::rename((tmp + "/meta.erofs").c_str(), meta_path(digest).c_str()) != 0) throw_errno("install metadata of " + digest);
    write_json_file(dir_ + "/manifests/" + digest + ".json", boost::json::parse(l.to_json()));
    if (!l.name.empty() && !exists(dir_ + "/names/" + l.name))
      sys::write_file_atomic(dir_ + "/names/" + l.name, digest + "\n", 0644);
    r.layers.push_back(digest);
    r.image_bytes += l.size;
    if (!l.store.empty()) r.lazy = true;
  };
  pull_one(top, 0);
  if (by_name) {
    FileLock lock(dir_ + "/lock");
    sys::write_file_atomic(dir_ + "/names/" + ref, top + "\n", 0644);
  }
  return r;
}

}  // namespace sandlet::image
