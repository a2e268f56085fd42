#include "network/gateway/dns_service.hpp"

#include <fcntl.h>
#include <sys/eventfd.h>
#include <sys/file.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "common/error.hpp"
#include "network/dns/gate_allowlist.hpp"
#include "network/gateway/limits.hpp"
#include "policy/net_filter.hpp"

namespace sandlet::netgw {
namespace {

constexpr long kTickMs = 20;  // how often the deadlines of queries in flight are looked at
const std::string kAllowWaitText = std::to_string(kDnsAllowWaitMs) + " ms)";

int64_t steady_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Of a reply the gate built: its rcode, or -1 for no reply.
int rcode_of(const std::vector<uint8_t>& reply, net::DnsTransport t) {
  const size_t at = t == net::DnsTransport::kTcp ? 2 : 0;
  if (reply.size() < at + net::kDnsHeaderSize) return -1;
  return reply[at + 3] & 0x0f;
}

proto::DnsVerdict verdict_of(int rcode) {
  switch (rcode) {
    case -1: return proto::DnsVerdict::kDropped;
    case net::kDnsNoError:
    case net::kDnsNxDomain: return proto::DnsVerdict::kAnswered;
    case net::kDnsServFail: return proto::DnsVerdict::kFailed;
    default: return proto::DnsVerdict::kRefused;
  }
}

}  // namespace

DnsPolicy::DnsPolicy(std::vector<NetAllowRule> n, std::vector<net::DnsUpstream> upstreams)
    : names(std::move(n)), gate(names, std::move(upstreams)) {}

DnsContext::DnsContext(std::string id, sys::UniqueFd cgroup, sys::UniqueFd log)
    : id_(std::move(id)), cgroup_(std::move(cgroup)), log_(std::move(log)) {}

std::shared_ptr<const DnsPolicy> DnsContext::policy() const {
  std::lock_guard<std::mutex> lk(mu_);
  return policy_;
}

std::vector<policy::NetProtectedRange> DnsContext::protect() const {
  std::lock_guard<std::mutex> lk(mu_);
  return protect_;
}

void DnsContext::set_policy(std::shared_ptr<const DnsPolicy> p, std::vector<policy::NetProtectedRange> protect) {
  std::lock_guard<std::mutex> lk(mu_);
  policy_ = std::move(p);
  protect_ = std::move(protect);
}

size_t add_to_allowlist(int cgroup_fd, const std::vector<policy::NetResolved>& add,
                        const std::vector<policy::NetProtectedRange>& protect) {
  // A descriptor of its own: flock is per open file, and other workers may hold the sandbox's lock.
  sys::UniqueFd group(::openat(cgroup_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!group) throw_errno("netgw: open the sandbox's cgroup");
  while (::flock(group.get(), LOCK_EX) != 0) {
    if (errno != EINTR) throw_errno("netgw: lock the sandbox's allowlist");
  }
  std::optional<policy::NetFilter> f = policy::NetFilter::open_attached(group.get());
  if (!f) throw Error(Code::kFailedPrecondition, "netgw: the sandbox has no allowlist");
  return f->add_resolved(add, policy::net_clock_now(), protect);
}

DnsService::DnsService(EventLoop& loop) : loop_(loop) {
  wake_.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!wake_) throw_errno("netgw: eventfd");
  timer_.reset(::timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK));
  if (!timer_) throw_errno("netgw: timerfd");
  timer_handler_.svc = this;
  loop_.add(wake_.get(), EPOLLIN, this);
  loop_.add(timer_.get(), EPOLLIN, &timer_handler_);
}

DnsService::~DnsService() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (std::thread& t : workers_) t.join();
  for (auto& [serial, q] : queries_) unwatch(*q);
  queries_.clear();  // their sockets close with them
  loop_.remove(timer_.get());
  loop_.remove(wake_.get());
}

