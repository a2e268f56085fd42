// The layer store under a runtime root: content-addressed EROFS layers, their data blobs, names and
// environments. Layout (all under <root>/layers):
//   meta/<digest>.erofs       metadata image of a layer (inodes, dirs, small files, chunk tables)
//   manifests/<digest>.json   the layer's manifest; a layer exists exactly when its manifest does
//   blobs/<sha256>            file data, shared by every layer whose chunks point into it
//   blobs/<sha256>.chunks     where each chunk of that blob sits (dedupe index for later imports)
//   names/<name>              a layer name -> digest
//   envs/<name>.json          an environment: versions of (layers, env, workdir, user)
//   tmp/<id>/                 imports in progress (each holds an flock on tmp/<id>/lock while alive)
//   lock                      flock: commits, removals and gc exclude each other
// A layer's digest names its content (FsTree::content_digest: paths, metadata, chunk digests), so the same
// tree gives the same digest on every node, however its chunks were deduplicated against other layers.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "image/importers.hpp"
#include "image/oci.hpp"
#include "remote_store/blob_store.hpp"

namespace sandlet::image {

struct LayerInfo {
  std::string digest;  // 64 hex digits (shown as "sha256:<digest>")
  std::string role;    // base | workspace | toolkit | diff
  std::string name;    // "" when unnamed
  std::string source;  // what it was imported from
  std::string parent;  // digest of the layer below (OCI layers, diffs), or ""
  // A snapshot's layers below it, lowest first (store digests; absolute paths for host directories): what a
  // sandbox restored from it stacks under it. Part of the digest (the same changes on other layers are
  // another snapshot). Empty for other layers.
  std::vector<std::string> stack;
  double created = 0;  // unix seconds
  uint64_t size = 0;   // bytes of file content it holds
  uint64_t stored_bytes = 0;  // bytes this layer added to disk (metadata + new data)
  uint64_t inodes = 0;
  std::string meta_sha256;          // of meta/<digest>.erofs, checked before mounting
  std::vector<std::string> blobs;   // data blobs, in EROFS device order
  // A lazy layer: the store its blobs that are not in this store's blobs/ are fetched from on first read.
  std::string store;
  std::string to_json() const;
  // Throws kDataLoss naming `what` when `text` is not a layer manifest.
  static LayerInfo from_json(const std::string& text, const std::string& what);
};

struct ImportOptions {
  std::string role;       // "" = not given: "base", or an exported layer's own role
  std::string name;       // names the layer (dir/tar) or the environment made of an image's layers (OCI)
  std::string parent;     // for diffs: the layer this one goes on top of
  std::vector<std::string> stack;  // for snapshots: LayerInfo::stack (resolved digests or host paths)
  ProgressFn progress;
  bool dedupe = true;     // reuse chunks of layers already in the store
};

struct ImportResult {
  std::vector<LayerInfo> layers;  // lowest first; one for a directory or tar, one per OCI layer
  std::vector<bool> existed;      // parallel: the layer was already in the store
  std::string environment;        // set for OCI imports given a name
  // An exported layer whose parent or stack entries this store lacks (digests; host directories that do not
  // exist here): it is imported, but a sandbox cannot be restored from it until those are imported too.
  std::vector<std::string> missing;
};

struct ExportOptions {
  int zstd_level = 0;  // for a path ending in ".zst": 0 = the default level (3)
  ProgressFn progress;  // bytes = file data read so far, total_bytes = the layer's size
};

struct ExportResult {
  std::string digest;
  std::string path;
  uint64_t bytes = 0;  // written to the file
  uint64_t files = 0;  // tar members (the root directory included, the global header not)
  bool compressed = false;
};

struct PushResult {
  std::vector<std::string> layers;  // pushed (with what they need), lowest first
  uint64_t objects_sent = 0, bytes_sent = 0, objects_skipped = 0;
};

struct PullResult {
  std::vector<std::string> layers;  // pulled or already here, lowest first (the one asked for last)
  bool lazy = false;
  uint64_t bytes_fetched = 0;  // from the store by this pull
  uint64_t image_bytes = 0;    // the layers' file content
};

// Where an environment made from an image came from, and the image config's parts a sandbox does not apply.
struct EnvImage {
  std::string reference;        // canonical registry reference ("" = not from a registry pull)
  std::string manifest_digest;  // "sha256:..." the reference resolved to (an index, or the manifest)
  std::string platform;         // "linux/amd64"
  std::vector<std::string> entrypoint, cmd;  // recorded, never run by sandlet
};

struct EnvVersion {
  uint32_t version = 0;
  std::vector<std::string> layers;  // digests, lowest first
  std::map<std::string, std::string> env;
  std::string workdir;  // "" = not set
  std::string user;     // "" = not set
  double created = 0;
  EnvImage image;
};

struct EnvInfo {
  std::string name;
  std::vector<EnvVersion> versions;  // oldest first
  std::string to_json() const;
};

struct GcReport {
  std::vector<std::string> removed_layers;
  std::vector<std::string> removed_blobs;
  uint64_t bytes_freed = 0;
  size_t removed_tmp = 0;
};

class LayerStore final {
 public:
  // `dir`: <root>/layers (created if missing). Sweeps imports that crashed (tmp dirs nobody holds).
  explicit LayerStore(std::string dir);

