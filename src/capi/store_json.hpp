// The JSON documents the layer-store and environment calls of the C ABI return, field by field as
// sandlet.h documents them (test/abi/json_fields_test.cpp checks the two agree). Written here, not by the
// store: the store's manifests on disk are its own format, free to hold more than the API promises.
#pragma once
#include <string>
#include <vector>

#include "image/layer_store.hpp"

namespace sandlet::capi {

std::string layer_json(const image::LayerInfo& layer);
std::string layer_list_json(const std::vector<image::LayerInfo>& layers);
std::string import_result_json(const image::ImportResult& result);
std::string export_result_json(const image::ExportResult& result);
std::string layer_gc_json(const image::GcReport& report);
std::string env_version_json(const image::EnvVersion& version);
std::string env_list_json(const std::vector<image::EnvInfo>& envs);

}  // namespace sandlet::capi
