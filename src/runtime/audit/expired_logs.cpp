// ExpiredLogs (expired_logs.hpp). The tombstone's mtime is its keep_until, so that gc (which runs at every
// runtime open) finds the ones to remove with a stat each; forget removes one at once.
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <algorithm>
#include <deque>
#include <optional>

#include "common/error.hpp"
#include "runtime/audit/audit_reader.hpp"
#include "runtime/audit/audit_records.hpp"
#include "runtime/audit/audit_text.hpp"
#include "runtime/agent/output_log.hpp"
#include "runtime/audit/expired_logs.hpp"
#include "sys/fs_util.hpp"

namespace json = boost::json;

namespace sandlet {
namespace {

constexpr size_t kAuditRecordsShown = 64;  // the last ones of the sandbox, in `logs`
constexpr const char* kTombstoneSuffix = ".json";

std::string expired_dir(const std::string& root) { return root + "/expired"; }
std::string tombstone_path(const std::string& root, const std::string& id) {
  return expired_dir(root) + "/" + id + kTombstoneSuffix;
}

json::object labels_object(const std::map<std::string, std::string>& labels) {
  json::object o;
  for (const auto& [k, v] : labels) o[k] = v;
  return o;
}

// The tombstone at `path` (nullopt when there is none or it is damaged; either way gc removes it at its mtime).
std::optional<json::object> read_tombstone(const std::string& path) {
  std::string text;
  try {
    text = sys::read_file(path);
  } catch (const Error&) {
    return std::nullopt;
  }
  json::error_code ec;
  json::value v = json::parse(text, ec);
  if (ec || !v.is_object()) return std::nullopt;
  return std::move(v.as_object());
}

// Until when the tombstone at `path` is kept (its mtime); 0 when there is none.
double kept_until(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return 0;
  return static_cast<double>(st.st_mtim.tv_sec) + static_cast<double>(st.st_mtim.tv_nsec) / 1e9;
}

// The tombstone ids under <root>/expired.
std::vector<std::string> tombstone_ids(const std::string& root) {
  std::vector<std::string> ids;
  DIR* d = ::opendir(expired_dir(root).c_str());
  if (!d) return ids;
  while (dirent* e = ::readdir(d)) {
    std::string name = e->d_name;
    const size_t suffix = std::string(kTombstoneSuffix).size();
    if (name.size() <= suffix || name.compare(name.size() - suffix, suffix, kTombstoneSuffix) != 0) continue;
    std::string id = name.substr(0, name.size() - suffix);
    if (SandboxDirs::valid_id(id)) ids.push_back(std::move(id));
  }
  ::closedir(d);
  std::sort(ids.begin(), ids.end());
  return ids;
}

}  // namespace

std::string ExpiredLogs::output_log_path(const std::string& id) const {
  return dirs_.dir(id) + "/" + output_log::kFileName;
}

void ExpiredLogs::keep(const SandboxRecord& rec, const char* reason) noexcept {
  try {
    const double now = sys::now_unix_seconds();
    json::object t;
    t["id"] = rec.id;
    t["backend"] = rec.backend;
    t["environment"] = rec.environment;
    t["labels"] = labels_object(rec.spec.labels);
    t["created_at"] = audit_time(rec.created_at);
    t["ended_at"] = audit_time(now);
    t["reason"] = reason;
    t["keep_until"] = audit_time(now + rec.spec.keep_s);
    t["last_output"] = output_log::read_last(output_log_path(rec.id));
    ::mkdir(expired_dir(root_).c_str(), 0700);
    const std::string path = tombstone_path(root_, rec.id);
    sys::write_file_atomic(path, json::serialize(t) + "\n");
    const double until = now + rec.spec.keep_s;
    struct timespec times[2];
    times[0].tv_sec = static_cast<time_t>(until);
    times[0].tv_nsec = static_cast<long>((until - static_cast<double>(times[0].tv_sec)) * 1e9);
    times[1] = times[0];
    if (::utimensat(AT_FDCWD, path.c_str(), times, 0) != 0) ::unlink(path.c_str());  // else gc would drop it early
  } catch (...) {
    // Its audit trail still says how it ended; only the last output is lost.
  }
}

size_t ExpiredLogs::sweep(double now) noexcept {
  size_t removed = 0;
  for (const std::string& id : tombstone_ids(root_)) {
    const std::string path = tombstone_path(root_, id);
    if (kept_until(path) > now) continue;
    if (::unlink(path.c_str()) == 0) ++removed;
  }
  return removed;
}

std::string ExpiredLogs::logs_json(const std::string& id) const {
  if (!SandboxDirs::valid_id(id)) throw Error(Code::kInvalidArgument, "invalid sandbox id '" + id + "'");
  json::object out;
  if (std::optional<SandboxRecord> rec = dirs_.load(id)) {
    out["id"] = id;
    out["state"] = live_state_(*rec);
    out["backend"] = rec->backend;
    out["environment"] = rec->environment;
    out["labels"] = labels_object(rec->spec.labels);
    out["created_at"] = audit_time(rec->created_at);
    out["on_expiry"] = on_expiry_name(rec->spec.on_expiry);
    out["last_output"] = output_log::read_last(output_log_path(id));
  } else if (std::optional<json::object> t = kept_until(tombstone_path(root_, id)) > sys::now_unix_seconds()
                                                   ? read_tombstone(tombstone_path(root_, id))
                                                   : std::nullopt) {
    out["id"] = id;
    out["state"] = "expired";
    out["on_expiry"] = "keep_logs";
    for (auto& kv : *t)
      if (kv.key() != "id") out[kv.key()] = std::move(kv.value());
  } else {
    throw Error(Code::kNotFound, "no sandbox '" + id + "' and no logs kept of one under " + root_);
  }
  // Its audit trail, as far back as the audit log's rotated files reach.
  std::deque<json::value> records;
  AuditReader reader(audit_->path(), AuditFilter{id, {}, 0});
  std::string line;
  while (reader.next(&line)) {
    json::error_code ec;
    json::value v = json::parse(line, ec);
    if (ec) continue;
    records.push_back(std::move(v));
    if (records.size() > kAuditRecordsShown) records.pop_front();
  }
  json::array audit;
  for (auto& r : records) audit.push_back(std::move(r));
  out["audit"] = std::move(audit);
  return json::serialize(out);
}

std::string ExpiredLogs::expired_json() const {
  json::array out;
  const double now = sys::now_unix_seconds();
  for (const std::string& id : tombstone_ids(root_)) {
    const std::string path = tombstone_path(root_, id);
    if (kept_until(path) <= now) continue;  // gc's to remove
    std::optional<json::object> t = read_tombstone(path);
    if (!t) continue;
    json::object summary{{"id", id}, {"state", "expired"}};
    for (auto& kv : *t)
      if (kv.key() != "id" && kv.key() != "last_output") summary[kv.key()] = std::move(kv.value());
    out.push_back(std::move(summary));
  }
  return json::serialize(out);
}

void ExpiredLogs::forget(const std::string& id) {
  if (!SandboxDirs::valid_id(id)) throw Error(Code::kInvalidArgument, "invalid sandbox id '" + id + "'");
  if (::unlink(tombstone_path(root_, id).c_str()) != 0) {
    if (errno == ENOENT) throw Error(Code::kNotFound, "no logs kept of a sandbox '" + id + "' under " + root_);
    throw Error(Code::kInternal, "removing the kept logs of " + id, errno);
  }
}

}  // namespace sandlet
