// A token bucket over bytes (a sandbox's egress_rate): refilled at `rate` bytes/s up to a burst of a
// quarter second (at least 16 KiB), so a long transfer averages the rate.
#pragma once
#include <algorithm>
#include <chrono>
#include <cstdint>

namespace sandlet::netgw {

class RateLimit final {
 public:
  explicit RateLimit(uint64_t rate = 0)
      : rate_(static_cast<double>(rate)), burst_(std::max(rate_ / 4, 16384.0)), tokens_(burst_) {}
  bool unlimited() const { return rate_ == 0; }
  // Bytes that may be sent now (SIZE_MAX-like when unlimited).
  uint64_t available() {
    if (unlimited()) return UINT64_MAX;
    refill();
    return static_cast<uint64_t>(tokens_);
  }
  void spend(uint64_t n) {
    if (!unlimited()) tokens_ = std::max(0.0, tokens_ - static_cast<double>(n));
  }

 private:
  void refill() {
    const auto now = std::chrono::steady_clock::now();
    const double s = std::chrono::duration<double>(now - last_).count();
    last_ = now;
    tokens_ = std::min(burst_, tokens_ + s * rate_);
  }
  double rate_, burst_, tokens_;
  std::chrono::steady_clock::time_point last_ = std::chrono::steady_clock::now();
};

}  // namespace sandlet::netgw
