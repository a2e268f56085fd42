// AdmissionGate: a runtime's use of the node's admission budget (admission_gate.hpp).
#include "runtime/metrics/admission_gate.hpp"

#include <unistd.h>

#include <cmath>

#include "common/error.hpp"
#include "runtime/metrics/admission.hpp"
#include "runtime/metrics/metrics.hpp"
#include "sys/fs_util.hpp"

namespace sandlet {

void AdmissionGate::set(const AdmissionOptions& options) {
  std::shared_ptr<NodeAdmission> a;
  if (options.enabled()) a = std::make_shared<NodeAdmission>(root_ + "/admission.json", options);
  std::lock_guard lock(mutex_);
  admission_ = std::move(a);
}

std::shared_ptr<NodeAdmission> AdmissionGate::current() const {
  std::lock_guard lock(mutex_);
  return admission_;
}

std::string AdmissionGate::admit(const Spec& spec) {
  std::shared_ptr<NodeAdmission> a = current();
  if (!a) return "";
  AdmissionRequest req;
  req.key = std::to_string(::getpid()) + "-" + sys::random_hex(8);
  req.memory = spec.limits.memory;
  req.pids = spec.limits.pids;
  req.cpu_millis = static_cast<uint64_t>(std::llround(spec.limits.cpus * 1000));
  req.priority = spec_priority(spec) == SpecPriority::kLatency ? AdmissionPriority::kLatency : AdmissionPriority::kBatch;
  metrics_.admission_wait(a->admit(req));
  return req.key;
}

void AdmissionGate::admitted(const std::string& key, const std::string& id, bool ok) {
  if (key.empty()) return;
  std::shared_ptr<NodeAdmission> a = current();
  if (!a) return;
  try {
    if (!ok) {
      a->release(key);
      return;
    }
    a->initialised(key);
    std::lock_guard lock(mutex_);
    keys_[id] = key;
  } catch (...) {  // the file could not be updated: a dead process's entries are dropped by the next reader
  }
}

void AdmissionGate::release(const std::string& id) noexcept {
  std::string key;
  std::shared_ptr<NodeAdmission> a;
  {
    std::lock_guard lock(mutex_);
    auto it = keys_.find(id);
    if (it == keys_.end()) return;
    key = it->second;
    keys_.erase(it);
    a = admission_;
  }
  if (!a) return;
  try {
    a->release(key);
  } catch (...) {
  }
}

void AdmissionGate::cancel_waiting() noexcept {
  try {
    if (std::shared_ptr<NodeAdmission> a = current()) a->cancel();
  } catch (...) {
  }
}

}  // namespace sandlet
