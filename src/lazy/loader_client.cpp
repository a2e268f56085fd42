#include "lazy/loader_client.hpp"

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/error.hpp"
#include "lazy/loader_protocol.hpp"
#include "lazy/seqpacket.hpp"
#include "sys/fs_util.hpp"

extern "C" const char sandlet_loader_blob[];
extern "C" const char sandlet_loader_blob_end[];
extern "C" const char sandlet_loader_sha256[];
extern char** environ;

namespace sandlet::lazy {
namespace {

constexpr int kCallTimeoutMs = 30000;
constexpr int kStartTimeoutMs = 10000;

}  // namespace

std::string loader_executable(const std::string& dir) {
  sys::mkdir_p(dir, 0700);
  std::string path = dir + "/sandlet-loader-" + std::string(sandlet_loader_sha256).substr(0, 16);
  size_t size = static_cast<size_t>(sandlet_loader_blob_end - sandlet_loader_blob);
  struct stat st;
  if (::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == ::geteuid() && !(st.st_mode & 022) &&
      static_cast<size_t>(st.st_size) == size)
    return path;
  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  sys::write_new_file(tmp, std::string(sandlet_loader_blob, size), 0500);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int e = errno;
    ::unlink(tmp.c_str());
    throw_errno("install the loader at " + path, e);
  }
  return path;
}

LoaderClient::LoaderClient(std::string root, LoaderSettings settings) : root_(std::move(root)), settings_(settings) {}

void LoaderClient::start_loader() {
  std::string exe = loader_executable(loader_dir(root_) + "/bin");
  int pipefd[2];
  if (::pipe2(pipefd, O_CLOEXEC) != 0) throw_errno("pipe");
  sys::UniqueFd rd(pipefd[0]), wr(pipefd[1]);
  std::vector<std::string> args{exe, "holder", "--root", root_, "--cache-max", std::to_string(settings_.cache_max_bytes),
                                "--fetch-unit", std::to_string(settings_.fetch_unit), "--concurrency",
                                std::to_string(settings_.fetch_concurrency), "--fill-timeout-ms",
                                std::to_string(settings_.fill_timeout_ms), "--ready-fd", std::to_string(wr.get())};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, wr.get(), wr.get());
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  // Signals the host blocks or ignores are not the loader's business.
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
  pid_t pid = -1;
  int rc = ::posix_spawn(&pid, exe.c_str(), &fa, &attr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) throw_errno("start the loader " + exe, rc);
  wr.reset();
  ::waitpid(pid, nullptr, 0);  // the first process forks the real one away and exits
  pollfd p{rd.get(), POLLIN, 0};
  int prc;
  do prc = ::poll(&p, 1, kStartTimeoutMs);
  while (prc < 0 && errno == EINTR);
  char buf[1024];
  ssize_t n = prc > 0 ? ::read(rd.get(), buf, sizeof buf) : 0;
  if (n <= 0) throw Error(Code::kUnavailable, "the loader did not start (no answer within 10 s)");
  if (buf[0] == 'e') throw Error(Code::kUnavailable, "the loader did not start: " + std::string(buf + 1, n - 1));
}

boost::json::object LoaderClient::call(const boost::json::object& request, bool start) {
  std::lock_guard<std::mutex> lk(mu_);
  std::string text = boost::json::serialize(request);
  for (int attempt = 0; attempt < 3; ++attempt) {
    if (!conn_) {
      try {
        conn_ = seqpacket_connect(control_socket_path(root_));
      } catch (const Error&) {
        if (!start) throw;
        start_loader();
        // Another process may have started it a moment before us: its socket listens shortly.
        for (int i = 0;; ++i) {
          try {
            conn_ = seqpacket_connect(control_socket_path(root_));
            break;
          } catch (const Error&) {
            if (i == 200) throw;
            ::usleep(10000);
            // The lock's holder may have been a loader on its way out: start one again now and then.
            if (i % 50 == 49) start_loader();
          }
        }
      }
    }
    std::string reply;
    try {
      reply = seqpacket_call(conn_.get(), text, 4u << 20, kCallTimeoutMs);
    } catch (const Error& e) {
      conn_.reset();  // a loader that stopped since: connect (or start) again
      if (e.code() == Code::kDeadlineExceeded) throw;
      continue;
    }
    boost::system::error_code ec;
    auto v = boost::json::parse(reply, ec);
    if (ec || !v.is_object()) throw Error(Code::kInternal, "the loader's reply is not JSON");
    auto& o = v.as_object();
    if (auto* ok = o.if_contains("ok"); ok && ok->is_bool() && !ok->as_bool()) {
      if (o.contains("error") && o.at("error").is_string() && o.at("error").as_string() == "loader stopping; retry") {
        conn_.reset();  // that loader is going away: the next attempt starts (or finds) another
        ::usleep(50000);
        continue;
      }
      int code = o.contains("code") && o.at("code").is_int64() ? static_cast<int>(o.at("code").as_int64())
                                                               : static_cast<int>(Code::kInternal);
      std::string msg = o.contains("error") && o.at("error").is_string() ? std::string(o.at("error").as_string()) : "";
      throw Error(static_cast<Code>(code), "loader: " + msg);
    }
    return o;
  }
  throw Error(Code::kUnavailable, "the loader at " + control_socket_path(root_) + " does not answer");
}

boost::json::object LoaderClient::status() {
  try {
    return call({{"op", "status"}}, false);
  } catch (const Error& e) {
    if (e.code() != Code::kUnavailable) throw;
    return {{"running", false}};
  }
}

bool LoaderClient::stop_if_idle() {
  try {
    auto r = call({{"op", "stop_if_idle"}}, false);
    std::lock_guard<std::mutex> lk(mu_);
    conn_.reset();
    return r.contains("stopping") && r.at("stopping").as_bool();
  } catch (const Error& e) {
    if (e.code() == Code::kUnavailable) return true;
    throw;
  }
}

void LoaderClient::ensure_running() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (conn_) {
      pollfd p{conn_.get(), POLLIN | POLLRDHUP, 0};
      if (::poll(&p, 1, 0) == 0) return;  // connected, nothing said: the loader is there
      conn_.reset();
    }
  }
  call({{"op", "ping"}}, /*start=*/true);
}

}  // namespace sandlet::lazy
