#include "netgw/dns_service.hpp"

#include <fcntl.h>
#include <sys/eventfd.h>
#include <sys/file.h>
#include <unistd.h>

#include <cstdio>

#include "common/error.hpp"
#include "net/gate_allowlist.hpp"
#include "netgw/limits.hpp"
#include "policy/net_filter.hpp"

namespace sandlet::netgw {
namespace {

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
  loop_.add(wake_.get(), EPOLLIN, this);
}

DnsService::~DnsService() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (std::thread& t : workers_) t.join();
  loop_.remove(wake_.get());
}

bool DnsService::submit(const std::shared_ptr<DnsContext>& ctx, std::vector<uint8_t> query, net::DnsTransport transport,
                        Done done) {
  std::lock_guard<std::mutex> lk(mu_);
  if (queue_.size() >= kDnsQueued || ctx->inflight.load() >= static_cast<int>(kDnsPerSandbox)) {
    ctx->log().record(proto::DnsVerdict::kDropped, 0, "", 0, "dropped: too many queries in flight");
    return false;
  }
  if (workers_.empty()) {
    for (size_t i = 0; i < kDnsWorkers; ++i) workers_.emplace_back([this] { work(); });
  }
  ++ctx->inflight;
  queue_.push_back({ctx, std::move(query), transport, std::move(done)});
  cv_.notify_one();
  return true;
}

void DnsService::prune(const std::shared_ptr<DnsContext>& ctx) {
  std::lock_guard<std::mutex> lk(mu_);
  if (queue_.size() >= kDnsQueued || workers_.empty()) return;  // no worker yet: nothing was ever added
  queue_.push_back({ctx, {}, net::DnsTransport::kUdp, {}});
  cv_.notify_one();
}

void DnsService::work() {
  for (;;) {
    Job job;
    {
      std::unique_lock<std::mutex> lk(mu_);
      cv_.wait(lk, [&] { return stop_ || !queue_.empty(); });
      if (stop_) return;
      job = std::move(queue_.front());
      queue_.pop_front();
    }
    if (!job.done) {
      try {
        (void)add_to_allowlist(job.ctx->cgroup(), {}, job.ctx->protect());
      } catch (const std::exception&) {
        // The sandbox is going away; its group takes the allowlist with it.
      }
      continue;
    }
    decide(job);
    --job.ctx->inflight;
    {
      std::lock_guard<std::mutex> lk(mu_);
      done_.emplace_back(std::move(job.done), std::move(job.query));  // `query` now holds the reply
    }
    const uint64_t one = 1;
    (void)!::write(wake_.get(), &one, sizeof one);
  }
}

// Decides one query; leaves the reply in job.query.
void DnsService::decide(Job& job) {
  DnsContext& ctx = *job.ctx;
  const std::shared_ptr<const DnsPolicy> policy = ctx.policy();
  net::GateResult r;
  if (policy) r = policy->gate.handle(job.query, job.transport);
  else r.outcome = "dropped: the sandbox has no resolver";
  size_t opened = 0;
  if (!r.allow.empty()) {
    try {
      const auto records = net::resolved_of(r, policy->names, policy::net_clock_now());
      const size_t lost = add_to_allowlist(ctx.cgroup(), records, ctx.protect());
      opened = records.size() - std::min(lost, records.size());
      if (lost) r.outcome += "; " + std::to_string(lost) + " not placed in the allowlist (protected or full)";
    } catch (const std::exception& e) {
      // An answer the allowlist does not hold would only make the sandbox's connect fail: say SERVFAIL.
      r.reply = net::build_dns_reply(net::parse_dns(job.query, job.transport).message, net::kDnsServFail, {}, job.transport);
      r.outcome = std::string("failed: the allowlist could not take the answer: ") + e.what();
    }
  }
  ctx.log().record(verdict_of(rcode_of(r.reply, job.transport)), r.type, r.name,
                   static_cast<uint16_t>(std::min<size_t>(opened, 65535)), r.outcome);
  job.query = std::move(r.reply);
}

void DnsService::on_event(uint32_t) {
  uint64_t n = 0;
  (void)!::read(wake_.get(), &n, sizeof n);
  std::deque<std::pair<Done, std::vector<uint8_t>>> ready;
  {
    std::lock_guard<std::mutex> lk(mu_);
    ready.swap(done_);
  }
  for (auto& [done, reply] : ready) done(std::move(reply));
}

}  // namespace sandlet::netgw
