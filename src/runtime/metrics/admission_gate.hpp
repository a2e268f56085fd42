// The runtime's side of node admission (admission.hpp): which budget applies (none until set), what a
// spec asks of it, and the reservation each sandbox holds from its create until it ends.
#pragma once
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "spec/spec.hpp"

namespace sandlet {

class Metrics;
class NodeAdmission;
struct AdmissionOptions;

class AdmissionGate final {
 public:
  AdmissionGate(std::string root, Metrics& metrics) : root_(std::move(root)), metrics_(metrics) {}
  // Options with no bound turn admission off.
  void set(const AdmissionOptions& options);
  std::shared_ptr<NodeAdmission> current() const;
  // Waits for room for `spec` (blocks); returns the reservation key ("" when admission is off).
  std::string admit(const Spec& spec);
  // The create with reservation `key` ended: kept for sandbox `id` when `ok`, else given back.
  void admitted(const std::string& key, const std::string& id, bool ok);
  // Sandbox `id` ended: its reservation is given back. Never throws.
  void release(const std::string& id) noexcept;
  // Creates waiting for room give up (the runtime closes).
  void cancel_waiting() noexcept;

 private:
  const std::string root_;
  Metrics& metrics_;
  mutable std::mutex mutex_;
  std::shared_ptr<NodeAdmission> admission_;
  std::map<std::string, std::string> keys_;  // sandbox id -> reservation key
};

}  // namespace sandlet
