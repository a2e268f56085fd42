#include "image/oci.hpp"

#include <sys/stat.h>

#include <boost/json.hpp>
#include <limits>

#include "common/error.hpp"
#include "image/sha256.hpp"
#include "sys/fs_util.hpp"

namespace sandlet::image {

namespace json = boost::json;

namespace {

constexpr size_t kMaxJsonFile = 16 << 20;  // manifests and configs are small; a huge one is not an image

constexpr const char* kOciManifest = "application/vnd.oci.image.manifest.v1+json";
constexpr const char* kOciIndex = "application/vnd.oci.image.index.v1+json";
constexpr const char* kDockerManifest = "application/vnd.docker.distribution.manifest.v2+json";
constexpr const char* kDockerList = "application/vnd.docker.distribution.manifest.list.v2+json";

#if defined(__x86_64__)
constexpr const char* kHostArch = "amd64";
#elif defined(__aarch64__)
constexpr const char* kHostArch = "arm64";
#elif defined(__riscv) && __riscv_xlen == 64
constexpr const char* kHostArch = "riscv64";
#elif defined(__powerpc64__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
constexpr const char* kHostArch = "ppc64le";
#elif defined(__s390x__)
constexpr const char* kHostArch = "s390x";
#else
#error "unknown host architecture: add its OCI platform name"
#endif

[[noreturn]] void bad_field(const std::string& file, const std::string& field, const std::string& why,
                            Code code = Code::kInvalidArgument) {
  throw Error(code, file + ": field '" + field + "': " + why);
}

json::value parse_json(const std::string& data, const std::string& file) {
  boost::system::error_code ec;
  json::value v = json::parse(data, ec);
  if (ec) throw Error(Code::kInvalidArgument, file + ": not valid JSON (" + ec.message() + ")");
  return v;
}

const json::object& as_object(const json::value& v, const std::string& file, const std::string& field) {
  if (!v.is_object()) bad_field(file, field.empty() ? "(top level)" : field, "not a JSON object");
  return v.get_object();
}

std::string join(const std::string& prefix, std::string_view key) {
  return prefix.empty() ? std::string(key) : prefix + "." + std::string(key);
}

// Optional string member: "" when absent or null.
std::string opt_string(const json::object& o, std::string_view key, const std::string& file, const std::string& at) {
  const json::value* v = o.if_contains(key);
  if (!v || v->is_null()) return "";
  if (!v->is_string()) bad_field(file, join(at, key), "not a string");
  return std::string(v->get_string());
}

std::string req_string(const json::object& o, std::string_view key, const std::string& file, const std::string& at) {
  const json::value* v = o.if_contains(key);
  if (!v) bad_field(file, join(at, key), "missing");
  if (!v->is_string()) bad_field(file, join(at, key), "not a string");
  return std::string(v->get_string());
}

// Optional array of strings: empty when absent or null.
std::vector<std::string> opt_strings(const json::object& o, std::string_view key, const std::string& file,
                                     const std::string& at) {
  std::vector<std::string> out;
  const json::value* v = o.if_contains(key);
  if (!v || v->is_null()) return out;
  if (!v->is_array()) bad_field(file, join(at, key), "not an array");
  for (const auto& e : v->get_array()) {
    if (!e.is_string()) bad_field(file, join(at, key), "holds a non-string element");
    out.emplace_back(e.get_string());
  }
  return out;
}

const json::array& req_array(const json::object& o, std::string_view key, const std::string& file,
                             const std::string& at) {
  const json::value* v = o.if_contains(key);
  if (!v) bad_field(file, join(at, key), "missing");
  if (!v->is_array()) bad_field(file, join(at, key), "not an array");
  return v->get_array();
}

int64_t req_int(const json::object& o, std::string_view key, const std::string& file, const std::string& at) {
  const json::value* v = o.if_contains(key);
  if (!v) bad_field(file, join(at, key), "missing");
  if (v->is_int64() && v->get_int64() >= 0) return v->get_int64();
  if (v->is_uint64() && v->get_uint64() <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
    return static_cast<int64_t>(v->get_uint64());
  bad_field(file, join(at, key), "not a non-negative integer");
}

// Validates "sha256:<64 lowercase hex>" and returns the hex part.
std::string digest_hex(const std::string& digest, const std::string& file, const std::string& field) {
  auto colon = digest.find(':');
  if (colon == std::string::npos || colon == 0) bad_field(file, field, "'" + digest + "' is not a digest");
  std::string alg = digest.substr(0, colon);
  if (alg != "sha256") {
    if (alg.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789+._-") == std::string::npos)
      bad_field(file, field, "digest algorithm '" + alg + "' is not supported (only sha256)", Code::kUnimplemented);
    bad_field(file, field, "'" + digest + "' is not a digest");
  }
  Digest d;
  if (!from_hex(std::string_view(digest).substr(colon + 1), d))
    bad_field(file, field, "'" + digest + "' is not a sha256 digest (64 lowercase hex digits)");
  return digest.substr(colon + 1);
}

bool is_regular_file(const std::string& path, struct stat* st_out = nullptr) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return false;
  if (st_out) *st_out = st;
  return S_ISREG(st.st_mode);
}

// Reads a small JSON blob and checks it against its descriptor (size when known, and sha256). The bytes
// hashed are the bytes parsed, so a file replaced in between cannot slip through.
std::string read_verified(const std::string& path, const std::string& hex, int64_t size, const std::string& file,
                          const std::string& field) {
  std::string data = sys::read_file(path, kMaxJsonFile);
  if (size >= 0 && data.size() != static_cast<uint64_t>(size))
    throw Error(Code::kDataLoss, path + ": " + std::to_string(data.size()) + " bytes, but " + file + " field '" +
                                     field + "' says " + std::to_string(size));
  std::string got = to_hex(sha256(data));
  if (got != hex)
    throw Error(Code::kDataLoss, path + ": sha256 mismatch: " + file + " field '" + field + "' says sha256:" + hex +
                                     ", the file has sha256:" + got);
  return data;
}

struct Descriptor {
  std::string media_type, digest, hex;
  int64_t size = -1;
  std::string at;  // its field name in the referring file, for messages
  const json::object* obj = nullptr;
};

Descriptor parse_descriptor(const json::value& v, const std::string& file, const std::string& at) {
  Descriptor d;
  d.at = at;
  d.obj = &as_object(v, file, at);
  d.media_type = req_string(*d.obj, "mediaType", file, at);
  d.digest = req_string(*d.obj, "digest", file, at);
  d.hex = digest_hex(d.digest, file, at + ".digest");
  d.size = req_int(*d.obj, "size", file, at);
  return d;
}

std::string blob_path(const std::string& dir, const std::string& hex) { return dir + "/blobs/sha256/" + hex; }

// Picks the entry of an image index to use: the only one, or the one for linux on this machine's architecture.
Descriptor pick_manifest(const json::value& index, const std::string& file) {
  const auto& o = as_object(index, file, "");
  if (req_int(o, "schemaVersion", file, "") != 2) bad_field(file, "schemaVersion", "must be 2", Code::kUnimplemented);
  const auto& list = req_array(o, "manifests", file, "");
  if (list.empty()) bad_field(file, "manifests", "is empty");
  std::vector<Descriptor> all;
  for (size_t i = 0; i < list.size(); ++i)
    all.push_back(parse_descriptor(list[i], file, "manifests[" + std::to_string(i) + "]"));
  if (all.size() == 1) return all[0];
  for (size_t i = 0; i < all.size(); ++i) {
    const json::value* p = all[i].obj->if_contains("platform");
    if (!p || p->is_null()) continue;
    std::string at = "manifests[" + std::to_string(i) + "].platform";
    const auto& po = as_object(*p, file, at);
    if (opt_string(po, "os", file, at) == "linux" && opt_string(po, "architecture", file, at) == kHostArch)
      return all[i];
  }
  throw Error(Code::kNotFound, file + ": field 'manifests': " + std::to_string(all.size()) +
                                   " entries and none for linux/" + kHostArch);
}

Compression layer_compression(const std::string& media_type, const std::string& file, const std::string& field) {
  if (media_type == "application/vnd.oci.image.layer.v1.tar" ||
      media_type == "application/vnd.docker.image.rootfs.diff.tar")
    return Compression::kNone;
  if (media_type == "application/vnd.oci.image.layer.v1.tar+gzip" ||
      media_type == "application/vnd.docker.image.rootfs.diff.tar.gzip")
    return Compression::kGzip;
  if (media_type == "application/vnd.oci.image.layer.v1.tar+zstd") return Compression::kZstd;
  bad_field(file, field, "unsupported layer media type '" + media_type + "'", Code::kUnimplemented);
}

// The parts of the image config a sandbox needs, and the layers' diff_ids (checked against their number).
void read_config(const std::string& data, const std::string& file, OciImage& img) {
  json::value v = parse_json(data, file);
  const auto& o = as_object(v, file, "");
  if (const json::value* c = o.if_contains("config"); c && !c->is_null()) {
    const auto& co = as_object(*c, file, "config");
    img.env = opt_strings(co, "Env", file, "config");
    img.workdir = opt_string(co, "WorkingDir", file, "config");
    img.user = opt_string(co, "User", file, "config");
    img.cmd = opt_strings(co, "Cmd", file, "config");
    img.entrypoint = opt_strings(co, "Entrypoint", file, "config");
  }
  const json::value* r = o.if_contains("rootfs");
  if (!r) bad_field(file, "rootfs", "missing");
  const auto& ro = as_object(*r, file, "rootfs");
  if (req_string(ro, "type", file, "rootfs") != "layers") bad_field(file, "rootfs.type", "must be \"layers\"");
  const auto& ids = req_array(ro, "diff_ids", file, "rootfs");
  if (ids.size() != img.layers.size())
    bad_field(file, "rootfs.diff_ids", std::to_string(ids.size()) + " entries for " +
                                           std::to_string(img.layers.size()) + " layers");
  for (size_t i = 0; i < ids.size(); ++i) {
    std::string field = "rootfs.diff_ids[" + std::to_string(i) + "]";
    if (!ids[i].is_string()) bad_field(file, field, "not a string");
    std::string id(ids[i].get_string());
    digest_hex(id, file, field);
    img.layers[i].diff_id = std::move(id);
  }
}

// A relative path inside an image directory: not absolute, no ".." (a manifest must not point outside).
std::string inside(const std::string& dir, const std::string& rel, const std::string& file, const std::string& field) {
  if (rel.empty() || rel[0] == '/') bad_field(file, field, "'" + rel + "' is not a relative path");
  for (size_t i = 0; i <= rel.size();) {
    size_t j = rel.find('/', i);
    if (j == std::string::npos) j = rel.size();
    if (rel.compare(i, j - i, "..") == 0) bad_field(file, field, "'" + rel + "' leaves the image directory");
    i = j + 1;
  }
  return dir + "/" + rel;
}

// "blobs/sha256/<hex>" -> hex; "" otherwise.
std::string hex_of_blob_path(const std::string& rel) {
  const std::string prefix = "blobs/sha256/";
  Digest d;
  if (rel.rfind(prefix, 0) == 0 && from_hex(std::string_view(rel).substr(prefix.size()), d))
    return rel.substr(prefix.size());
  return "";
}

}  // namespace

OciImage read_oci_layout(const std::string& dir) {
  const std::string layout_file = dir + "/oci-layout";
  json::value layout = parse_json(sys::read_file(layout_file, kMaxJsonFile), layout_file);
  std::string version = req_string(as_object(layout, layout_file, ""), "imageLayoutVersion", layout_file, "");
  if (version != "1.0.0")
    bad_field(layout_file, "imageLayoutVersion", "unsupported version '" + version + "'", Code::kUnimplemented);

  const std::string index_file = dir + "/index.json";
  Descriptor m = pick_manifest(parse_json(sys::read_file(index_file, kMaxJsonFile), index_file), index_file);
  std::string m_file = index_file;  // the file pointing at the manifest, for messages
  if (m.media_type == kOciIndex || m.media_type == kDockerList) {
    std::string nested_file = blob_path(dir, m.hex);
    std::string data = read_verified(nested_file, m.hex, m.size, index_file, m.at + ".digest");
    m = pick_manifest(parse_json(data, nested_file), nested_file);
    m_file = nested_file;
    if (m.media_type == kOciIndex || m.media_type == kDockerList)
      bad_field(nested_file, m.at, "image index nested more than one level", Code::kUnimplemented);
  }
  if (m.media_type != kOciManifest && m.media_type != kDockerManifest)
    bad_field(m_file, m.at + ".mediaType", "unsupported manifest media type '" + m.media_type + "'",
              Code::kUnimplemented);

  const std::string manifest_file = blob_path(dir, m.hex);
  json::value mv = parse_json(read_verified(manifest_file, m.hex, m.size, m_file, m.at + ".digest"), manifest_file);
  const auto& mo = as_object(mv, manifest_file, "");
  if (req_int(mo, "schemaVersion", manifest_file, "") != 2)
    bad_field(manifest_file, "schemaVersion", "must be 2", Code::kUnimplemented);
  if (std::string mt = opt_string(mo, "mediaType", manifest_file, ""); !mt.empty() && mt != m.media_type)
    bad_field(manifest_file, "mediaType", "'" + mt + "' differs from the referring descriptor's '" + m.media_type + "'");

  const json::value* cv = mo.if_contains("config");
  if (!cv) bad_field(manifest_file, "config", "missing");
  Descriptor config = parse_descriptor(*cv, manifest_file, "config");
  if (config.media_type != "application/vnd.oci.image.config.v1+json" &&
      config.media_type != "application/vnd.docker.container.image.v1+json")
    bad_field(manifest_file, "config.mediaType",
              "'" + config.media_type + "' is not a container image config (not a container image?)",
              Code::kUnimplemented);

  OciImage img;
  const auto& layers = req_array(mo, "layers", manifest_file, "");
  for (size_t i = 0; i < layers.size(); ++i) {
    std::string at = "layers[" + std::to_string(i) + "]";
    Descriptor d = parse_descriptor(layers[i], manifest_file, at);
    OciLayerRef ref;
    ref.compression = layer_compression(d.media_type, manifest_file, at + ".mediaType");
    ref.media_type = d.media_type;
    ref.digest = d.digest;
    ref.size = d.size;
    ref.blob_path = blob_path(dir, d.hex);
    // Cheap checks now, so a missing blob fails before any import work; the digest is checked while streaming.
    struct stat st;
    if (!is_regular_file(ref.blob_path, &st))
      throw Error(Code::kNotFound, ref.blob_path + ": layer blob missing (" + manifest_file + " field '" + at + "')");
    if (static_cast<int64_t>(st.st_size) != d.size)
      throw Error(Code::kDataLoss, ref.blob_path + ": " + std::to_string(st.st_size) + " bytes, but " +
                                       manifest_file + " field '" + at + ".size' says " + std::to_string(d.size));
    img.layers.push_back(std::move(ref));
  }

  const std::string config_file = blob_path(dir, config.hex);
  read_config(read_verified(config_file, config.hex, config.size, manifest_file, "config.digest"), config_file, img);
  return img;
}

OciImage read_docker_save(const std::string& dir) {
  if (is_regular_file(dir + "/oci-layout") && is_regular_file(dir + "/index.json")) return read_oci_layout(dir);

  const std::string file = dir + "/manifest.json";
  json::value v = parse_json(sys::read_file(file, kMaxJsonFile), file);
  if (!v.is_array()) bad_field(file, "(top level)", "not a JSON array");
  const auto& arr = v.get_array();
  if (arr.size() != 1)
    bad_field(file, "(top level)", "holds " + std::to_string(arr.size()) + " images; exactly one is supported");
  const auto& o = as_object(arr[0], file, "[0]");

  std::string config_rel = req_string(o, "Config", file, "[0]");
  std::string config_file = inside(dir, config_rel, file, "[0].Config");
  // The config's name is its digest: blobs/sha256/<hex> (docker >= 25) or <hex>.json (older).
  std::string config_hex = hex_of_blob_path(config_rel);
  Digest tmp;
  if (config_hex.empty() && config_rel.size() == 69 && config_rel.compare(64, 5, ".json") == 0 &&
      from_hex(std::string_view(config_rel).substr(0, 64), tmp))
    config_hex = config_rel.substr(0, 64);
  std::string config_data = config_hex.empty() ? sys::read_file(config_file, kMaxJsonFile)
                                               : read_verified(config_file, config_hex, -1, file, "[0].Config");

  // Docker >= 25 records media types of layers it did not write itself, keyed by digest.
  const json::object* sources = nullptr;
  if (const json::value* s = o.if_contains("LayerSources"); s && !s->is_null())
    sources = &as_object(*s, file, "[0].LayerSources");

  OciImage img;
  const auto& layers = req_array(o, "Layers", file, "[0]");
  for (size_t i = 0; i < layers.size(); ++i) {
    std::string at = "[0].Layers[" + std::to_string(i) + "]";
    if (!layers[i].is_string()) bad_field(file, at, "not a string");
    std::string rel(layers[i].get_string());
    OciLayerRef ref;
    ref.blob_path = inside(dir, rel, file, at);
    if (!is_regular_file(ref.blob_path))
      throw Error(Code::kNotFound, ref.blob_path + ": layer file missing (" + file + " field '" + at + "')");
    if (std::string hex = hex_of_blob_path(rel); !hex.empty()) ref.digest = "sha256:" + hex;
    ref.compression = Compression::kAuto;
    if (sources && !ref.digest.empty()) {
      if (const json::value* src = sources->if_contains(ref.digest)) {
        std::string sat = "[0].LayerSources." + ref.digest;
        ref.media_type = req_string(as_object(*src, file, sat), "mediaType", file, sat);
        ref.compression = layer_compression(ref.media_type, file, sat + ".mediaType");
      }
    }
    img.layers.push_back(std::move(ref));
  }
  read_config(config_data, config_file, img);
  return img;
}

OciImage read_image_dir(const std::string& dir) {
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0) throw_errno("stat " + dir);
  if (!S_ISDIR(st.st_mode)) throw Error(Code::kInvalidArgument, dir + ": not a directory");
  if (is_regular_file(dir + "/oci-layout")) return read_oci_layout(dir);
  if (is_regular_file(dir + "/manifest.json")) return read_docker_save(dir);
  throw Error(Code::kInvalidArgument, dir + ": neither an OCI image layout (no oci-layout file) nor an extracted "
                                            "docker save archive (no manifest.json)");
}

bool is_image_index(const std::string& media_type) { return media_type == kOciIndex || media_type == kDockerList; }

bool is_image_manifest(const std::string& media_type) {
  return media_type == kOciManifest || media_type == kDockerManifest;
}

ManifestChoice pick_platform(const std::string& index_json, const std::string& platform, const std::string& what) {
  const json::value v = parse_json(index_json, what);
  const auto& o = as_object(v, what, "");
  if (req_int(o, "schemaVersion", what, "") != 2) bad_field(what, "schemaVersion", "must be 2", Code::kUnimplemented);
  const auto& list = req_array(o, "manifests", what, "");
  std::string want_os = platform.substr(0, platform.find('/'));
  std::string rest = platform.substr(platform.find('/') + 1);
  const std::string want_arch = rest.substr(0, rest.find('/'));
  const std::string want_variant = rest.find('/') == std::string::npos ? "" : rest.substr(rest.find('/') + 1);
  std::string have;
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string at = "manifests[" + std::to_string(i) + "]";
    Descriptor d = parse_descriptor(list[i], what, at);
    const json::value* p = d.obj->if_contains("platform");
    if (!p || p->is_null()) continue;
    const auto& po = as_object(*p, what, at + ".platform");
    const std::string os = opt_string(po, "os", what, at), arch = opt_string(po, "architecture", what, at),
                      variant = opt_string(po, "variant", what, at);
    const std::string name = os + "/" + arch + (variant.empty() ? "" : "/" + variant);
    if (os == "unknown") continue;  // attestation manifests, not images
    have += (have.empty() ? "" : ", ") + name;
    if (os == want_os && arch == want_arch && (want_variant.empty() || variant.empty() || variant == want_variant))
      return ManifestChoice{d.digest, d.media_type, d.size};
  }
  throw Error(Code::kNotFound, what + ": no image for " + platform + " (the index has: " +
                                   (have.empty() ? "no platforms" : have) + ")");
}

