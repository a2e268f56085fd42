#include "network/gateway/gateway.hpp"

#include <fcntl.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <boost/json.hpp>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <set>

#include "common/error.hpp"
#include "lazy/seqpacket.hpp"
#include "network/gateway/journal.hpp"
#include "network/gateway/limits.hpp"
#include "network/gateway/netgw_paths.hpp"
#include "policy/net_protect.hpp"

namespace sandlet::netgw {
namespace {

std::string reply_error(const Error& e) {
  return boost::json::serialize(boost::json::object{{"ok", false}, {"code", static_cast<int>(e.code())}, {"error", e.what()}});
}

int64_t boottime_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_BOOTTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

}  // namespace

int64_t Gateway::now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

Gateway::Gateway(GatewayOptions o) : o_(std::move(o)) {
  if (!o_.uplink_netns.empty()) {
    uplink_.reset(::open(o_.uplink_netns.c_str(), O_RDONLY | O_CLOEXEC));
    if (!uplink_) throw_errno("open the uplink namespace " + o_.uplink_netns);
    // The whole process (one thread) lives in the uplink: every outbound socket is made there.
    if (::setns(uplink_.get(), CLONE_NEWNET) != 0) throw_errno("enter the uplink namespace " + o_.uplink_netns);
  }
  uplink_.reset(::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC));
  if (!uplink_) throw_errno("open the gateway's own network namespace");
  // Subscribed before the first listing: an address that appears in between is an event, not a gap.
  address_events_ = sys::address_events_socket();
  address_handler_.gw = this;
  loop_.add(address_events_.get(), EPOLLIN, &address_handler_);
  protected_ = policy::protected_ranges_of(uplink_local());
  next_relist_ms_ = now_ms() + kUplinkRelistMs;
  rlimit r{};
  fd_limit_ = ::getrlimit(RLIMIT_NOFILE, &r) == 0 && r.rlim_cur != RLIM_INFINITY ? static_cast<size_t>(r.rlim_cur) : kFdsWanted;
  budget_ = FdBudget::for_limit(fd_limit_);
  spare_.reset(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  node_counters_fd_.reset(::open((gateway_dir(o_.root) + "/counters").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
  // The node's counters carry on from the gateways before this one (a restart, or one that went idle).
  proto::NetgwCounters kept{};
  if (node_counters_fd_ && ::pread(node_counters_fd_.get(), &kept, sizeof kept, 0) == static_cast<ssize_t>(sizeof kept) &&
      kept.magic == proto::kNetgwCountersMagic && kept.version == proto::kNetgwCountersVersion)
    for (uint32_t i = 0; i < proto::kGwCounterCount; ++i)
      if (i <= proto::kGwProtectLastUs || i >= proto::kGwDnsAnswered) node_[i] = kept.v[i];
  if (o_.restarts > 0) ++node_[proto::kGwRestarts];
  loop_.on_error = [this](const char* what) {
    count(proto::kGwLoopErrors);
    if (node_[proto::kGwLoopErrors] <= 64) std::fprintf(stderr, "sandlet-netgw: caught in the event loop: %s\n", what);
  };
  dns_ = std::make_unique<DnsService>(loop_);  // here: its workers start in the uplink namespace
  dns_->set_max_in_flight(FdBudget::dns_reserve(fd_limit_));
}

std::vector<sys::NetnsAddress> Gateway::uplink_local() {
  std::vector<sys::NetnsAddress> all = sys::netns_addresses(-1);
  for (const sys::NetnsAddress& r : sys::netns_local_routes(-1)) all.push_back(r);
  return all;
}

SandboxPort* Gateway::find(const std::string& id) {
  auto it = sandboxes_.find(id);
  return it == sandboxes_.end() ? nullptr : it->second.get();
}

size_t Gateway::node_fds() const { return fixed_fds + 2 * tcp_total + 2 * udp_total + dns_tcp_total; }

size_t Gateway::unused_floors() const { return sandboxes_.size() * budget_.floor - floors_used; }

FdVerdict Gateway::admits(const SandboxPort& port, size_t want) const {
  return budget_.admits_connection(node_fds(), port.connection_fds(), sandboxes_.size(), unused_floors(), want);
}

void Gateway::shed(int listen_fd) {
  spare_.reset();
  const int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
  if (fd >= 0) {
    const linger lg{1, 0};
    (void)::setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    ::close(fd);
  }
  spare_.reset(::open("/dev/null", O_RDONLY | O_CLOEXEC));
}

void Gateway::on_address_events() {
  const int64_t at = boottime_ns();
  if (sys::drain_address_events(address_events_.get())) relist_uplink(at);
}

void Gateway::relist_uplink(int64_t event_ns) {
  next_relist_ms_ = now_ms() + 1000;  // a listing that fails (e.g. out of descriptors) is tried again soon
  std::vector<policy::NetProtectedRange> ranges = policy::protected_ranges_of(uplink_local());
  next_relist_ms_ = now_ms() + kUplinkRelistMs;
  if (ranges == protected_) return;
  if (ranges.size() > policy::kNetMaxProtected)
    std::fprintf(stderr, "sandlet-netgw: %zu protected ranges; the sandboxes' maps hold the first %u\n", ranges.size(),
                 policy::kNetMaxProtected);
  // The change only: usually one address (and its translated forms), a few map updates per sandbox,
  // however many ranges there are.
  std::vector<policy::NetProtectedRange> added, removed;
  const std::set<policy::NetProtectedRange> now(ranges.begin(), ranges.end()), before(protected_.begin(), protected_.end());
  for (const auto& r : ranges)
    if (!before.count(r)) added.push_back(r);
  for (const auto& r : protected_)
    if (!now.count(r)) removed.push_back(r);
  protected_ = std::move(ranges);
  // The addresses themselves first in every sandbox, then their NAT64/6to4 forms: what the sandboxes can
  // reach directly is closed soonest.
  const auto split = std::stable_partition(added.begin(), added.end(),
                                           [](const auto& r) { return !policy::is_translated_form(r); });
  std::vector<policy::NetProtectedRange> later(split, added.end());
  added.erase(split, added.end());
  const auto apply = [&](const std::vector<policy::NetProtectedRange>& add,
                         const std::vector<policy::NetProtectedRange>& drop) {
    for (auto& [id, sb] : sandboxes_) {
      try {
        sb->protect_change(add, drop);
      } catch (const std::exception& e) {
        sb->protect_stale = true;  // its next tick writes the whole set
        std::fprintf(stderr, "sandlet-netgw: %s: protected ranges not updated: %s\n", id.c_str(), e.what());
      }
    }
  };
  apply(added, removed);
  if (!later.empty()) apply(later, {});
  count(proto::kGwProtectUpdates);
  node_[proto::kGwProtectLastUs] = static_cast<uint64_t>(std::max<int64_t>(0, boottime_ns() - event_ns) / 1000);
  std::fprintf(stderr, "sandlet-netgw: the uplink's addresses changed: %zu protected ranges in %zu sandboxes (%llu us)\n",
               protected_.size(), sandboxes_.size(), static_cast<unsigned long long>(node_[proto::kGwProtectLastUs]));
}

int Gateway::run(int ready_fd) {
  control_.reset(::fcntl(o_.control_fd, F_DUPFD_CLOEXEC, 3));
  if (!control_) throw_errno("netgw: the control socket");
  (void)::fcntl(control_.get(), F_SETFL, O_NONBLOCK);
  if (o_.journal) {
    for (Replay& r : o_.journal->replay()) {
      boost::system::error_code ec;
      const boost::json::value v = boost::json::parse(r.request, ec);
      const auto* idv = !ec && v.is_object() ? v.as_object().if_contains("id") : nullptr;
      const std::string id = idv && idv->is_string() ? std::string(idv->as_string()) : "";
      o_.journal->attaching(id);
      try {
        handle(r.request, r.fds, true);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "sandlet-netgw: not re-attached: %s\n", e.what());
        if (!id.empty()) o_.journal->forget(id);
      }
    }
    o_.journal->replayed();
    if (o_.restarts) std::fprintf(stderr, "sandlet-netgw: restarted (pid %d), %zu sandboxes re-attached\n", ::getpid(), sandboxes_.size());
  }
  loop_.add(control_.get(), EPOLLIN, this);
  if (ready_fd >= 0) {
    (void)!::write(ready_fd, "r", 1);
    ::close(ready_fd);
  }
  idle_since_ms_ = now_ms();
  for (;;) {
    loop_.run_once(100);
    const int64_t now = now_ms();
    tick(now);
    if (sandboxes_.empty() && clients_.empty() && now - idle_since_ms_ >= o_.idle_exit_ms) {
      // Leave the socket path first, so a starter that finds it gone starts a successor.
      ::unlink(control_socket_path(o_.root).c_str());
      flush_node_counters();
      return 0;
    }
  }
}

void Gateway::tick(int64_t now) {
  for (auto& [id, sb] : sandboxes_) {
    try {
      sb->tick(now);
    } catch (const std::exception& e) {
      loop_.on_error(e.what());
    }
  }
  if (!spare_) spare_.reset(::open("/dev/null", O_RDONLY | O_CLOEXEC));  // shed() could not get it back
  if (o_.journal) o_.journal->flush();
  if (now >= next_relist_ms_) {
    try {
      relist_uplink(boottime_ns());
    } catch (const std::exception& e) {
      loop_.on_error(e.what());
    }
  }
  const DnsService::Totals& t = dns_->totals();
  const uint64_t dns_total = t.answered + t.refused + t.failed + t.dropped;
  if (dns_total != dns_flushed_) node_dirty_ = true;
  if (node_dirty_ && now >= next_node_flush_ms_) {
    dns_flushed_ = dns_total;
    flush_node_counters();
  }
}

void Gateway::flush_node_counters() {
  node_dirty_ = false;
  next_node_flush_ms_ = now_ms() + kCountersFlushMs;
  if (!node_counters_fd_) return;
  proto::NetgwCounters c{};
  c.magic = proto::kNetgwCountersMagic;
  c.version = proto::kNetgwCountersVersion;
  for (uint32_t i = 0; i < proto::kGwCounterCount; ++i) c.v[i] = node_[i];
  c.v[proto::kGwAttached] = sandboxes_.size();
  c.v[proto::kGwFdsInUse] = node_fds();
  c.v[proto::kGwFdLimit] = fd_limit_;
  // The resolver's totals since this gateway started, on top of what the gateways before it counted.
  const DnsService::Totals& t = dns_->totals();
  c.v[proto::kGwDnsAnswered] += t.answered;
  c.v[proto::kGwDnsRefused] += t.refused;
  c.v[proto::kGwDnsFailed] += t.failed;
  c.v[proto::kGwDnsDropped] += t.dropped;
  (void)!::pwrite(node_counters_fd_.get(), &c, sizeof c, 0);
}

void Gateway::on_event(uint32_t) {
  for (;;) {
    const int fd = ::accept4(control_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) {
      if (errno == EMFILE || errno == ENFILE) shed(control_.get());
      return;
    }
    if (clients_.size() >= 64) {
      ::close(fd);
      continue;
    }
    auto c = std::make_unique<Client>();
    c->gw = this;
    c->fd.reset(fd);
    loop_.add(fd, EPOLLIN, c.get());
    clients_[c.get()] = std::move(c);
  }
}

void Gateway::on_client(Client& c, uint32_t) {
  std::vector<sys::UniqueFd> fds;
  bool eof = false;
  std::string req;
  try {
    req = lazy::seqpacket_recv(c.fd.get(), 64 * 1024, &fds, &eof);
  } catch (const Error&) {
    eof = true;
  }
  if (eof) {
    loop_.remove(c.fd.get());
    auto it = clients_.find(&c);
    loop_.retire(std::move(it->second));
    clients_.erase(it);
    if (sandboxes_.empty()) idle_since_ms_ = now_ms();
    return;
  }
  if (req.empty()) return;
  std::string reply;
  try {
    reply = handle(req, fds);
  } catch (const Error& e) {
    reply = reply_error(e);
  } catch (const std::exception& e) {
    reply = reply_error(Error(Code::kInternal, e.what()));
  }
  (void)::send(c.fd.get(), reply.data(), reply.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
}

void Gateway::detach(const std::string& id, const char* why) {
  auto it = sandboxes_.find(id);
  if (it == sandboxes_.end()) return;
  std::fprintf(stderr, "sandlet-netgw: %s %s\n", why, id.c_str());
  it->second->flush_counters();
  it->second->release_accounting();
  loop_.retire(std::move(it->second));
  sandboxes_.erase(it);
  node_dirty_ = true;
  if (o_.journal) o_.journal->forget(id);
  if (sandboxes_.empty()) idle_since_ms_ = now_ms();
}

}  // namespace sandlet::netgw
