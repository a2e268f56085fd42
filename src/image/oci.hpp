// Image manifests from local directories: an OCI image layout, or an extracted `docker save` tarball.
// No registry access. Manifest, index and config blobs are checked against their digests here; layer
// blobs are large, so their digests are checked by the importer while it streams them (raw_digest hook).
#pragma once
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

}  // namespace sandlet::image
