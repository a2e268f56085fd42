// The runtime's side of node admission (admission.hpp): which budget, what a spec asks for, and the
// reservation each sandbox holds until it ends.
#include <unistd.h>

#include <cmath>

#include "common/error.hpp"
#include "runtime/metrics/admission.hpp"
#include "runtime/metrics/metrics.hpp"
#include "runtime/runtime.hpp"
#include "sys/fs_util.hpp"

namespace sandlet {

void Runtime::set_admission(const AdmissionOptions& options) {
  std::shared_ptr<NodeAdmission> a;
  if (options.enabled()) a = std::make_shared<NodeAdmission>(root_ + "/admission.json", options);
  std::lock_guard lock(admission_mutex_);
  admission_ = std::move(a);
}

std::shared_ptr<NodeAdmission> Runtime::admission() const {
  std::lock_guard lock(admission_mutex_);
  return admission_;
}

std::string Runtime::admit(const Spec& spec) {
  std::shared_ptr<NodeAdmission> a = admission();
  if (!a) return "";
  AdmissionRequest req;
  req.key = std::to_string(::getpid()) + "-" + sys::random_hex(8);
  req.memory = spec.limits.memory;
  req.pids = spec.limits.pids;
  req.cpu_millis = static_cast<uint64_t>(std::llround(spec.limits.cpus * 1000));
  req.priority = spec_priority(spec) == SpecPriority::kLatency ? AdmissionPriority::kLatency : AdmissionPriority::kBatch;
  metrics_->admission_wait(a->admit(req));
  return req.key;
}

void Runtime::admitted(const std::string& key, const std::string& id, bool ok) {
  if (key.empty()) return;
  std::shared_ptr<NodeAdmission> a = admission();
  if (!a) return;
  try {
    if (!ok) {
      a->release(key);
      return;
    }
    a->initialised(key);
    std::lock_guard lock(admission_mutex_);
    admission_keys_[id] = key;
  } catch (...) {  // the file could not be updated: a dead process's entries are dropped by the next reader
  }
}

void Runtime::release_admission(const std::string& id) {
  std::string key;
  std::shared_ptr<NodeAdmission> a;
  {
    std::lock_guard lock(admission_mutex_);
    auto it = admission_keys_.find(id);
    if (it == admission_keys_.end()) return;
    key = it->second;
    admission_keys_.erase(it);
    a = admission_;
  }
  if (!a) return;
  try {
    a->release(key);
  } catch (...) {
  }
}

}  // namespace sandlet
