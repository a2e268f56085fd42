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

// The sandbox of one request: made from `spec` with the working directory and the request's files in it
// (a relative path is under kWorkdir), destroyed when the request is answered.
class RequestSandbox final {
 public:
  RequestSandbox(Runtime& rt, const Spec& spec, const std::vector<std::pair<std::string, std::string>>& files);
  ~RequestSandbox();
  RequestSandbox(const RequestSandbox&) = delete;
  RequestSandbox& operator=(const RequestSandbox&) = delete;

  Sandbox& sandbox() { return sb_; }
  // The files asked back, base64; one the code did not make is left out, as SandboxFusion does.
  json::bj::object fetch(const std::vector<std::string>& paths);

 private:
  void destroy_quietly() noexcept;
  Sandbox sb_;
};
// SandboxFusion's CommandRunResult of an exec (a signal N is return code -N).
json::bj::object command_run_result(const ExecResult& r);

}  // namespace sandlet::cli::fusion
