#include "backends/host/net_gateway_client.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <cstring>

#include "common/error.hpp"
#include "lazy/seqpacket.hpp"
#include "network/gateway/netgw_paths.hpp"
#include "sys/fs_util.hpp"
#include "sys/unix_socket.hpp"

extern "C" const char sandlet_netgw_blob[];
extern "C" const char sandlet_netgw_blob_end[];
extern "C" const char sandlet_netgw_sha256[];
extern char** environ;

namespace sandlet::host {
namespace {

constexpr int kCallTimeoutMs = 10000;
constexpr int kStartTimeoutMs = 10000;

std::string text(const boost::json::object& o, const char* k) {
  auto* v = o.if_contains(k);
  return v && v->is_string() ? std::string(v->as_string()) : "";
}

}  // namespace

std::string netgw_executable(const std::string& dir) {
  sys::mkdir_p(dir, 0700);
  const std::string path = dir + "/sandlet-netgw-" + std::string(sandlet_netgw_sha256).substr(0, 16);
  const size_t size = static_cast<size_t>(sandlet_netgw_blob_end - sandlet_netgw_blob);
  struct stat st;
  if (::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == ::geteuid() && !(st.st_mode & 022) &&
      static_cast<size_t>(st.st_size) == size)
    return path;
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  sys::write_new_file(tmp, std::string(sandlet_netgw_blob, size), 0500);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int e = errno;
    ::unlink(tmp.c_str());
    throw_errno("install the network gateway at " + path, e);
  }
  return path;
}

void sweep_stale_gateway(const std::string& root) noexcept {
  const sys::UniqueFd lock(::open(netgw::lock_path(root).c_str(), O_RDONLY | O_CLOEXEC));
  if (!lock || ::flock(lock.get(), LOCK_EX | LOCK_NB) != 0) return;  // none was started, or one runs
  ::unlink(netgw::control_socket_path(root).c_str());
  // (The flock ends with the descriptor: a gateway starting now takes the lock and makes a new socket.)
}

NetGatewayClient::NetGatewayClient(std::string root, std::string uplink_netns)
    : root_(std::move(root)), uplink_(std::move(uplink_netns)) {}

bool NetGatewayClient::start_gateway() {
  const std::string exe = netgw_executable(netgw::gateway_dir(root_) + "/bin");
  int pipefd[2];
  if (::pipe2(pipefd, O_CLOEXEC) != 0) throw_errno("pipe");
  sys::UniqueFd rd(pipefd[0]), wr(pipefd[1]);
  std::vector<std::string> args{exe, "serve", "--root", root_, "--ready-fd", std::to_string(wr.get())};
  if (!uplink_.empty()) args.insert(args.end(), {"--uplink-netns", uplink_});
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, wr.get(), wr.get());  // clears CLOEXEC on the ready pipe only
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
  pid_t pid = -1;
  const int rc = ::posix_spawn(&pid, exe.c_str(), &fa, &attr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) throw_errno("start the network gateway " + exe, rc);
  wr.reset();
  ::waitpid(pid, nullptr, 0);  // the first process forks the server away and exits
  pollfd p{rd.get(), POLLIN, 0};
  int prc;
  do prc = ::poll(&p, 1, kStartTimeoutMs);
  while (prc < 0 && errno == EINTR);
  char buf[1024];
  const ssize_t n = prc > 0 ? ::read(rd.get(), buf, sizeof buf) : 0;
  if (n <= 0) throw Error(Code::kUnavailable, "the network gateway did not start (no answer within 10 s)");
  if (buf[0] == 'e') throw Error(Code::kUnavailable, "the network gateway did not start: " + std::string(buf + 1, n - 1));
  return buf[0] == 'r';  // 'b': another one holds the root's lock
}

boost::json::object NetGatewayClient::call(const boost::json::object& request, const std::vector<int>& fds, bool start,
                                           bool* started) {
  const std::string req = boost::json::serialize(request);
  for (int attempt = 0; attempt < 100; ++attempt) {
    sys::UniqueFd conn;
    try {
      conn = lazy::seqpacket_connect(netgw::control_socket_path(root_));
    } catch (const Error&) {
      if (!start) throw;
      // None answers (or one on its way out holds the lock: "b"): start one, then connect again.
      if (attempt % 20 == 0) {
        if (start_gateway() && started) *started = true;
      } else {
        ::usleep(20000);
      }
      continue;
    }
    std::string reply;
    try {
      const int flags = ::fcntl(conn.get(), F_GETFL);
      (void)::fcntl(conn.get(), F_SETFL, flags & ~O_NONBLOCK);
      sys::send_with_fds(conn.get(), req, fds);
      pollfd p{conn.get(), POLLIN, 0};
      int rc;
      do rc = ::poll(&p, 1, kCallTimeoutMs);
      while (rc < 0 && errno == EINTR);
      if (rc == 0) throw Error(Code::kDeadlineExceeded, "the network gateway did not answer within 10 s");
      reply.resize(64 * 1024);
      const ssize_t n = ::recv(conn.get(), reply.data(), reply.size(), 0);
      if (n <= 0) continue;  // a gateway that exited meanwhile (idle): find or start another
      reply.resize(static_cast<size_t>(n));
    } catch (const Error& e) {
      if (e.code() == Code::kDeadlineExceeded) throw;
      continue;
    }
    boost::system::error_code ec;
    auto v = boost::json::parse(reply, ec);
    if (ec || !v.is_object()) throw Error(Code::kInternal, "the network gateway's reply is not JSON");
    auto& o = v.as_object();
    if (auto* ok = o.if_contains("ok"); ok && ok->is_bool() && !ok->as_bool()) {
      const int code = o.contains("code") && o.at("code").is_int64() ? static_cast<int>(o.at("code").as_int64())
                                                                     : static_cast<int>(Code::kInternal);
      throw Error(static_cast<Code>(code), "network gateway: " + text(o, "error"));
    }
    return o;
  }
  throw Error(Code::kUnavailable, "the network gateway at " + netgw::control_socket_path(root_) + " does not answer");
}