ImageManifest parse_image_manifest(const std::string& manifest_json, const std::string& media_type,
                                   const std::string& what) {
  if (!is_image_manifest(media_type))
    throw Error(Code::kUnimplemented, what + ": unsupported manifest media type '" + media_type + "'");
  const json::value mv = parse_json(manifest_json, what);
  const auto& mo = as_object(mv, what, "");
  if (req_int(mo, "schemaVersion", what, "") != 2) bad_field(what, "schemaVersion", "must be 2", Code::kUnimplemented);
  if (std::string mt = opt_string(mo, "mediaType", what, ""); !mt.empty() && mt != media_type)
    bad_field(what, "mediaType", "'" + mt + "' differs from the registry's '" + media_type + "'");
  const json::value* cv = mo.if_contains("config");
  if (!cv) bad_field(what, "config", "missing");
  Descriptor config = parse_descriptor(*cv, what, "config");
  if (config.media_type != "application/vnd.oci.image.config.v1+json" &&
      config.media_type != "application/vnd.docker.container.image.v1+json")
    bad_field(what, "config.mediaType", "'" + config.media_type + "' is not a container image config",
              Code::kUnimplemented);
  ImageManifest m;
  m.config_digest = config.digest;
  m.config_size = config.size;
  const auto& layers = req_array(mo, "layers", what, "");
  for (size_t i = 0; i < layers.size(); ++i) {
    const std::string at = "layers[" + std::to_string(i) + "]";
    Descriptor d = parse_descriptor(layers[i], what, at);
    OciLayerRef ref;
    ref.compression = layer_compression(d.media_type, what, at + ".mediaType");
    ref.media_type = d.media_type;
    ref.digest = d.digest;
    ref.size = d.size;
    m.image.layers.push_back(std::move(ref));
  }
  return m;
}

void parse_image_config(const std::string& config_json, const std::string& what, OciImage& img) {
  read_config(config_json, what, img);
}

}  // namespace sandlet::image
