#include "image/layer_store.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <functional>
#include <unordered_set>

#include "common/error.hpp"
#include "image/byte_reader.hpp"
#include "image/erofs_format.hpp"
#include "image/erofs_writer.hpp"
#include "image/oci.hpp"
#include "image/store_files.hpp"
#include "image/tar_extract.hpp"
#include "image/tar_reader.hpp"
#include "sys/fs_util.hpp"

namespace json = boost::json;

namespace sandlet::image {

namespace {

bool is_hex(const std::string& s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

bool exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

uint64_t file_size(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) throw_errno("stat " + path);
  return static_cast<uint64_t>(st.st_size);
}

void rename_or_throw(const std::string& from, const std::string& to) {
  if (::rename(from.c_str(), to.c_str()) != 0) throw_errno("rename " + from + " to " + to);
}

LayerInfo layer_from_json(const json::value& v, const std::string& path) {
  try {
    const json::object& o = v.as_object();
    LayerInfo l;
    l.digest = json::value_to<std::string>(o.at("digest"));
    l.role = json::value_to<std::string>(o.at("role"));
    l.name = json::value_to<std::string>(o.at("name"));
    l.source = json::value_to<std::string>(o.at("source"));
    l.parent = json::value_to<std::string>(o.at("parent"));
    if (auto* st = o.if_contains("stack")) l.stack = json::value_to<std::vector<std::string>>(*st);
    l.created = o.at("created").to_number<double>();
    l.size = o.at("size").to_number<uint64_t>();
    l.stored_bytes = o.at("stored_bytes").to_number<uint64_t>();
    l.inodes = o.at("inodes").to_number<uint64_t>();
    l.meta_sha256 = json::value_to<std::string>(o.at("meta_sha256"));
    l.blobs = json::value_to<std::vector<std::string>>(o.at("blobs"));
    if (auto* st = o.if_contains("store")) l.store = json::value_to<std::string>(*st);
    return l;
  } catch (const std::exception& e) {
    throw Error(Code::kDataLoss, path + ": not a valid layer manifest (" + e.what() + ")");
  }
}

// Feeds everything read through it into a hash: the OCI diff_id is the digest of the uncompressed tar.
class HashingReader final : public ByteReader {
 public:
  HashingReader(ByteReader& in, Sha256& h) : in_(in), h_(h) {}
  size_t read(void* buf, size_t n) override {
    size_t r = in_.read(buf, n);
    h_.update(buf, r);
    return r;
  }
  uint64_t input_bytes() const override { return in_.input_bytes(); }

 private:
  ByteReader& in_;
  Sha256& h_;
};

uint64_t content_bytes(const FsTree& tree) {
  uint64_t total = 0;
  std::vector<uint32_t> stack{FsTree::kRoot};
  std::unordered_set<uint32_t> seen;
  while (!stack.empty()) {
    uint32_t i = stack.back();
    stack.pop_back();
    if (!seen.insert(i).second) continue;
    const Inode& n = tree.at(i);
    if (S_ISREG(n.mode)) total += n.size;
    for (const auto& [name, c] : n.children) stack.push_back(c);
  }
  return total;
}

// Whether a tar file is an image archive (docker save / OCI layout as a tarball) rather than a layer.
bool is_image_tarball(const std::string& path) {
  auto in = open_decompressing(path);
  TarReader tar(*in, path);
  TarEntry e;
  while (tar.next(e)) {
    if (e.path == "manifest.json" || e.path == "oci-layout" || e.path == "index.json") return true;
  }
  return false;
}

}  // namespace

std::string layer_digest(const Digest& content, const std::vector<std::string>& stack) {
  if (stack.empty()) return to_hex(content);
  Sha256 h;
  static constexpr char kTag[] = "sandlet snapshot v1";
  h.update(kTag, sizeof kTag);
  h.update(content.data(), content.size());
  for (const auto& below : stack) h.update(below.c_str(), below.size() + 1);
  return to_hex(h.finish());
}

std::string LayerInfo::to_json() const {
  json::object o{{"digest", digest}, {"role", role}, {"name", name}, {"source", source}, {"parent", parent},
                 {"created", created}, {"size", size}, {"stored_bytes", stored_bytes}, {"inodes", inodes},
                 {"meta_sha256", meta_sha256}, {"blobs", json::value_from(blobs)}};
  if (!stack.empty()) o["stack"] = json::value_from(stack);
  if (!store.empty()) o["store"] = store;
  return json::serialize(o);
}

LayerInfo LayerInfo::from_json(const std::string& text, const std::string& what) {
  boost::system::error_code ec;
  json::value v = json::parse(text, ec);
  if (ec) throw Error(Code::kDataLoss, what + ": malformed JSON (" + ec.message() + ")");
  return layer_from_json(v, what);
}

void check_layer_name(const std::string& name, const std::string& field) {
  auto ok_char = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
           c == '-' || c == ':';
  };
  if (name.empty() || name.size() > 128 || !std::isalnum(static_cast<unsigned char>(name[0])) ||
      !std::all_of(name.begin(), name.end(), ok_char)) {
    throw Error(Code::kInvalidArgument, "invalid " + field + " '" + name +
                                            "': 1-128 characters [A-Za-z0-9._:-], starting with a letter or digit");
  }
  if (name.size() == 64 && is_hex(name)) {
    throw Error(Code::kInvalidArgument, "invalid " + field + " '" + name + "': a name may not look like a digest");
  }
}

