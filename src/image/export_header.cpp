#include "image/export_header.hpp"

#include <boost/json.hpp>

#include <algorithm>

#include "common/error.hpp"
#include "image/byte_reader.hpp"
#include "image/tar_reader.hpp"

namespace json = boost::json;

namespace sandlet::image {

namespace {

constexpr const char* kFormatKey = "SANDLET.format";
constexpr const char* kLayerKey = "SANDLET.layer";
constexpr size_t kMaxField = 4096;

bool is_digest(const std::string& s) {
  return s.size() == 64 &&
         std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

std::string field(const json::object& o, const char* key, const std::string& where) {
  const json::value* v = o.if_contains(key);
  if (!v) return "";
  if (!v->is_string() || v->as_string().size() > kMaxField)
    throw Error(Code::kInvalidArgument, where + ": \"" + key + "\" is not a string of at most 4096 bytes");
  return std::string(v->as_string());
}

}  // namespace

std::vector<std::pair<std::string, std::string>> export_header_records(const LayerInfo& l) {
  json::object o{{"digest", l.digest}, {"role", l.role},     {"name", l.name},
                 {"parent", l.parent}, {"stack", json::value_from(l.stack)}, {"source", l.source}};
  return {{kFormatKey, std::to_string(kExportFormat)}, {kLayerKey, json::serialize(o)}};
}

std::optional<ExportHeader> read_export_header(const std::string& path) {
  std::unique_ptr<ByteReader> in;
  try {
    in = open_decompressing(path);
  } catch (const Error&) {
    return std::nullopt;  // not readable as a stream: the caller's other importers report what it is
  }
  TarReader tar(*in, path);
  std::map<std::string, std::string> globals;
  try {
    TarEntry first;
    tar.next(first);  // reads the global header and the member after it
  } catch (const Error&) {
    // A damaged file that carries the header is an export: say what is wrong with it.
    if (tar.global_records().count(kFormatKey)) throw;
    return std::nullopt;
  }
  globals = tar.global_records();
  auto fmt = globals.find(kFormatKey);
  if (fmt == globals.end()) return std::nullopt;
  const std::string where = "import " + path + ": exported layer header";
  ExportHeader h;
  if (fmt->second != std::to_string(kExportFormat)) {
    if (fmt->second.size() < 6 && std::all_of(fmt->second.begin(), fmt->second.end(), ::isdigit))
      throw Error(Code::kUnimplemented, where + ": format " + fmt->second + " is newer than this sandlet reads (" +
                                            std::to_string(kExportFormat) + ")");
    throw Error(Code::kInvalidArgument, where + ": malformed " + kFormatKey + " record");
  }
  auto rec = globals.find(kLayerKey);
  if (rec == globals.end()) throw Error(Code::kInvalidArgument, where + ": no " + std::string(kLayerKey) + " record");
  if (rec->second.size() > kMaxHeaderJson) throw Error(Code::kInvalidArgument, where + ": layer record larger than 256 KiB");
  boost::system::error_code ec;
  json::value v = json::parse(rec->second, ec);
  if (ec || !v.is_object()) throw Error(Code::kInvalidArgument, where + ": the layer record is not a JSON object");
  const json::object& o = v.as_object();
  h.digest = field(o, "digest", where);
  h.role = field(o, "role", where);
  h.name = field(o, "name", where);
  h.parent = field(o, "parent", where);
  h.source = field(o, "source", where);
  if (!is_digest(h.digest)) throw Error(Code::kInvalidArgument, where + ": \"digest\" is not 64 lowercase hex digits");
  check_role(h.role, where + ": role");
  if (!h.name.empty()) check_layer_name(h.name, where + ": name");
  if (!h.parent.empty() && !is_digest(h.parent))
    throw Error(Code::kInvalidArgument, where + ": \"parent\" is not a digest");
  if (const json::value* st = o.if_contains("stack")) {
    if (!st->is_array() || st->as_array().size() > kMaxStackEntries)
      throw Error(Code::kInvalidArgument, where + ": \"stack\" is not an array of at most 1024 entries");
    for (const auto& e : st->as_array()) {
      if (!e.is_string()) throw Error(Code::kInvalidArgument, where + ": a \"stack\" entry is not a string");
      std::string s(e.as_string());
      // Only store digests: a host directory (a snapshot of a sandbox on host directories) names a path of
      // the machine it was made on, and the file is hostile input: a restore would stack that path here.
      if (!is_digest(s)) {
        if (!s.empty() && s[0] == '/')
          throw Error(Code::kInvalidArgument, where + ": the layer goes on a host directory of the machine it was "
                                                      "made on, which cannot be imported (snapshot sandboxes on store layers)");
        throw Error(Code::kInvalidArgument, where + ": a \"stack\" entry is not a digest");
      }
      h.stack.push_back(std::move(s));
    }
  }
  return h;
}

}  // namespace sandlet::image