  const std::string& dir() const { return dir_; }

  // Imports a directory, a tar / tar.gz / tar.zst, an OCI image layout directory, or a `docker save`
  // tarball (or its extracted directory). Atomic: a crash leaves only a tmp dir the next store open sweeps.
  ImportResult import(const std::string& path, const ImportOptions& options);

  // One layer blob of an image (a tar, gzip or zstd as `ref` says) on top of `options.parent`; checked against
  // ref.digest and ref.diff_id while it streams (kDataLoss, nothing committed).
  LayerInfo import_oci_layer(const OciLayerRef& ref, const std::string& label, const ImportOptions& options,
                             bool* existed);

  // A directory as one layer, whatever it holds (a sandbox's changes may look like an image layout).
  LayerInfo import_tree(const std::string& dir, const std::string& source_label, const ImportOptions& options,
                        bool* existed);

  std::vector<LayerInfo> list() const;
  // `ref`: a digest (64 hex, optionally "sha256:"), a unique hex prefix of >= 12 digits, or a layer name.
  // Throws kNotFound naming the ref.
  LayerInfo inspect(const std::string& ref) const;
  std::string resolve(const std::string& ref) const { return inspect(ref).digest; }
  std::optional<LayerInfo> find(const std::string& digest) const;

  // Refuses (kFailedPrecondition) a layer an environment or a name... or `in_use` (live sandboxes) references;
  // names pointing at it are removed with it.
  void remove(const std::string& ref, const std::set<std::string>& in_use);
  // Removes layers nothing references (no environment version, no live sandbox in `in_use`, no other
  // layer's parent chain), then blobs no layer uses, then abandoned tmp dirs. Named layers are kept.
  GcReport gc(const std::set<std::string>& in_use);

  // Flattens consecutive layers (lowest first) into one layer with the same view when stacked on what lies
  // below them: whiteouts that hide lower layers are kept.
  // `mounted_dir` gives a readable directory of a layer (its node-wide mount).
  LayerInfo merge(const std::vector<std::string>& refs, const ImportOptions& options,
                  const std::function<std::string(const std::string& digest)>& mounted_dir);

  // Writes layer `ref` to `path` as a pax tar (zstd when `path` ends in ".zst"): a global header carrying
  // the layer's manifest fields (SANDLET.layer), then its tree read from `mounted_dir`. Atomic: written to
  // `path`.tmp-XXXXXXXX, then renamed. import() of that file on any node gives the same digest.
  ExportResult export_layer(const std::string& ref, const std::string& path, const ExportOptions& options,
                            const std::function<std::string(const std::string& digest)>& mounted_dir) const;

