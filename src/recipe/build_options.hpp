// What a build is asked to do, and the progress events it reports (builder.hpp runs it).
#pragma once
#include <atomic>
#include <cstddef>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "spec/network_spec.hpp"

namespace sandlet::build {

// One progress event: a step begins (stream 0; `text` is the instruction, `cached` says its result comes
// from the cache), or a chunk of its RUN's output (stream 1 stdout, 2 stderr).
struct BuildEvent {
  size_t step = 0;   // 1-based
  size_t steps = 0;
  size_t line = 0;   // the recipe line the step starts on
  std::string_view text;
  bool cached = false;
  int stream = 0;
  std::string_view data;
};

struct BuildOptions {
  std::string recipe;   // path of the recipe file
  std::string context;  // the context directory COPY reads from
  std::string tag;      // "" = no environment; else its name (a new version each build)
  std::map<std::string, std::string> build_args;
  // `--secret` sources: "id=NAME,src=FILE" or "id=NAME,env=VAR" (secrets.hpp), read when the build starts.
  std::vector<std::string> secrets;
  // What RUN steps may reach (build_network.hpp): "none" unless given; never stored in the result.
  NetworkPolicy network;
  bool no_cache = false;
  bool default_excludes = true;  // step snapshots leave out SnapshotOptions' default excludes (/tmp/*...)
  // Called on the building thread (never the runtime's event-loop thread); must not throw.
  std::function<void(const BuildEvent&)> progress;
  int cancel_fd = -1;  // readable = cancel (CANCELLED); -1 = none
  const std::atomic<bool>* stop = nullptr;  // true = cancel (the C ABI sets it when the runtime closes)
};

}  // namespace sandlet::build
