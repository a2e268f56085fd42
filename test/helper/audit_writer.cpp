// Appends records to a root's audit log through the library's own writer (runtime/audit/audit_log.hpp), as
// another process on the same root does: the rotation test runs several of these at once.
// Usage: sandlet-audit-writer ROOT COUNT MAX_BYTES KEEP TAG
#include <cstdio>
#include <cstdlib>
#include <string>

#include <boost/json.hpp>

#include "runtime/audit/audit_log.hpp"

int main(int argc, char** argv) {
  if (argc != 6) {
    std::fprintf(stderr, "usage: %s ROOT COUNT MAX_BYTES KEEP TAG\n", argv[0]);
    return 2;
  }
  sandlet::AuditOptions options;
  options.max_bytes = std::strtoull(argv[3], nullptr, 10);
  options.keep = static_cast<uint32_t>(std::strtoul(argv[4], nullptr, 10));
  sandlet::AuditLog log(sandlet::AuditLog::dir_of_root(argv[1]), options);
  const long count = std::strtol(argv[2], nullptr, 10);
  const std::string tag = argv[5];
  for (long i = 0; i < count; ++i)
    log.write("test", "writer-" + tag, {{"writer", tag}}, {{"seq", i}, {"pad", std::string(150, 'x')}});
  const auto s = log.stats();
  std::printf("%llu %llu %llu\n", static_cast<unsigned long long>(s.written), static_cast<unsigned long long>(s.failed),
              static_cast<unsigned long long>(s.rotations));
  if (s.failed) std::fprintf(stderr, "%s\n", s.last_error.c_str());
  return s.failed ? 1 : 0;
}
