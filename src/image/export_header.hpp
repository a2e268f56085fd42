// The header of an exported layer file: the first member of the tar is a pax global header with
//   SANDLET.format=<version>      this file format's version (kExportFormat)
//   SANDLET.layer=<json>          {"digest","role","name","parent","stack","source"} of the layer
// Everything read back is untrusted input: sizes and fields are checked before use.
#pragma once
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "image/layer_store.hpp"

namespace sandlet::image {

inline constexpr int kExportFormat = 1;
inline constexpr size_t kMaxHeaderJson = 256 << 10;
inline constexpr size_t kMaxStackEntries = 1024;

struct ExportHeader {
  int format = kExportFormat;
  std::string digest, role, name, parent, source;
  std::vector<std::string> stack;
};

// The global header's records for `layer`.
std::vector<std::pair<std::string, std::string>> export_header_records(const LayerInfo& layer);

// nullopt when `path` is not an exported layer (not a tar, or a tar whose first member is not such a
// header); throws (kInvalidArgument, kDataLoss, kUnimplemented for a newer format) when it is one with a
// malformed header.
std::optional<ExportHeader> read_export_header(const std::string& path);

}  // namespace sandlet::image
