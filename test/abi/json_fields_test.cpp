// The JSON documents the layer-store and environment calls return have exactly the fields sandlet.h
// documents, with the documented types: the field tables are read from the header itself (the blocks
// "Layer object", "Import result", ... in its layer-store section), so the documentation and the library
// cannot drift apart. Runs the real calls on a throw-away runtime root (root needed: merge mounts layers).
//   abi-json-fields-test HEADER       Exit: 0 pass, 1 fail, 77 skip (not root, or no EROFS here).
#include <sys/stat.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <string>

#include "sandlet/sandlet.hpp"

namespace json = boost::json;

namespace {

int failures = 0;
void fail(const std::string& what) {
  std::fprintf(stderr, "FAIL: %s\n", what.c_str());
  ++failures;
}

using FieldTable = std::map<std::string, std::string>;  // field -> documented type

// Section title -> its fields, from the header's comment blocks:
//   * Layer object (each element of ...):
//   *   "digest"          string   the layer's content digest ...
std::map<std::string, FieldTable> documented_tables(const std::string& header_path) {
  std::ifstream in(header_path);
  if (!in) throw std::runtime_error("cannot read " + header_path);
  static const std::regex title(R"re(^ \* ([A-Z][A-Za-z ]+?) \(.*\):$)re");
  static const std::regex row(R"re(^ \*   "([a-z_]+)" +(string|number|integer|array|object|boolean) +\S.*$)re");
  static const std::regex continuation(R"(^ \* {20,}\S.*$)");
  std::map<std::string, FieldTable> out;
  std::string current, line;
  std::smatch m;
  while (std::getline(in, line)) {
    if (std::regex_match(line, m, title)) {
      current = m[1];
    } else if (!current.empty() && std::regex_match(line, m, row)) {
      out[current][m[1]] = m[2];
    } else if (!std::regex_match(line, continuation)) {
      current.clear();
    }
  }
  return out;
}

bool has_type(const json::value& v, const std::string& type) {
  if (type == "string") return v.is_string();
  if (type == "integer") return v.is_int64() || v.is_uint64();
  if (type == "number") return v.is_number();
  if (type == "array") return v.is_array();
  if (type == "object") return v.is_object();
  if (type == "boolean") return v.is_bool();
  return false;
}

// `doc` must be an object with exactly the fields of `table`, each of its documented type.
void check_object(const json::value& doc, const FieldTable& table, const std::string& what) {
  if (!doc.is_object()) {
    fail(what + " is not a JSON object: " + json::serialize(doc));
    return;
  }
  for (const auto& [key, value] : doc.as_object()) {
    auto it = table.find(std::string(key));
    if (it == table.end())
      fail(what + " has field '" + std::string(key) + "', which sandlet.h does not document");
    else if (!has_type(value, it->second))
      fail(what + "." + std::string(key) + " is " + json::serialize(value) + ", documented as " + it->second);
  }
  for (const auto& [key, type] : table) {
    if (!doc.as_object().contains(key)) fail(what + " lacks the documented field '" + key + "'");
  }
}

void check_strings(const json::value& array, const std::string& what) {
  for (const auto& v : array.as_array())
    if (!v.is_string()) fail(what + " holds a non-string: " + json::serialize(v));
}

void make_dir_with_file(const std::string& dir, const std::string& file, const std::string& content) {
  ::mkdir(dir.c_str(), 0755);
  std::ofstream(dir + "/" + file) << content;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s HEADER\n", argv[0]);
    return 2;
  }
  if (::geteuid() != 0) {
    std::printf("SKIP: the layer store's mounts need root\n");
    return 77;
  }
  const auto tables = documented_tables(argv[1]);
  for (const char* name : {"Layer object", "Import result", "Export result", "Layer gc report", "Environment object",
                           "Environment version"}) {
    if (tables.count(name) == 0 || tables.at(name).empty()) {
      std::fprintf(stderr, "FAIL: sandlet.h documents no fields for \"%s\"\n", name);
      return 1;
    }
  }
  const FieldTable& layer = tables.at("Layer object");
  const FieldTable& version = tables.at("Environment version");

