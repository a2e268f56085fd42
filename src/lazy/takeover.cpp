#include "lazy/takeover.hpp"

#include <spawn.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/json.hpp>

#include "common/error.hpp"

extern char** environ;

namespace sandlet::lazy {
namespace {

std::string str(const boost::json::object& o, const char* k) {
  auto* v = o.if_contains(k);
  return v && v->is_string() ? std::string(v->as_string()) : std::string();
}

int64_t num(const boost::json::object& o, const char* k) {
  auto* v = o.if_contains(k);
  if (v && v->is_int64()) return v->as_int64();
  if (v && v->is_uint64()) return static_cast<int64_t>(v->as_uint64());
  throw Error(Code::kInvalidArgument, std::string("handover: no number '") + k + "'");
}

}  // namespace

void start_successor(const std::string& self_exe, const Handover& h) {
  boost::json::array blobs;
  for (const auto& b : h.blobs)
    blobs.push_back({{"sha", b.sha}, {"fd", b.fd}, {"url", b.url}, {"access_key", b.access_key},
                     {"secret_key", b.secret_key}, {"session_token", b.session_token}});
  boost::json::object d{{"root", h.root},
                        {"cache_max_bytes", h.settings.cache_max_bytes},
                        {"fetch_unit", h.settings.fetch_unit},
                        {"fetch_concurrency", h.settings.fetch_concurrency},
                        {"fill_timeout_ms", h.settings.fill_timeout_ms},
                        {"group", h.group},
                        {"lock", h.lock},
                        {"table", h.table},
                        {"blobs", std::move(blobs)}};
  std::string text = boost::json::serialize(d);
  // In memory only: it holds the stores' credentials.
  sys::UniqueFd desc(::memfd_create("sandlet-handover", MFD_CLOEXEC));
  if (!desc) throw_errno("memfd_create(handover)");
  if (::pwrite(desc.get(), text.data(), text.size(), 0) != static_cast<ssize_t>(text.size()))
    throw_errno("write the handover");
  std::vector<std::string> args{self_exe, "holder", "--root", h.root, "--adopt", std::to_string(desc.get())};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  // Each onto itself: that clears close-on-exec, so the successor inherits them.
  std::vector<int> keep{desc.get(), h.group, h.lock, h.table};
  for (const auto& b : h.blobs) keep.push_back(b.fd);
  for (int fd : keep)
    if (fd >= 0) posix_spawn_file_actions_adddup2(&fa, fd, fd);
  pid_t pid = -1;
  int rc = ::posix_spawn(&pid, self_exe.c_str(), &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) throw_errno("start the successor holder " + self_exe, rc);
  ::waitpid(pid, nullptr, 0);
}

Handover read_handover(sys::UniqueFd description) {
  struct stat st;
  if (!description || ::fstat(description.get(), &st) != 0 || st.st_size <= 0 || st.st_size > (64 << 20))
    throw Error(Code::kInvalidArgument, "handover: no description");
  std::string text(static_cast<size_t>(st.st_size), '\0');
  if (::pread(description.get(), text.data(), text.size(), 0) != static_cast<ssize_t>(text.size()))
    throw_errno("read the handover");
  boost::system::error_code ec;
  auto v = boost::json::parse(text, ec);
  if (ec || !v.is_object()) throw Error(Code::kInvalidArgument, "handover: not a JSON object");
  const auto& o = v.as_object();
  Handover h;
  h.root = str(o, "root");
  h.settings.cache_max_bytes = static_cast<uint64_t>(num(o, "cache_max_bytes"));
  h.settings.fetch_unit = static_cast<uint32_t>(num(o, "fetch_unit"));
  h.settings.fetch_concurrency = static_cast<uint32_t>(num(o, "fetch_concurrency"));
  h.settings.fill_timeout_ms = static_cast<uint32_t>(num(o, "fill_timeout_ms"));
  h.group = static_cast<int>(num(o, "group"));
  h.lock = static_cast<int>(num(o, "lock"));
  h.table = static_cast<int>(num(o, "table"));
  if (auto* bs = o.if_contains("blobs"); bs && bs->is_array()) {
    for (const auto& b : bs->as_array()) {
      if (!b.is_object()) continue;
      const auto& bo = b.as_object();
      h.blobs.push_back({str(bo, "sha"), static_cast<int>(num(bo, "fd")), str(bo, "url"), str(bo, "access_key"),
                         str(bo, "secret_key"), str(bo, "session_token")});
    }
  }
  return h;
}

}  // namespace sandlet::lazy
