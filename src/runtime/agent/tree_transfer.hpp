// Moving a directory tree over one agent connection (proto/tree_protocol.hpp): the host streams a source's
// entries and data to a put-tree, or hands what a get-tree sends to a sink. Blocking, on the caller's
// thread (not the event loop: a large tree is disk work on the host too), with the socket as the flow
// control. Everything the agent sends is checked before the sink sees it: frame sizes (the one frame
// reader), entry fields, the order of entries and data, the caps on bytes and entries.
#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

#include "proto/agent_protocol.hpp"
#include "sys/fd.hpp"

namespace sandlet {

struct TreeCopyStats {
  uint64_t entries = 0;
  uint64_t bytes = 0;    // file data
  uint64_t skipped = 0;  // sockets and device nodes left out
};

// Called after each entry and every few MiB of data, on the copying thread.
using TreeProgress = std::function<void(const TreeCopyStats&)>;

// Where a copy's entries come from (a host directory, a tar stream). Errors are thrown (Error).
class TreeSource {
 public:
  virtual ~TreeSource() = default;
  // The next entry in pre-order; false at the end.
  virtual bool next(proto::TreeEntry* out) = 0;
  // The current file entry's data: up to n bytes, 0 once its size was returned.
  virtual size_t read(char* buf, size_t n) = 0;
  virtual uint64_t skipped() const { return 0; }
};

// Where a copy's entries go (a host directory, a tar stream). Errors are thrown (Error).
class TreeSink {
 public:
  virtual ~TreeSink() = default;
  virtual void entry(const proto::TreeEntry& e) = 0;
  virtual void data(const char* p, size_t n) = 0;
  virtual void finish() = 0;
  virtual uint64_t skipped() const { return 0; }  // entries it left out itself
};

struct TreeLimits {
  uint64_t max_bytes = 8ull << 30;    // file data a get-tree may bring to the host
  uint64_t max_entries = 1u << 20;
  std::chrono::seconds idle{120};     // the agent moving nothing for this long: DEADLINE_EXCEEDED
};

// Sends `req` and then every entry of `source`; returns what the agent reports once it applied them.
TreeCopyStats send_tree(sys::UniqueFd conn, const proto::PutTreeRequest& req, TreeSource& source,
                        const TreeLimits& limits, const TreeProgress& progress);
// Sends `req` and feeds what comes back to `sink` (sink.finish() once the agent reports the end).
TreeCopyStats receive_tree(sys::UniqueFd conn, const proto::GetTreeRequest& req, TreeSink& sink,
                           const TreeLimits& limits, const TreeProgress& progress);

}  // namespace sandlet