  char root_template[] = "/tmp/sandlet-abi-json-XXXXXX";
  if (!::mkdtemp(root_template)) return 1;
  const std::string root = root_template;
  int rc = 0;
  try {
    sandlet::RuntimeOptions options;
    options.disable_warm_pool = true;
    auto rt = sandlet::Runtime::open(root + "/state", options);
    make_dir_with_file(root + "/a", "a", "layer a\n");
    make_dir_with_file(root + "/b", "b", "layer b\n");
    // Large enough to be stored in a data blob, not inline in the metadata.
    make_dir_with_file(root + "/unused", "data", std::string(256 << 10, 'u'));

    sandlet::LayerImportOptions named;
    named.name = "layer-a";
    json::value imported = json::parse(rt.layer_import(root + "/a", named));
    check_object(imported, tables.at("Import result"), "sandlet_layer_import's result");
    for (const auto& l : imported.at("layers").as_array()) check_object(l, layer, "an imported layer");
    for (const auto& e : imported.at("existed").as_array())
      if (!e.is_bool()) fail("import \"existed\" holds a non-boolean");
    const std::string a = std::string(imported.at("layers").at(0).at("digest").as_string());
    const std::string b =
        std::string(json::parse(rt.layer_import(root + "/b")).at("layers").at(0).at("digest").as_string());
    rt.layer_import(root + "/unused");

    json::value inspected = json::parse(rt.layer_inspect("layer-a"));
    check_object(inspected, layer, "sandlet_layer_inspect's layer");
    check_strings(inspected.at("blobs"), "a layer's \"blobs\"");
    json::value merged = json::parse(rt.layer_merge({a, b}));
    check_object(merged, layer, "sandlet_layer_merge's layer");
    json::value exported = json::parse(rt.layer_export("layer-a", root + "/a.tar"));
    check_object(exported, tables.at("Export result"), "sandlet_layer_export's result");
    json::value reimported = json::parse(rt.layer_import(root + "/a.tar"));
    check_object(reimported, tables.at("Import result"), "sandlet_layer_import's result for an exported file");
    if (reimported.at("layers").at(0).at("digest") != json::value(a)) fail("an exported layer re-imported under another digest");
    json::value listed = json::parse(rt.layer_list());
    if (!listed.is_array() || listed.as_array().size() != 4) fail("sandlet_layer_list: expected 4 layers: " + json::serialize(listed));
    for (const auto& l : listed.as_array()) check_object(l, layer, "a listed layer");

    json::value created = json::parse(rt.env_create("env-a", {a, b}, R"({"env":{"K":"V"},"workdir":"/w"})"));
    check_object(created, version, "sandlet_env_create's version");
    check_strings(created.at("layers"), "an environment version's \"layers\"");
    json::value envs = json::parse(rt.env_list());
    if (!envs.is_array() || envs.as_array().size() != 1) fail("sandlet_env_list: expected 1 environment");
    for (const auto& e : envs.as_array()) {
      check_object(e, tables.at("Environment object"), "a listed environment");
      for (const auto& v : e.at("versions").as_array()) check_object(v, version, "a listed environment's version");
    }

    // The unused layer and the merged one (nothing refers to it) go; so does their data.
    json::value report = json::parse(rt.layer_gc());
    check_object(report, tables.at("Layer gc report"), "sandlet_layer_gc's report");
    if (report.at("removed_layers").as_array().size() != 2) fail("layer gc: expected 2 removed layers: " + json::serialize(report));
    check_strings(report.at("removed_layers"), "gc's \"removed_layers\"");
    check_strings(report.at("removed_blobs"), "gc's \"removed_blobs\"");
    if (report.at("removed_blobs").as_array().empty()) fail("layer gc: expected the unused layer's blob removed");
    rt.env_remove("env-a");
  } catch (const sandlet::Error& e) {
    if (e.code() == SANDLET_UNIMPLEMENTED) {
      std::printf("SKIP: %s\n", e.what());
      rc = 77;
    } else {
      fail(std::string("[") + e.code_name() + "] " + e.what());
    }
  } catch (const std::exception& e) {
    fail(e.what());
  }
  std::system(("rm -rf --one-file-system " + root).c_str());
  if (rc == 0 && failures == 0) std::printf("OK: every returned document matches sandlet.h's field tables\n");
  return failures ? 1 : rc;
}