namespace {

// What the gateway keeps of a policy and a `net update` may change: the exactly named addresses (the only
// uplink ones it relays to) and the resolver's rules by name and upstreams.
void put_policy(boost::json::object& req, const NetworkPolicy& policy) {
  boost::json::array exact, names, dns;
  for (const NetAllowRule& r : policy.allow) {
    if (r.family == 0) {
      names.push_back({{"host", r.host}, {"protocols", r.protocols}, {"port_lo", r.port_lo}, {"port_hi", r.port_hi}});
      continue;
    }
    if (r.prefix != (r.family == 4 ? 32 : 128)) continue;
    char buf[64] = {};
    static const uint8_t kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    if (r.family == 6 && std::memcmp(r.addr.data(), kMapped, 12) == 0)
      ::inet_ntop(AF_INET, r.addr.data() + 12, buf, sizeof buf);  // IPv4 written as IPv6: the IPv4 address
    else
      ::inet_ntop(r.family == 4 ? AF_INET : AF_INET6, r.addr.data(), buf, sizeof buf);
    exact.push_back(boost::json::string(buf));
  }
  for (const std::string& d : policy.dns) dns.push_back(boost::json::string(d));
  req["exact"] = std::move(exact);
  req["names"] = std::move(names);
  req["dns"] = std::move(dns);
}

}  // namespace

void NetGatewayClient::attach(const std::string& id, int netns_fd, int pidfd, int cgroup_fd, const NetworkPolicy& policy,
                              int dns_log_fd, int counters_fd) {
  boost::json::object req{{"op", "attach"}, {"id", id}, {"egress_rate", policy.egress_rate}};
  put_policy(req, policy);
  boost::json::array publish;
  for (const NetPublish& p : policy.publish)
    publish.push_back({{"address", p.address}, {"host_port", p.host_port}, {"port", p.port}});
  req["publish"] = std::move(publish);
  std::vector<int> fds{netns_fd, pidfd, cgroup_fd};
  boost::json::array names{"netns", "pidfd", "cgroup"};
  if (dns_log_fd >= 0) fds.push_back(dns_log_fd), names.push_back("dns_log");
  if (counters_fd >= 0) fds.push_back(counters_fd), names.push_back("counters");
  req["fds"] = std::move(names);
  bool started = false;
  {
    std::lock_guard<std::mutex> lk(mu_);
    call(req, fds, true, &started);
  }
  if (started && on_restart) on_restart();
}

void NetGatewayClient::update(const std::string& id, const NetworkPolicy& policy) {
  boost::json::object req{{"op", "update"}, {"id", id}};
  put_policy(req, policy);
  std::lock_guard<std::mutex> lk(mu_);
  try {
    call(req, {}, false, nullptr);
  } catch (const Error& e) {
    // No gateway, or one that does not hold the sandbox: the next start re-attaches it from its record,
    // which has the new policy by then.
    if (e.code() != Code::kUnavailable && e.code() != Code::kNotFound) throw;
  }
}

void NetGatewayClient::ensure_running() {
  bool started = false;
  {
    std::lock_guard<std::mutex> lk(mu_);
    call({{"op", "ping"}}, {}, true, &started);
  }
  if (started && on_restart) on_restart();
}

void NetGatewayClient::detach(const std::string& id) noexcept {
  try {
    std::lock_guard<std::mutex> lk(mu_);
    call({{"op", "detach"}, {"id", id}}, {}, false, nullptr);
  } catch (...) {
    // No gateway: nothing of this sandbox is held anywhere.
  }
}

boost::json::object NetGatewayClient::status() {
  try {
    std::lock_guard<std::mutex> lk(mu_);
    auto o = call({{"op", "status"}}, {}, false, nullptr);
    o["running"] = true;
    return o;
  } catch (const Error& e) {
    if (e.code() != Code::kUnavailable) throw;
    return {{"running", false}};
  }
}

}  // namespace sandlet::host
