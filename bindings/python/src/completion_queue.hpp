// Hands completions from the library's event-loop thread to Python without ever taking the GIL there.
//
// Library callbacks push plain C++ values (results, errors, output chunks, new sandboxes) into a queue and
// bump an eventfd. Python watches the eventfd (asyncio: loop.add_reader) or blocks on it with the GIL
// released (synchronous streaming), then drains the queue and turns the values into Python objects on its
// own thread. So thousands of in-flight operations cost the event-loop thread a mutex and a write(2) each.
#pragma once
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <variant>
#include <vector>

#include "sandlet/sandlet.hpp"

namespace sandlet_py {

// What a completion carries; the kind tells Python how to treat it (see COMPLETION_* in _sandlet.pyi).
enum class CompletionKind : int {
  kDone = 0, kResult = 1, kError = 2, kOutput = 3, kSandbox = 4, kFile = 5, kBuildEvent = 6, kJson = 7, kFork = 8
};

struct ErrorInfo {
  int code = 0;
  std::string message;
  int err_no = 0;
  static ErrorInfo from(const sandlet::Error& e) { return {static_cast<int>(e.code()), e.what(), e.err_no()}; }
};

struct OutputChunk {
  int stream = 0;
  std::string data;
};

struct FileData {
  std::string data;
  uint32_t mode = 0;
};

// A build's progress event (sandlet::BuildEvent with its views copied).
struct BuildEventData {
  uint32_t step = 0, steps = 0, line = 0;
  std::string text;
  bool cached = false;
  int stream = 0;
  std::string data;
};

// A JSON document (a build's or a snapshot's result).
struct JsonText {
  std::string text;
};

// A fork's outcome: the snapshot result JSON, and per child a sandbox or the error it failed with.
struct ForkData {
  std::string snapshot_json;
  std::vector<std::shared_ptr<sandlet::Sandbox>> children;  // nullptr where that child failed
  std::vector<ErrorInfo> errors;                            // code 0 where that child is ready
  static ForkData from(sandlet::ForkResult r) {
    ForkData d;
    d.snapshot_json = std::move(r.snapshot_json);
    for (size_t i = 0; i < r.children.size(); ++i) {
      d.children.push_back(r.children[i] ? std::make_shared<sandlet::Sandbox>(std::move(r.children[i])) : nullptr);
      d.errors.push_back({static_cast<int>(r.codes[i]), r.errors[i], r.err_nos[i]});
    }
    return d;
  }
};

using Payload = std::variant<std::monostate, sandlet::ExecResult, ErrorInfo, OutputChunk,
                             std::shared_ptr<sandlet::Sandbox>, FileData, BuildEventData, JsonText, ForkData>;

struct Completion {
  uint64_t token = 0;
  CompletionKind kind = CompletionKind::kDone;
  Payload payload;
};

class CompletionQueue final {
 public:
  CompletionQueue();  // throws sandlet::Error when no eventfd can be made
  ~CompletionQueue();
  CompletionQueue(const CompletionQueue&) = delete;
  CompletionQueue& operator=(const CompletionQueue&) = delete;

  int fd() const noexcept { return efd_; }
  // Any thread; never blocks beyond a mutex; never throws (a completion lost to OOM would hang an awaiter,
  // so allocation failure is the one case that terminates — the same as any std::vector growth).
  void push(Completion c) noexcept;
  // Takes everything queued and resets the eventfd. Non-blocking.
  std::vector<Completion> take();
  // Blocks until something is queued, `timeout_ms` passes (< 0: no limit) or a signal arrives. The caller
  // releases the GIL.
  void wait_readable(int timeout_ms) const;

 private:
  int efd_ = -1;
  std::mutex mu_;
  std::vector<Completion> items_;
};

}  // namespace sandlet_py