bool DnsService::admit(DnsContext& ctx, std::string& why) const {
  const size_t mine = static_cast<size_t>(std::max(0, ctx.inflight.load()));
  if (mine >= kDnsPerSandbox) {
    why = "dropped: too many queries in flight";
  } else if (queries_.size() >= max_in_flight_) {
    why = "dropped: too many queries in flight on the node";
  } else if (queries_.size() >= max_in_flight_ / 2) {
    // The node's bound is shared: past half of it, no sandbox takes more than its part of that half.
    const size_t sandboxes = active_sandboxes_ + (mine == 0 ? 1 : 0);
    if (mine >= std::max<size_t>(1, max_in_flight_ / 2 / std::max<size_t>(1, sandboxes)))
      why = "dropped: over the sandbox's share of the node's queries in flight";
  }
  return why.empty();
}

bool DnsService::submit(const std::shared_ptr<DnsContext>& ctx, std::vector<uint8_t> bytes, net::DnsTransport transport,
                        Done done) {
  try {
    std::string why;
    if (!admit(*ctx, why)) {
      record(*ctx, proto::DnsVerdict::kDropped, 0, "", 0, why);
      return false;
    }
    auto owned = std::make_unique<Query>();
    Query& q = *owned;
    q.svc = this;
    q.serial = ++next_serial_;
    q.ctx = ctx;
    q.policy = ctx->policy();
    q.transport = transport;
    q.done = std::move(done);
    queries_.emplace(q.serial, std::move(owned));
    if (ctx->inflight++ == 0) ++active_sandboxes_;
    arm_timer(true);
    // From here on nothing throws: the query is answered (`done`) whatever happens.
    if (!q.policy) {
      q.result.outcome = "dropped: the sandbox has no resolver";
      complete(q, 0);
      return true;
    }
    net::GateStart start = q.policy->gate.begin(bytes, transport, net::GateClock::now());
    q.exchange = std::move(start.exchange);
    if (!q.exchange) q.result = std::move(start.result);
    q.query = std::move(bytes);
    advance(q);
    return true;
  } catch (const std::exception&) {
    return false;  // allocation, before the query was taken
  }
}

void DnsService::advance(Query& q) noexcept {
  try {
    if (q.exchange && !q.exchange->done()) {
      if (q.watched < 0) {
        try {
          loop_.add(q.exchange->fd(), EPOLLIN, &q);
          q.watched = q.exchange->fd();
        } catch (const std::exception&) {
          // Not watched: the timer still reads the socket at the try's deadline.
        }
      }
      recount(q);
      return;
    }
    unwatch(q);
    if (q.exchange) {
      q.result = std::move(q.exchange->result());
      q.exchange.reset();
    }
    recount(q);
    if (q.result.allow.empty()) return complete(q, 0);
    to_allowlist(q);
  } catch (const std::exception& e) {
    servfail(q, "failed: ", e.what());
  }
}

void DnsService::unwatch(Query& q) noexcept {
  if (q.watched >= 0) loop_.remove(q.watched);
  q.watched = -1;
}

void DnsService::recount(Query& q) noexcept {
  const bool holds = q.exchange && !q.exchange->done();
  if (holds == q.counted) return;
  q.counted = holds;
  if (holds) ++upstream_sockets_;
  else --upstream_sockets_;
}

void DnsService::to_allowlist(Query& q) {
  std::list<DnsAllowJob> job(1);
  job.front().query = q.serial;
  job.front().records = net::resolved_of(q.result, q.policy->names, policy::net_clock_now());
  std::list<std::shared_ptr<DnsContext>> node{q.ctx};  // allocated here, so nothing under the lock can throw
  start_workers();
  {
    std::lock_guard<std::mutex> lk(mu_);
    q.ctx->allow_jobs.splice(q.ctx->allow_jobs.end(), job);
    if (!q.ctx->allow_listed && !q.ctx->allow_busy) {
      ring_.splice(ring_.end(), node);
      q.ctx->allow_listed = true;
    }
  }
  cv_.notify_one();
  q.waiting_allowlist = true;
  q.allow_deadline_ms = steady_ms() + kDnsAllowWaitMs;
}

void DnsService::servfail(Query& q, std::string_view why, std::string_view detail) noexcept {
  q.result.allow.clear();
  try {
    q.result.reply = net::build_dns_reply(net::parse_dns(q.query, q.transport).message, net::kDnsServFail, {}, q.transport);
    q.result.outcome.assign(why);
    q.result.outcome.append(detail);
  } catch (const std::exception&) {
    q.result.reply.clear();  // nothing at all: the sandbox's library asks again
  }
  complete(q, 0);
}