void check_role(const std::string& role, const std::string& field) {
  if (role != "base" && role != "workspace" && role != "toolkit" && role != "diff") {
    throw Error(Code::kInvalidArgument,
                "invalid " + field + " '" + role + "': must be base, workspace, toolkit or diff");
  }
}

LayerStore::LayerStore(std::string dir) : dir_(std::move(dir)) {
  for (const char* sub : {"", "/meta", "/manifests", "/blobs", "/names", "/envs", "/tmp"}) sys::mkdir_p(dir_ + sub, 0755);
  sweep_tmp(nullptr);
}

void LayerStore::sweep_tmp(GcReport* report) {
  for (const auto& id : sys::list_dir(dir_ + "/tmp")) {
    std::string path = dir_ + "/tmp/" + id;
    FileLock held = FileLock::try_lock(path + "/lock");
    if (!held && exists(path + "/lock")) continue;  // an import in progress
    sys::remove_tree(path);
    if (report) ++report->removed_tmp;
  }
}

ChunkMap LayerStore::load_chunk_map() const {
  ChunkMap map;
  for (const auto& name : sys::list_dir(dir_ + "/blobs")) {
    if (name.size() != 64 + 7 || name.compare(64, 7, ".chunks") != 0) continue;
    std::string blob = name.substr(0, 64);
    auto data = sys::read_file_if_exists(dir_ + "/blobs/" + name, 1ull << 34);
    if (!data || !exists(blob_path(blob))) continue;
    constexpr size_t kRec = sizeof(ChunkRecord);
    for (size_t at = 0; at + kRec <= data->size(); at += kRec) {
      ChunkRecord r;
      std::memcpy(&r, data->data() + at, kRec);
      map.emplace(r.digest, StoredChunk{blob, r.blkaddr, r.length});
    }
  }
  return map;
}

