// Publishing a runtime's counters and histograms for the other processes on its root: `sandlet metrics`
// runs in a process of its own, so what each runtime counted in memory is written (at most once a second,
// by a timer on its loop, after a change) to <root>/metrics/<pid>-<start>-<n>.json, and a node-wide view
// sums the files of live processes (those of dead ones are removed by whoever reads them).
#pragma once
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace sandlet {

class Metrics;
struct MetricFamily;

class MetricsPublisher final {
 public:
  // `io`: the runtime's loop (the timer runs there); `closed`: whether the runtime is closing.
  MetricsPublisher(std::string root, Metrics& metrics, boost::asio::io_context& io, std::function<bool()> closed);
  // From now on, each change of the counters arms one publish.
  void start();
  // No further publish; an armed one is cancelled (posted to the loop, which must still run).
  void stop() noexcept;
  // Removes this runtime's file (the runtime is closed).
  void unpublish() noexcept;
  // Adds the families every other live runtime of the root published.
  void add_others(std::vector<MetricFamily>& into) const;

 private:
  void publish() noexcept;

  const std::string root_;
  Metrics& metrics_;
  boost::asio::io_context& io_;
  std::function<bool()> closed_;
  std::string file_;  // <root>/metrics/<pid>-<start>-<n>.json
  std::mutex mutex_;
  std::weak_ptr<boost::asio::steady_timer> timer_;  // the armed publish, if any
};

}  // namespace sandlet
