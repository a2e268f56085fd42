#include "runtime/audit/audit_text.hpp"

#include <unistd.h>

#include <boost/json.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>

#include "common/error.hpp"
#include "sys/fs_util.hpp"

namespace json = boost::json;

namespace sandlet {
namespace {

// Length of the valid UTF-8 sequence at s[i] (0 when invalid).
size_t utf8_len(std::string_view s, size_t i) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = b(i);
  if (c < 0x80) return 1;
  size_t n = c >= 0xf0 && c <= 0xf4 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 && c < 0xe0 ? 2 : 0;
  if (n == 0 || (c >= 0xf0 && n != 4) || i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k)
    if ((b(i + k) & 0xc0) != 0x80) return 0;
  const unsigned char c1 = b(i + 1);
  if (c == 0xe0 && c1 < 0xa0) return 0;   // overlong
  if (c == 0xed && c1 >= 0xa0) return 0;  // surrogates
  if (c == 0xf0 && c1 < 0x90) return 0;   // overlong
  if (c == 0xf4 && c1 >= 0x90) return 0;  // beyond U+10FFFF
  return n;
}

// What audit_utf8 would return unchanged: valid UTF-8 within `max` bytes (the common case, checked
// without a copy).
bool audit_clean(std::string_view s, size_t max) {
  if (s.size() > max) return false;
  for (size_t i = 0; i < s.size();) {
    if (static_cast<unsigned char>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    const size_t n = utf8_len(s, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

void cap_value(json::value& v, bool* cut);

void cap_object(json::object& o, bool* cut) {
  for (auto& kv : o) cap_value(kv.value(), cut);
}

void cap_value(json::value& v, bool* cut) {
  if (v.is_string()) {
    json::string& s = v.get_string();
    if (audit_clean(std::string_view(s.data(), s.size()), kAuditMaxString)) return;
    std::string fixed = audit_utf8(std::string_view(s.data(), s.size()), kAuditMaxString, cut);
    if (fixed.size() != s.size() || fixed != std::string_view(s.data(), s.size())) s = fixed;
  } else if (v.is_array()) {
    json::array& a = v.get_array();
    if (a.size() > kAuditMaxArray) {
      a.resize(kAuditMaxArray);
      *cut = true;
    }
    for (auto& e : a) cap_value(e, cut);
  } else if (v.is_object()) {
    json::object& o = v.get_object();
    // Keys too: a key that is not valid UTF-8 would make the line unreadable. Rebuilt only if one is.
    const bool keys_clean = std::all_of(o.begin(), o.end(), [](const json::key_value_pair& kv) {
      return audit_clean(std::string_view(kv.key().data(), kv.key().size()), kAuditMaxString);
    });
    if (keys_clean) {
      cap_object(o, cut);
      return;
    }
    json::object fixed;
    for (auto& kv : o)
      fixed[audit_utf8(std::string_view(kv.key().data(), kv.key().size()), kAuditMaxString, cut)] = std::move(kv.value());
    o = std::move(fixed);
    cap_object(o, cut);
  }
}

}  // namespace

std::string audit_time(double unix_seconds) {
  double whole = std::floor(unix_seconds);
  time_t t = static_cast<time_t>(whole);
  long us = std::lround((unix_seconds - whole) * 1e6);
  if (us >= 1000000) {
    ++t;
    us -= 1000000;
  }
  struct tm tm;
  ::gmtime_r(&t, &tm);
  char buf[96];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%06ldZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                tm.tm_hour, tm.tm_min, tm.tm_sec, us);
  return buf;
}

std::string audit_utf8(std::string_view text, size_t max, bool* cut) {
  std::string out;
  out.reserve(std::min(text.size(), max));
  for (size_t i = 0; i < text.size();) {
    size_t n = utf8_len(text, i);
    const std::string_view piece = n ? text.substr(i, n) : std::string_view("\xef\xbf\xbd", 3);
    if (out.size() + piece.size() > max) {
      *cut = true;
      break;
    }
    out.append(piece);
    i += n ? n : 1;
  }
  return out;
}

std::string audit_line(const char* event, const std::string& sandbox, const std::map<std::string, std::string>& labels,
                       json::object fields, bool* cut) {
  json::object rec;
  rec["ts"] = audit_time(sys::now_unix_seconds());
  rec["event"] = event;
  rec["sandbox"] = sandbox;
  json::object l;
  for (const auto& [k, v] : labels) l[k] = v;
  rec["labels"] = std::move(l);
  rec["pid"] = static_cast<int64_t>(::getpid());
  for (auto& kv : fields)
    if (!rec.contains(kv.key())) rec[kv.key()] = std::move(kv.value());  // the common fields are the log's
  json::value whole(std::move(rec));
  cap_value(whole, cut);
  std::string line = json::serialize(whole);
  if (line.size() + 1 > kAuditMaxLine) {
    // Still too long (many long fields): keep the common fields and say what was dropped.
    json::object& o = whole.get_object();
    json::object small;
    for (const char* k : {"ts", "event", "sandbox", "labels", "pid"}) small[k] = o[k];
    small["truncated"] = true;
    small["dropped"] = "the event's fields exceeded the line cap";
    *cut = true;
    line = json::serialize(small);
  } else if (*cut) {
    whole.get_object()["truncated"] = true;
    line = json::serialize(whole);
  }
  line += '\n';
  return line;
}

void write_line(int fd, const std::string& line) {
  for (;;) {
    ssize_t n = ::write(fd, line.data(), line.size());
    if (n == static_cast<ssize_t>(line.size())) return;
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw_errno("write the audit log");
    // A short append (the disk is full): end the fragment so that the next line starts clean; readers skip it.
    (void)!::write(fd, "\n", 1);
    throw Error(Code::kResourceExhausted, "short write to the audit log");
  }
}

}  // namespace sandlet