LayerInfo LayerStore::import_one(const std::string& source, const ImportOptions& options, bool* existed,
                                 const std::function<void(FsTree&, BlobBuilder&)>& fill,
                                 const std::string& expect_digest) {
  std::string tmp = dir_ + "/tmp/" + sys::random_hex(8);
  sys::mkdir_p(tmp, 0700);
  struct Cleanup {
    std::string path;
    ~Cleanup() {
      try {
        sys::remove_tree(path);
      } catch (...) {
      }
    }
  } cleanup{tmp};
  FileLock tmp_lock(tmp + "/lock");

  ChunkMap known;
  if (options.dedupe) known = load_chunk_map();
  FsTree tree;
  BlobBuilder blobs(tmp + "/blob", tree, options.dedupe ? &known : nullptr);
  fill(tree, blobs);
  std::vector<ChunkRecord> records;
  std::string own_blob = blobs.finish(&records);
  tree.blobs[0] = own_blob;
  std::string digest = layer_digest(tree.content_digest(kChunkSize), options.stack);
  if (!expect_digest.empty() && digest != expect_digest) {
    throw Error(Code::kDataLoss, "import " + source + ": its content has digest sha256:" + digest +
                                     ", its header says sha256:" + expect_digest +
                                     " (the file was altered or damaged); nothing was imported");
  }

  FileLock store_lock(dir_ + "/lock");
  if (auto found = find(digest)) {
    *existed = true;
    return *found;
  }
  *existed = false;
  std::map<std::string, uint64_t> blob_blocks;
  for (size_t i = 1; i < tree.blobs.size(); ++i) {
    if (!exists(blob_path(tree.blobs[i]))) {
      throw Error(Code::kAborted, "import " + source + ": blob " + tree.blobs[i] +
                                      " was removed while importing (a concurrent gc); retry the import");
    }
    blob_blocks[tree.blobs[i]] = file_size(blob_path(tree.blobs[i])) / erofs::kBlockSize;
  }
  if (!own_blob.empty()) blob_blocks[own_blob] = blobs.blocks();
  ErofsImageInfo img = write_erofs(tree, kChunkSize, blob_blocks, tmp + "/meta.erofs");

  LayerInfo l;
  l.digest = digest;
  l.role = options.role.empty() ? "base" : options.role;
  l.name = options.name;
  l.source = source;
  l.parent = options.parent;
  l.stack = options.stack;
  l.created = sys::now_unix_seconds();
  l.size = content_bytes(tree);
  l.stored_bytes = img.bytes + blobs.bytes_stored();
  l.inodes = img.inodes;
  l.meta_sha256 = to_hex(sha256_file(tmp + "/meta.erofs"));
  l.blobs = img.devices;

  // Commit: data first, the manifest last (a layer exists once its manifest does).
  bool wrote_blob = false;
  if (!own_blob.empty()) {
    if (!exists(blob_path(own_blob))) {
      wrote_blob = true;
      std::string chunks(records.size() * sizeof(ChunkRecord), '\0');
      if (!records.empty()) std::memcpy(chunks.data(), records.data(), chunks.size());
      sys::write_file_atomic(blob_path(own_blob) + ".chunks", chunks, 0644);
      if (::chmod((tmp + "/blob").c_str(), 0444) != 0) throw_errno("chmod blob");
      rename_or_throw(tmp + "/blob", blob_path(own_blob));
    }
  }
  if (::chmod((tmp + "/meta.erofs").c_str(), 0444) != 0) throw_errno("chmod meta");
  rename_or_throw(tmp + "/meta.erofs", meta_path(digest));
  write_json_file(dir_ + "/manifests/" + digest + ".json", json::parse(l.to_json()));
  if (!options.name.empty()) sys::write_file_atomic(dir_ + "/names/" + options.name, digest + "\n", 0644);
  {
    std::lock_guard<std::mutex> lock(written_mutex_);
    written_.insert(digest);
    if (wrote_blob) written_.insert(own_blob);
  }
  return l;
}