void DnsService::complete(Query& q, size_t opened) noexcept {
  unwatch(q);
  q.exchange.reset();
  recount(q);
  record(*q.ctx, verdict_of(rcode_of(q.result.reply, q.transport)), q.result.type, q.result.name, opened,
         q.result.outcome);
  try {
    ready_.emplace_back(std::move(q.done), std::move(q.result.reply));
  } catch (const std::exception&) {
  }
  if (--q.ctx->inflight == 0 && active_sandboxes_ > 0) --active_sandboxes_;
  wake();
  auto it = queries_.find(q.serial);
  if (it == queries_.end()) return;
  std::unique_ptr<Query> gone = std::move(it->second);
  queries_.erase(it);
  try {
    loop_.retire(std::move(gone));  // an event of this batch may still name it
  } catch (const std::exception&) {
  }
}

void DnsService::record(DnsContext& ctx, proto::DnsVerdict v, uint16_t type, const std::string& name, size_t opened,
                        const std::string& outcome) noexcept {
  ctx.log().record(v, type, name, static_cast<uint16_t>(std::min<size_t>(opened, 65535)), outcome);
  switch (v) {
    case proto::DnsVerdict::kAnswered: ++totals_.answered; break;
    case proto::DnsVerdict::kRefused: ++totals_.refused; break;
    case proto::DnsVerdict::kFailed: ++totals_.failed; break;
    case proto::DnsVerdict::kDropped: ++totals_.dropped; break;
  }
}

void DnsService::on_upstream(Query& q) noexcept {
  if (!q.exchange) return;
  unwatch(q);  // the step may close this socket and open another
  q.exchange->on_readable(net::GateClock::now());
  advance(q);
}

void DnsService::on_timer() noexcept {
  uint64_t ticks = 0;
  (void)!::read(timer_.get(), &ticks, sizeof ticks);
  const net::GateClock::time_point now = net::GateClock::now();
  const int64_t now_ms = steady_ms();
  for (auto it = queries_.begin(); it != queries_.end();) {
    Query& q = *it->second;
    ++it;  // handling `q` may forget it, and only it
    if (q.waiting_allowlist) {
      if (now_ms < q.allow_deadline_ms) continue;
      // Still queued: taken out (a worker that has it already finishes, and its result is ignored).
      {
        std::lock_guard<std::mutex> lk(mu_);
        std::list<DnsAllowJob>& jobs = q.ctx->allow_jobs;
        for (auto j = jobs.begin(); j != jobs.end(); ++j) {
          if (j->query == q.serial) {
            jobs.erase(j);
            break;
          }
        }
      }
      servfail(q, "failed: waited too long for the allowlist (over ", kAllowWaitText);
    } else if (q.exchange && !q.exchange->done() && now >= q.exchange->deadline()) {
      unwatch(q);  // the step may close this socket and open another
      q.exchange->on_deadline(now);
      advance(q);
    }
  }
  if (queries_.empty()) arm_timer(false);
}

void DnsService::arm_timer(bool on) noexcept {
  if (on == timer_armed_) return;
  itimerspec t{};
  if (on) t.it_value.tv_nsec = t.it_interval.tv_nsec = kTickMs * 1000000L;
  if (::timerfd_settime(timer_.get(), 0, &t, nullptr) == 0) timer_armed_ = on;
}

void DnsService::wake() noexcept {
  const uint64_t one = 1;
  (void)!::write(wake_.get(), &one, sizeof one);
}

void DnsService::prune(const std::shared_ptr<DnsContext>& ctx) {
  try {
    std::list<DnsAllowJob> job(1);
    std::list<std::shared_ptr<DnsContext>> node{ctx};
    {
      std::lock_guard<std::mutex> lk(mu_);
      if (workers_.empty()) return;  // no worker yet: nothing was ever added
      for (const DnsAllowJob& j : ctx->allow_jobs)
        if (j.query == 0) return;  // one is waiting already
      ctx->allow_jobs.splice(ctx->allow_jobs.end(), job);
      if (!ctx->allow_listed && !ctx->allow_busy) {
        ring_.splice(ring_.end(), node);
        ctx->allow_listed = true;
      }
    }
    cv_.notify_one();
  } catch (const std::exception&) {
    // The next prune, or the next add, drops the expired addresses.
  }
}

