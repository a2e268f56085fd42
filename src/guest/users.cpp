#include "guest/users.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>

namespace sandlet::guest {
namespace {

constexpr size_t kMaxDbFile = 16u << 20;  // a larger passwd/group file is not read

bool parse_id(std::string_view s, uint32_t* out) {
  if (s.empty() || s.size() > 10) return false;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  if (v >= 0xffffffffu) return false;  // (uid_t)-1 means "unchanged" to the kernel
  *out = static_cast<uint32_t>(v);
  return true;
}

// Splits one colon-separated line into at most n fields; returns the number found.
size_t split_fields(std::string_view line, std::string_view* f, size_t n) {
  size_t count = 0, start = 0;
  while (count < n) {
    size_t colon = line.find(':', start);
    if (colon == std::string_view::npos) {
      f[count++] = line.substr(start);
      break;
    }
    f[count++] = line.substr(start, colon - start);
    start = colon + 1;
  }
  return count;
}

// Calls fn(fields, count) for every non-comment line until fn returns true.
template <typename Fn>
bool for_each_entry(const std::string& content, size_t nfields, Fn fn) {
  std::string_view rest(content);
  while (!rest.empty()) {
    size_t nl = rest.find('\n');
    std::string_view line = rest.substr(0, nl);
    rest = nl == std::string_view::npos ? std::string_view() : rest.substr(nl + 1);
    if (line.empty() || line[0] == '#') continue;
    std::string_view f[7];
    size_t n = split_fields(line, f, nfields);
    if (n < nfields) continue;
    if (fn(f)) return true;
  }
  return false;
}

bool member_of(std::string_view members, std::string_view name) {
  while (!members.empty()) {
    size_t comma = members.find(',');
    std::string_view m = members.substr(0, comma);
    if (m == name) return true;
    if (comma == std::string_view::npos) break;
    members = members.substr(comma + 1);
  }
  return false;
}

}  // namespace

bool UserDb::refresh(File* f) {
  struct stat st;
  if (stat(f->path.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > static_cast<off_t>(kMaxDbFile)) {
    bool changed = f->size != -1;
    f->content.clear();
    f->size = -1;
    return changed;
  }
  if (f->size == st.st_size && f->dev == st.st_dev && f->ino == st.st_ino &&
      f->mtime_sec == st.st_mtim.tv_sec && f->mtime_nsec == st.st_mtim.tv_nsec)
    return false;
  f->content.clear();
  int fd = open(f->path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY);
  if (fd >= 0) {
    char buf[8192];
    ssize_t n;
    while ((n = read(fd, buf, sizeof buf)) > 0 && f->content.size() < kMaxDbFile)
      f->content.append(buf, static_cast<size_t>(n));
    close(fd);
  }
  f->dev = st.st_dev;
  f->ino = st.st_ino;
  f->size = st.st_size;
  f->mtime_sec = st.st_mtim.tv_sec;
  f->mtime_nsec = st.st_mtim.tv_nsec;
  return true;
}

Status UserDb::resolve(std::string_view spec, Identity* out) {
  bool changed = refresh(&passwd_);
  changed = refresh(&group_) || changed;
  if (changed) cache_valid_ = false;
  if (cache_valid_ && spec == cached_spec_) {
    *out = cached_;
    return Status::Ok();
  }

  std::string_view user_part = spec, group_part;
  bool has_group = false;
  if (size_t colon = spec.find(':'); colon != std::string_view::npos) {
    user_part = spec.substr(0, colon);
    group_part = spec.substr(colon + 1);
    has_group = true;
  }
  if (user_part.empty()) user_part = "0";
  if (has_group && group_part.empty())
    return make_status(SANDLET_INVALID_ARGUMENT, 0, "invalid user \"" + std::string(spec) + "\": empty group");

  Identity id;
  uint32_t num = 0;
  bool numeric = parse_id(user_part, &num);
  bool found = for_each_entry(passwd_.content, 7, [&](std::string_view* f) {
    uint32_t uid = 0, gid = 0;
    if (!parse_id(f[2], &uid) || !parse_id(f[3], &gid)) return false;
    if (numeric ? uid != num : f[0] != user_part) return false;
    id.uid = uid;
    id.gid = gid;
    id.name = std::string(f[0]);
    id.home = f[5].empty() ? "/" : std::string(f[5]);
    return true;
  });
  if (!found) {
    if (!numeric)
      return make_status(SANDLET_NOT_FOUND, ENOENT, "user \"" + std::string(user_part) + "\" not found in /etc/passwd");
    id.uid = num;
    id.gid = 0;  // Docker's choice for a bare numeric uid without a passwd entry
  }

  if (has_group) {
    uint32_t gnum = 0;
    if (parse_id(group_part, &gnum)) {
      id.gid = gnum;
    } else {
      bool gfound = for_each_entry(group_.content, 4, [&](std::string_view* f) {
        uint32_t gid = 0;
        if (f[0] != group_part || !parse_id(f[2], &gid)) return false;
        id.gid = gid;
        return true;
      });
      if (!gfound)
        return make_status(SANDLET_NOT_FOUND, ENOENT, "group \"" + std::string(group_part) + "\" not found in /etc/group");
    }
  }

  id.groups.push_back(id.gid);
  // An explicit group replaces the memberships (as runc does); otherwise add them.
  if (!has_group && !id.name.empty()) {
    for_each_entry(group_.content, 4, [&](std::string_view* f) {
      uint32_t gid = 0;
      if (parse_id(f[2], &gid) && gid != id.gid && member_of(f[3], id.name) && id.groups.size() < 256)
        id.groups.push_back(gid);
      return false;
    });
  }

  cached_spec_.assign(spec);
  cached_ = id;
  cache_valid_ = true;
  *out = std::move(id);
  return Status::Ok();
}

}  // namespace sandlet::guest
