// MetricsPublisher (metrics_publisher.hpp): this runtime's counters out, the other runtimes' in.
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>

#include "runtime/metrics/metrics.hpp"
#include "runtime/metrics/metrics_publisher.hpp"
#include "sys/fs_util.hpp"

namespace sandlet {

namespace {
constexpr auto kPublishDelay = std::chrono::seconds(1);
constexpr size_t kMaxPublishedBytes = 1u << 20;

// "<pid>-<start>-<n>.json" -> pid, start; false when the name is not one of ours.
bool parse_name(const std::string& name, pid_t* pid, uint64_t* start) {
  unsigned long long p = 0, s = 0, n = 0;
  char tail[8] = {0};
  if (std::sscanf(name.c_str(), "%llu-%llu-%llu.%5s", &p, &s, &n, tail) != 4 || std::string(tail) != "json") return false;
  *pid = static_cast<pid_t>(p);
  *start = s;
  return true;
}
}  // namespace

MetricsPublisher::MetricsPublisher(std::string root, Metrics& metrics, boost::asio::io_context& io,
                                   std::function<bool()> closed)
    : root_(std::move(root)), metrics_(metrics), io_(io), closed_(std::move(closed)) {
  static std::atomic<uint64_t> runtimes{0};  // several runtimes of one process publish apart
  file_ = root_ + "/metrics/" + std::to_string(::getpid()) + "-" + std::to_string(sys::own_start_time()) + "-" +
          std::to_string(runtimes++) + ".json";
}

void MetricsPublisher::start() {
  metrics_.set_on_change([this] {
    if (closed_()) return;
    // Any thread; each change after a publish arms one timer, so a burst costs one write.
    auto timer = std::make_shared<boost::asio::steady_timer>(io_, kPublishDelay);
    {
      std::lock_guard lock(mutex_);
      timer_ = timer;
    }
    timer->async_wait([this, timer](boost::system::error_code ec) {
      if (!ec) publish();
    });
  });
}

void MetricsPublisher::publish() noexcept {
  try {
    metrics_.mark_published();  // first: a change while writing arms the next publish
    std::vector<MetricFamily> own;
    metrics_.append_families(own, sys::now_monotonic_ns());
    ::mkdir((root_ + "/metrics").c_str(), 0700);
    sys::write_file_atomic(file_, render_metrics_json(own));
  } catch (...) {  // best effort: the node-wide view misses this runtime until the next publish
  }
}

void MetricsPublisher::stop() noexcept {
  metrics_.set_on_change(nullptr);
  std::weak_ptr<boost::asio::steady_timer> armed;
  {
    std::lock_guard lock(mutex_);
    armed = timer_;
  }
  // On the loop's thread, as every other use of the timer.
  boost::asio::post(io_, [armed] {
    if (auto timer = armed.lock()) timer->cancel();
  });
}

void MetricsPublisher::unpublish() noexcept { ::unlink(file_.c_str()); }

void MetricsPublisher::add_others(std::vector<MetricFamily>& into) const {
  const std::string dir = root_ + "/metrics";
  DIR* d = ::opendir(dir.c_str());
  if (!d) return;
  std::vector<std::string> names;
  while (dirent* e = ::readdir(d)) names.emplace_back(e->d_name);
  ::closedir(d);
  size_t sets = 1;
  const std::string own = file_.substr(file_.rfind('/') + 1);
  for (const std::string& name : names) {
    pid_t pid = 0;
    uint64_t start = 0;
    if (name == own || !parse_name(name, &pid, &start)) continue;
    const std::string path = dir + "/" + name;
    if (!sys::process_alive(pid, start)) {
      ::unlink(path.c_str());  // a crashed runtime's last counters
      continue;
    }
    try {
      auto text = sys::read_file_if_exists(path, kMaxPublishedBytes);
      if (!text) continue;
      add_metric_families(into, parse_metrics_json(*text), sets++);
    } catch (...) {  // a malformed file (or one replaced while read): skipped this time
    }
  }
}

}  // namespace sandlet
