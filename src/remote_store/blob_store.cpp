#include "remote_store/blob_store.hpp"

#include <algorithm>
#include <random>

namespace sandlet::store {

std::unique_ptr<BlobStore> open_store(const StoreConfig& config) {
  if (config.kind == StoreConfig::Kind::kDir) return open_dir_store(config);
  return open_http_store(config);
}

double retry_delay_s(int attempt) {
  const double base = std::min(2.0, 0.05 * static_cast<double>(1u << std::min(attempt - 1, 10)));
  // "Equal jitter": half fixed, half random, so that clients that failed together do not retry together.
  thread_local std::minstd_rand rng{std::random_device{}()};
  std::uniform_real_distribution<double> half(0.0, base / 2);
  return base / 2 + half(rng);
}

}  // namespace sandlet::store