ImportResult LayerStore::import(const std::string& path, const ImportOptions& options) {
  if (!options.role.empty()) check_role(options.role, "role");
  if (!options.name.empty()) check_layer_name(options.name, "name");
  std::string parent;
  if (!options.parent.empty()) parent = resolve(options.parent);
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) throw_errno("import " + path);
  ImportResult result;

  auto import_image_dir = [&](const std::string& image_dir, const std::string& label) {
    OciImage image = read_image_dir(image_dir);
    if (image.layers.empty()) throw Error(Code::kInvalidArgument, "import " + label + ": the image has no layers");
    ImportOptions per = options;
    per.name.clear();
    for (size_t i = 0; i < image.layers.size(); ++i) {
      const OciLayerRef& ref = image.layers[i];
      per.parent = result.layers.empty() ? parent : result.layers.back().digest;
      bool existed = false;
      LayerInfo l = import_oci_layer(ref, label + " layer " + std::to_string(i), per, &existed);
      result.layers.push_back(l);
      result.existed.push_back(existed);
    }
    if (!options.name.empty()) {
      std::vector<std::string> digests;
      for (const auto& l : result.layers) digests.push_back(l.digest);
      std::map<std::string, std::string> env;
      for (const auto& kv : image.env) {
        size_t eq = kv.find('=');
        if (eq != std::string::npos && eq > 0) env[kv.substr(0, eq)] = kv.substr(eq + 1);
      }
      EnvImage from;
      from.entrypoint = image.entrypoint;
      from.cmd = image.cmd;
      env_create(options.name, digests, env, image.workdir, image.user, from);
      result.environment = options.name;
    }
  };

  if (S_ISDIR(st.st_mode)) {
    if (exists(path + "/oci-layout") || exists(path + "/manifest.json")) {
      import_image_dir(path, path);
      return result;
    }
    ImportOptions one = options;
    one.parent = parent;
    bool existed = false;
    result.layers.push_back(import_one(path, one, &existed, [&](FsTree& t, BlobBuilder& b) {
      import_directory(path, t, b, options.progress);
    }));
    result.existed.push_back(existed);
  } else if (S_ISREG(st.st_mode)) {
    if (import_if_exported(path, options, &result)) return result;
    if (is_image_tarball(path)) {
      std::string tmp = dir_ + "/tmp/" + sys::random_hex(8);
      sys::mkdir_p(tmp, 0700);
      FileLock hold(tmp + "/lock");
      try {
        extract_tar_to_dir(path, tmp + "/image");
        import_image_dir(tmp + "/image", path);
      } catch (...) {
        sys::remove_tree(tmp);
        throw;
      }
      sys::remove_tree(tmp);
      return result;
    }
    ImportOptions one = options;
    one.parent = parent;
    bool existed = false;
    result.layers.push_back(import_one(path, one, &existed, [&](FsTree& t, BlobBuilder& b) {
      auto in = open_decompressing(path);
      import_tar(*in, path, t, b, /*oci_whiteouts=*/true, options.progress, static_cast<uint64_t>(st.st_size));
    }));
    result.existed.push_back(existed);
  } else {
    throw Error(Code::kInvalidArgument, "import " + path + ": not a directory or a regular file");
  }
  // Re-importing content that exists under another name: the name still points at it.
  if (!options.name.empty() && result.existed.back()) {
    FileLock lock(dir_ + "/lock");
    sys::write_file_atomic(dir_ + "/names/" + options.name, result.layers.back().digest + "\n", 0644);
  }
  return result;
}

LayerInfo LayerStore::import_oci_layer(const OciLayerRef& ref, const std::string& label, const ImportOptions& options,
                                       bool* existed) {
  return import_one(label, options, existed, [&](FsTree& t, BlobBuilder& b) {
    Sha256 raw, diff;
    auto in = open_decompressing(ref.blob_path, ref.compression, &raw);
    HashingReader hashing(*in, diff);
    import_tar(hashing, ref.blob_path, t, b, /*oci_whiteouts=*/true, options.progress, file_size(ref.blob_path));
    // Whatever follows the tar's end still belongs to the blob and the diff.
    char sink[65536];
    while (hashing.read(sink, sizeof sink) > 0) {
    }
    drain(*in);
    std::string raw_hex = "sha256:" + to_hex(raw.finish()), diff_hex = "sha256:" + to_hex(diff.finish());
    if (!ref.digest.empty() && ref.digest != raw_hex) {
      throw Error(Code::kDataLoss, "import " + label + ": layer blob " + ref.blob_path + " has digest " + raw_hex +
                                       ", the manifest says " + ref.digest);
    }
    if (!ref.diff_id.empty() && ref.diff_id != diff_hex) {
      throw Error(Code::kDataLoss, "import " + label + ": uncompressed digest " + diff_hex +
                                       " differs from the config's diff_id " + ref.diff_id);
    }
  });
}

LayerInfo LayerStore::import_tree(const std::string& dir, const std::string& source_label, const ImportOptions& options,
                                  bool* existed) {
  check_role(options.role, "role");
  if (!options.name.empty()) check_layer_name(options.name, "name");
  ImportOptions one = options;
  if (!one.parent.empty()) one.parent = resolve(one.parent);
  LayerInfo l = import_one(source_label, one, existed, [&](FsTree& t, BlobBuilder& b) {
    import_directory(dir, t, b, options.progress);
  });
  if (!options.name.empty() && *existed) {
    FileLock lock(dir_ + "/lock");
    sys::write_file_atomic(dir_ + "/names/" + options.name, l.digest + "\n", 0644);
  }
  return l;
}

std::optional<LayerInfo> LayerStore::find(const std::string& digest) const {
  std::string path = dir_ + "/manifests/" + digest + ".json";
  if (!exists(path)) return std::nullopt;
  LayerInfo l = layer_from_json(read_json_file(path), path);
  // Names can move to newer layers: report the current one, not the one given at import.
  if (!l.name.empty()) {
    auto target = sys::read_file_if_exists(dir_ + "/names/" + l.name);
    if (!target || target->substr(0, 64) != l.digest) l.name.clear();
  }
  return l;
}

