// What /run_code (fusion.cpp) and /run_jupyter (fusion_jupyter.cpp) share: the working directory in the
// sandbox, the output cap, files in and out, and SandboxFusion's CommandRunResult.
#pragma once
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "json.hpp"
#include "sandlet/sandlet.hpp"

namespace sandlet::cli::fusion {

inline constexpr const char* kWorkdir = "/tmp/sandbox-fusion";
inline constexpr uint64_t kOutputLimit = 16u << 20;

// The request's "files" (path -> base64, decoded) and "fetch_files"; RequestError names what is wrong.
std::vector<std::pair<std::string, std::string>> parse_files(const json::bj::object& request);
std::vector<std::string> parse_fetch_files(const json::bj::object& request);
// The request's field `name` in seconds, at most an hour (and above 0 unless `zero_ok`); `dflt` when absent.
double seconds_field(const json::bj::object& request, const char* name, double dflt, bool zero_ok);
std::string base64(std::string_view bytes);
// `path` under `dir` unless absolute.
std::string path_in(const std::string& dir, const std::string& path);
// SandboxFusion's CommandRunResult of an exec (a signal N is return code -N).
json::bj::object command_run_result(const ExecResult& r);

}  // namespace sandlet::cli::fusion
