// Import of a file `LayerStore::export_layer` wrote: the tree as the tar holds it (overlay whiteouts are
// already 0/0 character devices, so no OCI translation), the manifest fields from its header, and the
// header's digest as the check that the file arrived intact.
#include <sys/stat.h>

#include <algorithm>

#include "common/error.hpp"
#include "image/byte_reader.hpp"
#include "image/export_header.hpp"
#include "image/importers.hpp"
#include "image/layer_store.hpp"
#include "image/store_files.hpp"
#include "sys/fs_util.hpp"

namespace sandlet::image {

namespace {

bool is_dir(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

}  // namespace

bool LayerStore::import_if_exported(const std::string& path, const ImportOptions& options, ImportResult* out) {
  std::optional<ExportHeader> found = read_export_header(path);
  if (!found) return false;
  const ExportHeader& header = *found;
  const std::string what = "import " + path;
  // The caller's role wins (a label, not part of the digest); a parent or stack is part of what the layer
  // means, so one that differs from the header's is refused rather than silently replaced.
  if (!options.parent.empty()) {
    std::string parent = resolve(options.parent);
    if (parent != header.parent) {
      throw Error(Code::kInvalidArgument, what + ": parent " + options.parent + " differs from the exported layer's (" +
                                              (header.parent.empty() ? "none" : "sha256:" + header.parent) + ")");
    }
  }
  if (!options.stack.empty() && options.stack != header.stack) {
    throw Error(Code::kInvalidArgument, what + ": the stack given differs from the exported layer's");
  }
  ImportOptions one = options;
  one.role = options.role.empty() ? header.role : options.role;
  one.parent = header.parent;
  one.stack = header.stack;
  // The header's name is restored only where it is free here: an import never moves a local name.
  if (one.name.empty() && !header.name.empty() && !sys::read_file_if_exists(dir_ + "/names/" + header.name)) {
    one.name = header.name;
  }
  std::string label = path;
  if (!header.source.empty()) label += " (exported from " + header.source.substr(0, 512) + ")";

  ImportResult& result = *out;
  bool existed = false;
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) throw_errno(what);
  result.layers.push_back(import_one(label, one, &existed, [&](FsTree& t, BlobBuilder& b) {
    auto in = open_decompressing(path);
    bool marker = false;
    import_tar(*in, path, t, b, /*oci_whiteouts=*/false, options.progress, static_cast<uint64_t>(st.st_size), &marker);
    if (!marker) throw Error(Code::kDataLoss, what + ": the file is truncated (no end-of-archive marker)");
    drain(*in);  // a compressed stream's checksum is checked at its end
  }, header.digest));
  result.existed.push_back(existed);
  if (existed && !one.name.empty()) {
    FileLock lock(dir_ + "/lock");
    sys::write_file_atomic(dir_ + "/names/" + one.name, result.layers.back().digest + "\n", 0644);
  }
  auto missing = [&](const std::string& below) {
    if (std::find(result.missing.begin(), result.missing.end(), below) != result.missing.end()) return;
    if (is_store_ref(below) ? !find(below) : !is_dir(below)) result.missing.push_back(below);
  };
  if (!header.parent.empty()) missing(header.parent);
  for (const auto& below : header.stack) missing(below);
  return true;
}

}  // namespace sandlet::image