std::vector<LayerInfo> LayerStore::list() const {
  std::vector<LayerInfo> out;
  for (const auto& f : sys::list_dir(dir_ + "/manifests")) {
    if (f.size() != 64 + 5 || f.compare(64, 5, ".json") != 0) continue;
    if (auto l = find(f.substr(0, 64))) out.push_back(std::move(*l));
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.created < b.created; });
  return out;
}

LayerInfo LayerStore::inspect(const std::string& ref_in) const {
  std::string ref = ref_in.rfind("sha256:", 0) == 0 ? ref_in.substr(7) : ref_in;
  if (ref.size() == 64 && is_hex(ref)) {
    if (auto l = find(ref)) return *l;
    throw Error(Code::kNotFound, "layer " + ref_in + " not found in " + dir_);
  }
  if (ref.size() >= 12 && ref.size() < 64 && is_hex(ref)) {
    std::vector<std::string> hits;
    for (const auto& f : sys::list_dir(dir_ + "/manifests")) {
      if (f.rfind(ref, 0) == 0 && f.size() == 69) hits.push_back(f.substr(0, 64));
    }
    if (hits.size() == 1) return *find(hits[0]);
    if (hits.size() > 1) throw Error(Code::kInvalidArgument, "layer prefix " + ref_in + " is ambiguous");
  }
  if (ref_in.find('/') == std::string::npos && !ref_in.empty()) {
    if (auto target = sys::read_file_if_exists(dir_ + "/names/" + ref_in)) {
      if (auto l = find(target->substr(0, 64))) return *l;
    }
  }
  throw Error(Code::kNotFound, "layer '" + ref_in + "' not found (no such digest or name) in " + dir_);
}

void LayerStore::verify(const LayerInfo& layer) const {
  auto written = [&](const std::string& d) {
    std::lock_guard<std::mutex> lock(written_mutex_);
    return written_.count(d) != 0;
  };
  std::string meta = written(layer.digest) ? layer.meta_sha256 : to_hex(sha256_file(meta_path(layer.digest)));
  if (meta != layer.meta_sha256) {
    throw Error(Code::kDataLoss, "layer " + layer.digest + ": metadata image " + meta_path(layer.digest) +
                                     " no longer matches its digest (corrupted on disk); refusing to mount it");
  }
  for (const auto& b : layer.blobs) {
    // A lazy layer's blobs that are not here are checked chunk by chunk as the loader fetches them.
    if (!layer.store.empty() && !exists(blob_path(b))) continue;
    if (!written(b) && to_hex(sha256_file(blob_path(b))) != b) {
      throw Error(Code::kDataLoss, "layer " + layer.digest + ": data blob " + blob_path(b) +
                                       " no longer matches its digest (corrupted on disk); refusing to mount it");
    }
  }
}

// ---- removal and gc ----------------------------------------------------------------------------------

void LayerStore::remove(const std::string& ref, const std::set<std::string>& in_use) {
  LayerInfo l = inspect(ref);
  FileLock lock(dir_ + "/lock");
  if (in_use.count(l.digest)) {
    throw Error(Code::kFailedPrecondition, "layer " + l.digest + " is used by a live sandbox; destroy it first");
  }
  for (const auto& env : env_list()) {
    for (const auto& v : env.versions) {
      if (std::find(v.layers.begin(), v.layers.end(), l.digest) != v.layers.end()) {
        throw Error(Code::kFailedPrecondition, "layer " + l.digest + " is part of environment " + env.name + "@" +
                                                   std::to_string(v.version) + "; remove the environment first");
      }
    }
  }
  ::unlink((dir_ + "/manifests/" + l.digest + ".json").c_str());
  ::unlink(meta_path(l.digest).c_str());
  for (const auto& name : sys::list_dir(dir_ + "/names")) {
    auto target = sys::read_file_if_exists(dir_ + "/names/" + name);
    if (target && target->substr(0, 64) == l.digest) ::unlink((dir_ + "/names/" + name).c_str());
  }
  // Blobs no remaining layer uses go now (an explicit rm should give the space back).
  std::set<std::string> used;
  for (const auto& other : list()) used.insert(other.blobs.begin(), other.blobs.end());
  for (const auto& b : l.blobs) {
    if (!used.count(b)) {
      ::unlink(blob_path(b).c_str());
      ::unlink((blob_path(b) + ".chunks").c_str());
    }
  }
}

