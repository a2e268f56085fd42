// The SandboxFusion API's `/run_code` over sandlet (the engine of `sandlet serve --sandbox-fusion`; the
// Python package's sandlet.sandbox_fusion is the same service for Python hosts, and both pass one test
// suite). A request is JSON in, JSON out; everything here is blocking (one thread per request).
#pragma once
#include <map>
#include <string>

#include "json.hpp"
#include "sandlet/sandlet.hpp"

namespace sandlet::cli::fusion {

// A malformed request: HTTP 400 with this message, which names the field.
class RequestError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct Service {
  Runtime* rt = nullptr;
  std::map<std::string, std::string> specs;  // language -> the spec JSON of its sandboxes
  bool pooled = true;                       // false: a fresh sandbox per request (the benchmark's peer)
};

// The languages this engine knows ("bash", "cpp", "python").
bool known_language(const std::string& name);
// Answers one /run_code request (SandboxFusion's RunCodeResponse). Throws RequestError for bad input;
// a sandbox failure is an answer with status "SandboxError".
json::bj::value run_code(const Service& svc, const json::bj::value& request);
// Answers one /run_jupyter request (SandboxFusion's RunJupyterResponse; fusion_jupyter.cpp): the cells run in
// one python3 process in a sandbox of the "python" language's spec.
json::bj::value run_jupyter(const Service& svc, const json::bj::value& request);

}  // namespace sandlet::cli::fusion
