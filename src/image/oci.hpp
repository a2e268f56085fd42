// Image manifests from local directories: an OCI image layout, or an extracted `docker save` tarball.
// No registry access. Manifest, index and config blobs are checked against their digests here; layer
// blobs are large, so their digests are checked by the importer while it streams them (raw_digest hook).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "image/byte_reader.hpp"

namespace sandlet::image {

struct OciLayerRef {
  std::string blob_path;   // the layer file
  std::string digest;      // "sha256:<64 hex>" of the blob file, or "" when the format gives none
  std::string media_type;  // as declared; "" when the format declares none (docker save's manifest.json)
  Compression compression = Compression::kAuto;  // from the media type; kAuto when none is declared
  std::string diff_id;     // "sha256:<64 hex>" of the uncompressed layer tar (config rootfs.diff_ids), or ""
  int64_t size = -1;       // the blob's size from its descriptor, or -1
};

struct OciImage {
  std::vector<OciLayerRef> layers;  // lowest first
  // From the image config; may be empty.
  std::vector<std::string> env;
  std::string workdir;
  std::string user;
  std::vector<std::string> cmd, entrypoint;
};

// An OCI image layout directory: oci-layout, index.json -> manifest (through at most one nested image
// index; picks the linux/<host arch> entry, or the only entry) -> config and layers in blobs/sha256/<hex>.
OciImage read_oci_layout(const std::string& dir);
// An extracted `docker save` tarball (manifest.json with exactly one image). When the directory is also an
// OCI layout (docker >= 25 writes both), the OCI layout is read instead.
OciImage read_docker_save(const std::string& dir);
// Either of the two; Error(kInvalidArgument) when the directory is neither.
OciImage read_image_dir(const std::string& dir);

// Documents fetched one by one (from a registry), checked with the same rules. `what` names the document in
// errors (kInvalidArgument for malformed ones, kUnimplemented for unsupported media types).
bool is_image_index(const std::string& media_type);
bool is_image_manifest(const std::string& media_type);
struct ManifestChoice {
  std::string digest, media_type;
  int64_t size = -1;
};
// The entry of an image index for `platform` ("os/arch" or "os/arch/variant"; an entry without a variant
// matches any); kNotFound listing the platforms the index has.
ManifestChoice pick_platform(const std::string& index_json, const std::string& platform, const std::string& what);
struct ImageManifest {
  std::string config_digest;
  int64_t config_size = -1;
  OciImage image;  // layers with digest, media type, compression and size (no blob_path yet)
};
ImageManifest parse_image_manifest(const std::string& manifest_json, const std::string& media_type,
                                   const std::string& what);
// Fills env / workdir / user / cmd / entrypoint and each layer's diff_id from an image config document.
void parse_image_config(const std::string& config_json, const std::string& what, OciImage& img);

}  // namespace sandlet::image