GcReport LayerStore::gc(const std::set<std::string>& in_use) {
  GcReport report;
  FileLock lock(dir_ + "/lock");
  std::vector<LayerInfo> layers = list();
  std::map<std::string, const LayerInfo*> by_digest;
  for (const auto& l : layers) by_digest[l.digest] = &l;
  std::vector<std::string> roots(in_use.begin(), in_use.end());
  for (const auto& env : env_list()) {
    for (const auto& v : env.versions) roots.insert(roots.end(), v.layers.begin(), v.layers.end());
  }
  for (const auto& name : sys::list_dir(dir_ + "/names")) {
    if (auto t = sys::read_file_if_exists(dir_ + "/names/" + name)) roots.push_back(t->substr(0, 64));
  }
  std::set<std::string> keep;
  while (!roots.empty()) {  // a kept layer keeps its parent chain
    std::string d = roots.back();
    roots.pop_back();
    if (!keep.insert(d).second) continue;
    if (auto it = by_digest.find(d); it != by_digest.end()) {
      if (!it->second->parent.empty()) roots.push_back(it->second->parent);
      for (const auto& below : it->second->stack)
        if (is_store_ref(below)) roots.push_back(below);  // a snapshot keeps what it is restored on
    }
  }
  std::set<std::string> used_blobs;
  for (const auto& l : layers) {
    if (keep.count(l.digest)) {
      used_blobs.insert(l.blobs.begin(), l.blobs.end());
      continue;
    }
    ::unlink((dir_ + "/manifests/" + l.digest + ".json").c_str());
    report.bytes_freed += exists(meta_path(l.digest)) ? file_size(meta_path(l.digest)) : 0;
    ::unlink(meta_path(l.digest).c_str());
    report.removed_layers.push_back(l.digest);
  }
  // Metadata images whose manifest never got written (a crash mid-commit).
  for (const auto& f : sys::list_dir(dir_ + "/meta")) {
    if (f.size() == 64 + 6 && !exists(dir_ + "/manifests/" + f.substr(0, 64) + ".json")) {
      ::unlink((dir_ + "/meta/" + f).c_str());
    }
  }
  for (const auto& f : sys::list_dir(dir_ + "/blobs")) {
    std::string blob = f.substr(0, 64);
    if (used_blobs.count(blob)) continue;
    std::string path = dir_ + "/blobs/" + f;
    if (f.size() == 64) {
      report.bytes_freed += file_size(path);
      report.removed_blobs.push_back(blob);
    }
    ::unlink(path.c_str());
  }
  sweep_tmp(&report);
  return report;
}

LayerInfo LayerStore::merge(const std::vector<std::string>& refs, const ImportOptions& options,
                             const std::function<std::string(const std::string&)>& mounted_dir) {
  if (refs.size() < 2) throw Error(Code::kInvalidArgument, "merge: give at least two layers, lowest first");
  if (!options.role.empty()) check_role(options.role, "role");
  if (!options.name.empty()) check_layer_name(options.name, "name");
  std::vector<LayerInfo> layers;
  for (const auto& r : refs) layers.push_back(inspect(r));
  ImportOptions opts = options;
  opts.parent = layers.front().parent;
  std::string label = "merge of";
  for (const auto& l : layers) label += " " + l.digest.substr(0, 12);
  bool existed = false;
  LayerInfo merged = import_one(label, opts, &existed, [&](FsTree& t, BlobBuilder& b) {
    for (size_t i = 0; i < layers.size(); ++i) {
      std::string dir = mounted_dir(layers[i].digest);
      if (i == 0) {
        import_directory(dir, t, b, options.progress);
      } else {
        merge_directory(dir, t, b, options.progress);
      }
    }
  });
  if (!options.name.empty() && existed) {
    FileLock lock(dir_ + "/lock");
    sys::write_file_atomic(dir_ + "/names/" + options.name, merged.digest + "\n", 0644);
  }
  return merged;
}

}  // namespace sandlet::image
