// Host directories for the `mounts` tests: made under /tmp, removed (with whatever the sandbox wrote) at
// scope exit; and the sandbox's host uid range.
#pragma once
#include <sys/stat.h>

#include <boost/json.hpp>

#include "integration/harness.hpp"

struct HostDir {
  std::string path;
  explicit HostDir(mode_t mode = 0755) {
    char tmpl[] = "/tmp/sandlet-mount-XXXXXX";
    REQUIRE(::mkdtemp(tmpl) != nullptr);
    path = tmpl;
    REQUIRE(::chmod(path.c_str(), mode) == 0);
  }
  ~HostDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  HostDir(const HostDir&) = delete;
  HostDir& operator=(const HostDir&) = delete;
  std::string operator/(const std::string& name) const { return path + "/" + name; }
  void write(const std::string& name, const std::string& data, uid_t uid = 0, mode_t mode = 0644) const {
    const std::string p = *this / name;
    std::ofstream(p) << data;
    REQUIRE(::chown(p.c_str(), uid, uid) == 0);
    REQUIRE(::chmod(p.c_str(), mode) == 0);
  }
};

// The first host uid of the sandbox's range (root inside).
inline uint32_t uid_base_of(sandlet::Sandbox& sb) {
  const auto o = boost::json::parse(sb.info_json()).as_object();
  return o.at("backend_state").at("uid_base").to_number<uint32_t>();
}

inline bool contains_all(const std::string& text, std::initializer_list<const char*> parts) {
  for (const char* p : parts)
    if (text.find(p) == std::string::npos) return false;
  return true;
}

inline struct stat host_stat(const std::string& path) {
  struct stat st {};
  INFO(path);
  REQUIRE(::lstat(path.c_str(), &st) == 0);
  return st;
}