void DnsService::start_workers() {
  if (!workers_.empty()) return;
  // Made from the loop thread, in the uplink namespace (they need none: they only rebuild BPF maps).
  for (size_t i = 0; i < kDnsWorkers; ++i) workers_.emplace_back([this] { work(); });
}

void DnsService::work() {
  for (;;) {
    std::shared_ptr<DnsContext> ctx;
    std::list<DnsAllowJob> jobs;
    {
      std::unique_lock<std::mutex> lk(mu_);
      cv_.wait(lk, [&] { return stop_ || !ring_.empty(); });
      if (stop_) return;
      ctx = std::move(ring_.front());
      ring_.pop_front();
      ctx->allow_listed = false;
      ctx->allow_busy = true;
      jobs.splice(jobs.end(), ctx->allow_jobs);  // all of the sandbox's adds: one rebuild
    }
    size_t lost = 0, batch = 0;
    bool failed = false;
    std::string error;
    try {
      std::vector<policy::NetResolved> merged;
      for (const DnsAllowJob& j : jobs) merged.insert(merged.end(), j.records.begin(), j.records.end());
      batch = merged.size();
      lost = add_to_allowlist(ctx->cgroup(), merged, ctx->protect());
    } catch (const std::exception& e) {
      // Also for a prune: the sandbox is going away, and its group takes the allowlist with it.
      failed = true;
      try {
        error = e.what();
      } catch (const std::exception&) {
      }
    }
    for (DnsAllowJob& j : jobs) {
      j.lost = lost;
      j.batch = batch;
      j.failed = failed;
      try {
        j.error = error;
      } catch (const std::exception&) {
      }
    }
    {
      std::lock_guard<std::mutex> lk(mu_);
      ctx->allow_busy = false;
      if (!ctx->allow_jobs.empty() && !ctx->allow_listed) {
        // More came while it was served: to the back of the ring, behind the other sandboxes.
        try {
          ring_.push_back(ctx);
          ctx->allow_listed = true;
        } catch (const std::exception&) {
          // Its jobs wait for the next add to list it, or their deadline.
        }
      }
      allow_done_.splice(allow_done_.end(), jobs);
    }
    cv_.notify_one();
    wake();
  }
}

void DnsService::on_event(uint32_t) {
  uint64_t n = 0;
  (void)!::read(wake_.get(), &n, sizeof n);
  std::list<DnsAllowJob> finished;
  {
    std::lock_guard<std::mutex> lk(mu_);
    finished.splice(finished.end(), allow_done_);
  }
  for (DnsAllowJob& j : finished) {
    auto it = j.query ? queries_.find(j.query) : queries_.end();
    if (it == queries_.end() || !it->second->waiting_allowlist) continue;  // a prune, or answered already
    Query& q = *it->second;
    try {
      if (j.failed) {
        // An answer the allowlist does not hold would only make the sandbox's connect fail: say SERVFAIL.
        servfail(q, "failed: the allowlist could not take the answer: ", j.error);
        continue;
      }
      const size_t mine = j.records.size();
      if (j.lost && j.batch == mine)
        q.result.outcome += "; " + std::to_string(j.lost) + " not placed in the allowlist (protected or full)";
      else if (j.lost)
        q.result.outcome += "; " + std::to_string(j.lost) + " of " + std::to_string(j.batch) +
                            " records added with it not placed in the allowlist (protected or full)";
      complete(q, mine - std::min(j.lost, mine));
    } catch (const std::exception&) {
      q.result.reply.clear();  // no reply rather than one the allowlist may not hold
      complete(q, 0);
    }
  }
  std::deque<std::pair<Done, std::vector<uint8_t>>> ready;
  ready.swap(ready_);
  for (auto& [done, reply] : ready) {
    try {
      if (done) done(std::move(reply));
    } catch (const std::exception&) {
      // A sandbox's reply that could not be sent: its library asks again.
    }
  }
}

}  // namespace sandlet::netgw