  // Environments: a new version each time `create` is called with the same name.
  // Names: as layer names, and also registry references ("ghcr.io/org/img:tag", "host:5000/a/b@sha256:...").
  EnvVersion env_create(const std::string& name, const std::vector<std::string>& layer_refs,
                        const std::map<std::string, std::string>& env, const std::string& workdir,
                        const std::string& user, const EnvImage& image = {});
  std::vector<EnvInfo> env_list() const;
  // "name" (latest version) or "name@N". Throws kNotFound.
  EnvVersion env_resolve(const std::string& name_at_version) const;
  bool env_exists(const std::string& name) const;
  void env_remove(const std::string& name);

  // Checks the metadata image and every blob of a layer against their digests (kDataLoss if not). Files this
  // store object wrote itself are not read back: right after the write they come from the page cache it
  // filled, which a check would only read back (a snapshot's first restore would hash all of it again).
  void verify(const LayerInfo& layer) const;

  // Remote stores (layer_remote.cpp). Store layout: layers/<digest>.json, meta/<digest>.erofs,
  // blobs/<sha256>, blobs/<sha256>.chunks, names/<name>; data goes before the manifest that names it.
  // push: `ref` and the layers it needs (parent chain, stack). A lazy layer's data must already be in `to`
  // (its own store), else kFailedPrecondition.
  PushResult push(const std::string& ref, store::BlobStore& to);
  // pull: a digest or a name the store holds, and the layers it needs. Metadata and chunk indexes are checked
  // against the digest before anything is committed (kDataLoss). `lazy`: no data is fetched; the layers
  // record `store_url` and their blobs are read through the loader. Eager: every blob is fetched and checked
  // chunk by chunk and whole.
  PullResult pull(const std::string& ref, store::BlobStore& from, const std::string& store_url, bool lazy);
  // True when a blob's data is in this store (not only its chunk index).
  bool has_blob_data(const std::string& blob) const;

  std::string meta_path(const std::string& digest) const { return dir_ + "/meta/" + digest + ".erofs"; }
  std::string blob_path(const std::string& blob) const { return dir_ + "/blobs/" + blob; }

 private:
  // `expect_digest`: "" or the digest the content must have (else kDataLoss, nothing committed).
  LayerInfo import_one(const std::string& source_label, const ImportOptions& options, bool* existed,
                       const std::function<void(FsTree&, BlobBuilder&)>& fill, const std::string& expect_digest = "");
  // Imports `path` if it is a file export_layer wrote (true), else leaves it to the other importers.
  bool import_if_exported(const std::string& path, const ImportOptions& options, ImportResult* result);
  ChunkMap load_chunk_map() const;
  void sweep_tmp(GcReport* report);

  std::string dir_;
  mutable std::mutex written_mutex_;
  std::set<std::string> written_;  // layer digests (their metadata) and blob digests committed by this object
};

// A layer's digest: its content digest, or for a snapshot (non-empty stack) that and the stack it goes on.
std::string layer_digest(const Digest& content, const std::vector<std::string>& stack);

// Validation shared with the spec and the CLI. Throw kInvalidArgument naming `field`.
void check_layer_name(const std::string& name, const std::string& field);
void check_role(const std::string& role, const std::string& field);
// An environment's name: a layer name, or a canonical image reference (components separated by '/', an optional
// "@sha256:<64 hex>" at the end). Throws kInvalidArgument naming `field`.
void check_env_name(const std::string& name, const std::string& field);
// The file (and remote record) name of an environment: '/' and '@' escaped, so every name is one path component.
std::string env_file_name(const std::string& name);
// "name@N" -> ("name", N); "name" -> ("name", -1). A trailing "@sha256:..." belongs to the name.
std::pair<std::string, long> split_env_version(const std::string& ref);
// True when `ref` names a store object (digest or name) rather than a host directory (absolute path).
inline bool is_store_ref(const std::string& ref) { return !ref.empty() && ref[0] != '/'; }

}  // namespace sandlet::image
