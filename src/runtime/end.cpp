// The one way a sandbox ends (lifecycle.hpp): retire it — kill (synchronous: nothing of it runs afterwards)
// and hide it (no longer listed or attachable) — then reclaim its host resources, on a worker. Every path
// goes through these two steps: a destroy, an exit seen by the watcher, a one-shot's end, the runtime's
// close, gc (from the record alone); a create that failed is abandoned instead (its object unwinds).
#include <boost/json.hpp>
#include <cstring>

#include "common/fault_point.hpp"
#include "runtime/audit/audit_records.hpp"
#include "runtime/metrics/admission_gate.hpp"
#include "runtime/runtime.hpp"
#include "runtime/metrics/metrics.hpp"
#include "sys/fs_util.hpp"

namespace sandlet {

void Runtime::end(const SandboxRecord& rec, const std::shared_ptr<BackendSandbox>& impl, const char* reason) {
  SandboxRecord claimed;
  std::shared_ptr<BackendSandbox> obj;
  if (!registry_.begin_end(rec.id, &claimed, &obj)) {
    if (registry_.started_here(rec.id)) return;  // its end is under way already (e.g. it exited by itself)
    // Attached: a sandbox of another process (or of an earlier runtime).
    if (!registry_.begin_reclaim(rec.id)) return;
    claimed = rec;
    obj = impl;
  }
  if (std::strcmp(reason, end_reason::kExited) == 0) reason = inferred_exit_reason(claimed, sys::now_unix_seconds());
  retire(claimed, *obj, reason);
  metrics_->sandbox_ended(claimed.id, sys::now_monotonic_ns());
  admission_->release(claimed.id);
  in_background([this, claimed, obj] { reclaim(claimed, obj); });
}

namespace {

// A filtered sandbox's network denials, read from its kernel filter before its cgroup (and the filter with it)
// goes: each recorded denial (the filter keeps the last 64) becomes a `denial` record, and the totals go
// into the destroy record. Best effort: the filter may be gone already (a crash during reclaim).
uint64_t number_or_zero(const boost::json::object& o, const char* k) {
  const auto* v = o.if_contains(k);
  return v && v->is_number() ? v->to_number<uint64_t>() : 0;
}

void audit_network_denials(AuditLog& audit, Metrics& metrics, const SandboxRecord& rec, BackendSandbox& impl,
                           boost::json::object& destroy_fields) noexcept {
  if (!rec.spec.network.egress()) return;
  try {
    boost::json::object stats = impl.net_stats();
    metrics.denials("network", number_or_zero(stats, "connect_denied") + number_or_zero(stats, "sendmsg_denied") +
                                   number_or_zero(stats, "egress_dropped"));
    if (const auto* dns = stats.if_contains("dns"); dns && dns->is_object())
      metrics.denials("dns", number_or_zero(dns->as_object(), "refused") + number_or_zero(dns->as_object(), "dropped"));
    if (const auto* gw = stats.if_contains("gateway"); gw && gw->is_object())
      metrics.denials("gateway", number_or_zero(gw->as_object(), "refused_policy") +
                                     number_or_zero(gw->as_object(), "refused_budget") +
                                     number_or_zero(gw->as_object(), "refused_node"));
    for (const boost::json::value& d : stats["denied"].as_array())
      audit.denial(rec.id, rec.spec.labels, "network", d.as_object());
    stats.erase("denied");
    // The resolver's decisions (the DNS log keeps the last 64): refusals are denials, the rest `dns` events.
    if (auto* dns = stats.if_contains("dns"); dns && dns->is_object()) {
      boost::json::object& d = dns->as_object();
      for (const boost::json::value& r : d["records"].as_array()) {
        const boost::json::object& o = r.as_object();
        if (o.at("verdict").as_string() == "refused") audit.denial(rec.id, rec.spec.labels, "dns", o);
        else audit.write("dns", rec.id, rec.spec.labels, o);
      }
      d.erase("records");
    }
    destroy_fields["network"] = std::move(stats);
  } catch (...) {
  }
}

// The same for its seccomp denials, from the denial log the init kept (the file outlives the init until
// reclaim). A backend that does not count them has nothing to add.
void audit_seccomp_denials(AuditLog& audit, Metrics& metrics, const SandboxRecord& rec, BackendSandbox& impl,
                           boost::json::object& destroy_fields) noexcept {
  try {
    boost::json::object stats = impl.seccomp_stats();
    metrics.denials("seccomp", number_or_zero(stats, "denied"));
    if (!stats["counted"].as_bool() && stats["denied"].to_number<uint64_t>() == 0) return;
    for (const boost::json::value& d : stats["records"].as_array())
      audit.denial(rec.id, rec.spec.labels, "seccomp", d.as_object());
    stats.erase("records");
    destroy_fields["seccomp"] = std::move(stats);
  } catch (...) {
  }
}

}  // namespace

void Runtime::retire(const SandboxRecord& rec, BackendSandbox& impl, const char* reason,
                     boost::json::object audit_extra) {
  impl.kill();
  // (The denial and DNS logs are in the sandbox's directory, which retiring moves.)
  if (reason) {
    audit_seccomp_denials(*audit_, *metrics_, rec, impl, audit_extra);
    audit_network_denials(*audit_, *metrics_, rec, impl, audit_extra);
    const bool expired = std::strcmp(reason, end_reason::kMaxLifetime) == 0 || std::strcmp(reason, end_reason::kIdleTimeout) == 0;
    if (expired && rec.spec.on_expiry == OnExpiry::kKeepLogs) expired_->keep(rec, reason);
  }
  dirs_->retire(rec.id);
  forget_record(rec.id);
  // Written once nothing of it runs any more (whoever ends a sandbox retires it, exactly once).
  if (reason) {
    audit_extra["reason"] = reason;
    audit_->write("destroy", rec.id, rec.spec.labels, std::move(audit_extra));
  }
  fault_point("runtime.retired");
}

bool Runtime::reclaim(const SandboxRecord& rec, const std::shared_ptr<BackendSandbox>& impl) noexcept {
  bool done = false;
  try {
    impl->reclaim();
    done = true;
  } catch (...) {
    // Left for gc: the record stays in the retired directory.
  }
  if (done) dirs_->remove(rec.id);
  loop_.dispose(registry_.finish(rec.id));
  layers_->release_of(rec);
  return done;
}

void Runtime::abandon(const SandboxRecord& rec, std::unique_ptr<BackendSandbox> impl) noexcept {
  if (impl) {
    // It may have got as far as running (a failure after finish): end it; an unfinished one unwinds when
    // dropped.
    impl->kill();
    try {
      impl->reclaim();
    } catch (...) {
    }
    impl.reset();
  }
  dirs_->remove(rec.id);
  forget_record(rec.id);
}

}  // namespace sandlet
