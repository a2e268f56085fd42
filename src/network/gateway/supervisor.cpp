#include "network/gateway/supervisor.hpp"

#include <poll.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <cstdio>
#include <cstring>
#include <deque>
#include <map>
#include <string>
#include <vector>

#include "lazy/seqpacket.hpp"
#include "sys/unix_socket.hpp"

namespace sandlet::netgw {
namespace {

struct Kept {
  std::string request;
  std::vector<sys::UniqueFd> fds;
};

std::string text_of(const boost::json::object& o, const char* k) {
  const auto* v = o.if_contains(k);
  return v && v->is_string() ? std::string(v->as_string()) : "";
}

// Takes every message waiting on the journal; `attaching` is the sandbox the gateway is re-attaching now
// ("" outside its replay). False once the gateway closed its end.
bool read_journal(int sock, std::map<std::string, Kept>& kept, std::string& attaching) {
  for (;;) {
    std::vector<sys::UniqueFd> fds;
    bool eof = false;
    std::string msg;
    try {
      msg = lazy::seqpacket_recv(sock, 256 * 1024, &fds, &eof);
    } catch (const std::exception&) {
      return false;
    }
    if (eof) return false;
    if (msg.empty()) return true;  // nothing more for now
    boost::system::error_code ec;
    const boost::json::value v = boost::json::parse(msg, ec);
    if (ec || !v.is_object()) continue;
    const boost::json::object& o = v.as_object();
    const std::string op = text_of(o, "op"), id = text_of(o, "id");
    if (op == "replayed") attaching.clear();
    if (id.empty()) continue;
    if (op == "attaching") attaching = id;
    if (op == "remember") {
      kept[id] = Kept{text_of(o, "request"), std::move(fds)};
    } else if (op == "update") {
      if (auto it = kept.find(id); it != kept.end()) it->second.request = text_of(o, "request");
    } else if (op == "forget") {
      kept.erase(id);
    }
  }
}

void send_replay(int sock, const std::map<std::string, Kept>& kept) {
  try {
    for (const auto& [id, k] : kept) {
      std::vector<int> raw;
      for (const sys::UniqueFd& f : k.fds) raw.push_back(f.get());
      sys::send_with_fds(sock, boost::json::serialize(boost::json::object{{"op", "replay"}, {"request", k.request}}), raw);
    }
    sys::send_with_fds(sock, R"({"op":"end"})", {});
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sandlet-netgw: supervisor: replay to the new gateway failed: %s\n", e.what());
  }
}

// Drops what it keeps of sandboxes that ended (their init's pidfd, the attach's second descriptor, is
// readable), in case the gateway's word of it was lost: their namespaces must not stay pinned here.
void prune_ended(std::map<std::string, Kept>& kept) {
  for (auto it = kept.begin(); it != kept.end();) {
    pollfd p{it->second.fds.size() > 1 ? it->second.fds[1].get() : -1, POLLIN, 0};
    if (p.fd >= 0 && ::poll(&p, 1, 0) == 1 && (p.revents & POLLIN)) it = kept.erase(it);
    else ++it;
  }
}

int64_t now_ms() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

}  // namespace

int supervise(const SupervisorOptions& o, const std::function<int(sys::UniqueFd, int, uint64_t)>& run_gateway) {
  std::map<std::string, Kept> kept;
  uint64_t restarts = 0;
  int ready_fd = o.ready_fd;
  std::deque<int64_t> recent;  // start times of the last gateways, to slow down a crash loop
  std::string attaching;
  for (;;) {
    sys::UniqueFd mine, theirs;
    lazy::seqpacket_pair(mine, theirs);
    const pid_t pid = ::fork();
    if (pid < 0) {
      std::fprintf(stderr, "sandlet-netgw: supervisor: fork: %s\n", std::strerror(errno));
      if (restarts == 0) return 1;
      ::sleep(1);
      continue;
    }
    if (pid == 0) {
      mine.reset();
      kept.clear();  // the child gets its own copies in the replay; these would pin ended sandboxes' namespaces
      ::_exit(run_gateway(std::move(theirs), ready_fd, restarts));
    }
    theirs.reset();
    if (ready_fd >= 0) {
      ::close(ready_fd);  // the first gateway tells its starter when it serves
      ready_fd = -1;
    }
    recent.push_back(now_ms());
    if (recent.size() > 5) recent.pop_front();
    send_replay(mine.get(), kept);
    const sys::UniqueFd child(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
    bool open = true;
    int status = 0;
    int64_t next_prune = now_ms() + 10000;
    for (;;) {
      pollfd p[2] = {{open ? mine.get() : -1, POLLIN, 0}, {child.get(), POLLIN, 0}};
      if (now_ms() >= next_prune) {
        prune_ended(kept);
        next_prune = now_ms() + 10000;
      }
      if (::poll(p, child ? 2 : 1, child ? 10000 : 1000) < 0) {
        if (errno != EINTR) ::usleep(100000);  // only waitpid below ends the wait: never mistake it for an exit
      } else if (open && (p[0].revents & (POLLIN | POLLHUP | POLLERR))) {
        open = read_journal(mine.get(), kept, attaching);
      }
      const pid_t done = ::waitpid(pid, &status, WNOHANG);
      if (done == pid) break;
    }
    if (open) (void)read_journal(mine.get(), kept, attaching);  // what it said before it died
    if (!attaching.empty()) {
      // It died re-attaching this one: never hand it over again (the others still are).
      std::fprintf(stderr, "sandlet-netgw: supervisor: gateway died re-attaching %s; not re-attached again\n",
                   attaching.c_str());
      kept.erase(attaching);
      attaching.clear();
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return 0;  // idle: nothing is attached
    if (WIFEXITED(status) && WEXITSTATUS(status) == 2) return 1;  // it could not start at all
    ++restarts;
    if (WIFSIGNALED(status))
      std::fprintf(stderr, "sandlet-netgw: supervisor: gateway %d killed by signal %d; restarting with %zu sandboxes\n",
                   pid, WTERMSIG(status), kept.size());
    else
      std::fprintf(stderr, "sandlet-netgw: supervisor: gateway %d exited with %d; restarting with %zu sandboxes\n", pid,
                   WEXITSTATUS(status), kept.size());
    // Five starts within ten seconds: a gateway that dies at once would spin; one a second then.
    if (recent.size() == 5 && now_ms() - recent.front() < 10000) ::sleep(1);
  }
}

}  // namespace sandlet::netgw
