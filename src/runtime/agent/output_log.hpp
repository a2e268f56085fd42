// The last output of a sandbox whose spec keeps it at its expiry (on_expiry "keep_logs" or "keep"): each
// completed exec appends one line to <sandbox dir>/output.jsonl — the exec's audit fields (argv, exit
// status, byte counts, ...) and the tail of its stdout and stderr — so that what the agent saw last
// survives the sandbox's end (the expiry tombstone, runtime/audit/expired_logs.hpp, takes the last records).
// The file is the host's (nothing inside the sandbox can reach it); its lines are still checked on read.
#pragma once
#include <boost/json/array.hpp>
#include <exception>
#include <map>
#include <string>
#include <string_view>

#include "runtime/audit/audit_records.hpp"
#include "runtime/agent/exec_outcome.hpp"

namespace sandlet::output_log {

constexpr const char* kFileName = "output.jsonl";
constexpr size_t kTailBytes = 4000;   // of each stream, per exec (under the audit line's string cut)
constexpr size_t kKeptRecords = 16;   // what a read returns, and what a compaction keeps
constexpr size_t kCompactAt = 256 * 1024;  // the file's size beyond which an append first compacts it

// The last `max` bytes of `data` (all of it when shorter).
std::string_view tail(std::string_view data, size_t max = kTailBytes);

// Keeps the last kTailBytes of a stream given chunk by chunk (a streaming exec's output).
class TailKeeper {
 public:
  void add(std::string_view chunk);
  const std::string& text() const { return text_; }

 private:
  std::string text_;
};

// Appends the record of one completed exec (or one that failed: `error` set) to `path`. Never throws:
// the exec's result matters more than its log line.
void append(const std::string& path, const std::string& sandbox, const std::map<std::string, std::string>& labels,
            const ExecAudit& audit, const ExecOutcome* outcome, std::string_view stdout_tail,
            std::string_view stderr_tail, std::exception_ptr error) noexcept;

// The last kKeptRecords records of `path`, oldest first; malformed lines are skipped; empty when the file
// is missing or unreadable.
boost::json::array read_last(const std::string& path) noexcept;

}  // namespace sandlet::output_log
