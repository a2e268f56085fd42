#include "lazy/fetcher.hpp"

#include <fcntl.h>
#include <liburing.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "common/error.hpp"
#include "image/sha256.hpp"
#include "lazy/chunk_index.hpp"
#include "lazy/loader_protocol.hpp"
#include "lazy/seqpacket.hpp"
#include "lazy/takeover.hpp"
#include "remote_store/blob_store.hpp"
#include "remote_store/store_url.hpp"
#include "sys/fs_util.hpp"

namespace sandlet::lazy {
namespace {

constexpr int kVerifyRetries = 2;  // a chunk that fails its digest this often more is refused (EIO)

struct Blob {
  uint32_t id = 0;
  std::string sha, url, index_path, cache_path;
  std::string access_key, secret_key, session_token;
  ChunkIndex index;
  sys::UniqueFd cache, claims;
  std::vector<uint8_t> done;  // written (and verified) by this fetcher
};

struct Job {
  Blob* blob = nullptr;
  size_t first = 0, last = 0;
  bool prefetch = false;
  int attempt = 0, verify_failures = 0;
  uint64_t since_ns = 0, not_before_ns = 0;
  // Filled in by a worker:
  std::vector<char> data;
  uint64_t offset = 0;
  size_t written = 0;
  int error = 0;
  bool retryable = false;
  bool from_cache = false;
  std::string why;
};

bool chunks_verify(const Blob& b, size_t first, size_t last, std::vector<char>& data, uint64_t offset) {
  for (size_t c = first; c <= last; ++c) {
    const auto& rec = b.index.at(c);
    uint64_t at = b.index.start(c) - offset;
    image::Sha256 h;
    h.update(data.data() + at, rec.length);
    if (h.finish() != rec.digest) return false;
    // Padding up to the next chunk: never the store's bytes (nothing reads them, but they stay zeros).
    uint64_t stop = c < last ? b.index.start(c + 1) - offset : data.size();
    if (at + rec.length < stop) std::memset(data.data() + at + rec.length, 0, stop - at - rec.length);
  }
  return true;
}

class Fetcher final {
 public:
  explicit Fetcher(const FetcherOptions& o) : opt_(o), holder_(o.fd) {}
  int run();

 private:
  void on_holder_message(const std::string& msg, std::vector<sys::UniqueFd>& fds);
  void enqueue(Blob* b, size_t first, size_t last, bool prefetch);
  void worker();
  void work(Job& j);
  void completed();
  void write_out(Job* j);
  void report(Job& j);
  void submit_recv();
  void submit_event_read();
  void submit_tick();
  void succeed_holder();

  FetcherOptions opt_;
  // Kept from the holder (kKeep): what its successor needs should it be killed.
  sys::UniqueFd keep_group_, keep_lock_, keep_table_;
  std::string keep_root_;
  uint64_t keep_cache_max_ = 0;
  sys::UniqueFd holder_;
  sys::UniqueFd wake_;  // eventfd: a worker finished a job
  io_uring ring_{};
  std::map<uint32_t, std::unique_ptr<Blob>> blobs_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job*> urgent_, prefetch_, finished_;
  std::vector<Job*> delayed_;
  bool quit_ = false;
  std::vector<std::thread> workers_;
  // Receive buffers.
  std::vector<char> rbuf_ = std::vector<char>(64 * 1024);
  alignas(cmsghdr) char rctl_[CMSG_SPACE(sizeof(int) * 4)];
  iovec riov_{};
  msghdr rmsg_{};
  uint64_t wake_value_ = 0;
  __kernel_timespec tick_{0, 50'000'000};
};

enum : uint64_t { kTagRecv = 1, kTagWake = 2, kTagTick = 3 };  // other user_data values are Job pointers

void Fetcher::submit_recv() {
  riov_ = {rbuf_.data(), rbuf_.size()};
  rmsg_ = {};
  rmsg_.msg_iov = &riov_;
  rmsg_.msg_iovlen = 1;
  rmsg_.msg_control = rctl_;
  rmsg_.msg_controllen = sizeof rctl_;
  io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
  io_uring_prep_recvmsg(sqe, holder_.get(), &rmsg_, MSG_CMSG_CLOEXEC);
  io_uring_sqe_set_data64(sqe, kTagRecv);
}

void Fetcher::submit_event_read() {
  io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
  io_uring_prep_read(sqe, wake_.get(), &wake_value_, sizeof wake_value_, 0);
  io_uring_sqe_set_data64(sqe, kTagWake);
}

void Fetcher::submit_tick() {
  io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
  io_uring_prep_timeout(sqe, &tick_, 0, 0);
  io_uring_sqe_set_data64(sqe, kTagTick);
}

void Fetcher::enqueue(Blob* b, size_t first, size_t last, bool prefetch) {
  // Widen to the fetch unit: the unit-aligned window around the request, whole chunks, skipping chunks this
  // fetcher already wrote at its edges.
  uint64_t unit = opt_.fetch_unit;
  uint64_t win_lo = b->index.start(first) / unit * unit;
  uint64_t win_hi = std::max(b->index.end(last), win_lo + unit);
  while (first > 0 && b->index.start(first - 1) >= win_lo && !b->done[first - 1]) --first;
  while (last + 1 < b->index.size() && b->index.end(last + 1) <= win_hi && !b->done[last + 1]) ++last;
  auto* j = new Job;
  j->blob = b;
  j->first = first;
  j->last = last;
  j->prefetch = prefetch;
  j->since_ns = sys::now_monotonic_ns();
  {
    std::lock_guard<std::mutex> lk(mu_);
    (prefetch ? prefetch_ : urgent_).push_back(j);
  }
  cv_.notify_one();
}

void Fetcher::on_holder_message(const std::string& msg, std::vector<sys::UniqueFd>& fds) {
  if (msg.size() < sizeof(uint32_t)) return;
  uint32_t type;
  std::memcpy(&type, msg.data(), sizeof type);
  if (type == static_cast<uint32_t>(FetchMsg::kOpenBlob) && msg.size() >= sizeof(OpenBlob) && fds.size() == 1) {
    OpenBlob m;
    std::memcpy(&m, msg.data(), sizeof m);
    size_t need = sizeof m + size_t{m.url_len} + m.index_len + m.creds_len;
    if (msg.size() != need) return;
    auto b = std::make_unique<Blob>();
    b->id = m.blob_id;
    b->sha.assign(m.sha, 64);
    const char* p = msg.data() + sizeof m;
    b->url.assign(p, m.url_len);
    b->index_path.assign(p + m.url_len, m.index_len);
    std::string creds(p + m.url_len + m.index_len, m.creds_len);
    std::string* fields[] = {&b->access_key, &b->secret_key, &b->session_token};
    size_t at = 0;
    for (auto* f : fields) {
      uint32_t n = 0;
      if (at + 4 > creds.size()) break;
      std::memcpy(&n, creds.data() + at, 4);
      at += 4;
      if (at + n > creds.size()) break;
      f->assign(creds, at, n);
      at += n;
    }
    try {
      b->index = ChunkIndex::load(b->index_path);
    } catch (const Error&) {
      return;  // every fill of it then fails at the holder's deadline
    }
    b->cache = std::move(fds[0]);
    // The cache file is <root>/layers/cache/<sha>: its claims file sits beside it.
    std::string root = b->index_path.substr(0, b->index_path.size() - std::string("/layers/blobs/").size() - 64 - 7);
    b->cache_path = cache_dir(root) + "/" + b->sha;
    b->claims.reset(::open((b->cache_path + ".filled").c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644));
    b->done.assign(b->index.size(), 0);
    blobs_[b->id] = std::move(b);
  } else if (type == static_cast<uint32_t>(FetchMsg::kFill) && msg.size() == sizeof(Fill)) {
    Fill f;
    std::memcpy(&f, msg.data(), sizeof f);
    auto it = blobs_.find(f.blob_id);
    if (it == blobs_.end() || f.first > f.last || f.last >= it->second->index.size()) return;
    enqueue(it->second.get(), f.first, f.last, f.prefetch != 0);
  } else if (type == static_cast<uint32_t>(FetchMsg::kKeep) && msg.size() >= sizeof(Keep) && fds.size() == 3) {
    Keep k;
    std::memcpy(&k, msg.data(), sizeof k);
    if (msg.size() != sizeof k + size_t{k.root_len}) return;
    keep_root_.assign(msg.data() + sizeof k, k.root_len);
    keep_cache_max_ = k.cache_max_bytes;
    keep_group_ = std::move(fds[0]);
    keep_lock_ = std::move(fds[1]);
    keep_table_ = std::move(fds[2]);
  } else if (type == static_cast<uint32_t>(FetchMsg::kCloseBlob) && msg.size() == sizeof(CloseBlob)) {
    CloseBlob c;
    std::memcpy(&c, msg.data(), sizeof c);
    blobs_.erase(c.blob_id);
  }
}

void Fetcher::work(Job& j) {
  Blob& b = *j.blob;
  j.offset = b.index.start(j.first);
  uint64_t len = b.index.end(j.last) - j.offset;
  len = (len + 4095) / 4096 * 4096;
  if (j.offset + len > b.index.blob_size()) len = b.index.blob_size() - j.offset;
  j.data.assign(len, 0);
  // Chunks a previous fetcher wrote are checked in place before anything is fetched (cache reuse).
  bool all_claimed = b.claims && b.index.size() > 0;
  for (size_t c = j.first; c <= j.last && all_claimed; ++c) {
    char flag = 0;
    if (::pread(b.claims.get(), &flag, 1, static_cast<off_t>(c)) != 1 || flag != 1) all_claimed = false;
  }
  if (all_claimed) {
    ssize_t n = ::pread(b.cache.get(), j.data.data(), j.data.size(), static_cast<off_t>(j.offset));
    if (n == static_cast<ssize_t>(j.data.size()) && chunks_verify(b, j.first, j.last, j.data, j.offset)) {
      j.from_cache = true;
      return;
    }
  }
  try {
    thread_local std::map<std::string, std::unique_ptr<store::BlobStore>> stores;
    auto& s = stores[b.url];
    if (!s) {
      store::StoreConfig cfg = store::parse_store_url(b.url);
      if (!b.access_key.empty()) cfg.access_key = b.access_key;
      if (!b.secret_key.empty()) cfg.secret_key = b.secret_key;
      if (!b.session_token.empty()) cfg.session_token = b.session_token;
      cfg.retries = 1;  // this loop retries until the fill deadline
      s = store::open_store(cfg);
    }
    s->get_range("blobs/" + b.sha, j.offset, j.data.size(), j.data.data());
  } catch (const Error& e) {
    j.error = EIO;
    j.retryable = e.code() != Code::kNotFound && e.code() != Code::kPermissionDenied && e.code() != Code::kInvalidArgument;
    j.why = e.what();
    return;
  }
  if (!chunks_verify(b, j.first, j.last, j.data, j.offset)) {
    ++j.verify_failures;
    j.error = EIO;
    j.retryable = j.verify_failures <= kVerifyRetries;
    j.why = "a chunk does not match its digest";
  }
}

void Fetcher::worker() {
  for (;;) {
    Job* j;
    {
      std::unique_lock<std::mutex> lk(mu_);
      cv_.wait(lk, [&] { return quit_ || !urgent_.empty() || !prefetch_.empty(); });
      if (quit_) return;
      auto& q = urgent_.empty() ? prefetch_ : urgent_;
      j = q.front();
      q.pop_front();
    }
    j->error = 0;
    j->retryable = false;
    work(*j);
    {
      std::lock_guard<std::mutex> lk(mu_);
      finished_.push_back(j);
    }
    uint64_t one = 1;
    (void)::write(wake_.get(), &one, sizeof one);
  }
}

void Fetcher::succeed_holder() {
  if (!keep_group_) return;
  Handover h;
  h.root = keep_root_;
  h.settings.cache_max_bytes = keep_cache_max_;
  h.settings.fetch_unit = opt_.fetch_unit;
  h.settings.fetch_concurrency = opt_.concurrency;
  h.settings.fill_timeout_ms = opt_.fill_timeout_ms;
  h.group = keep_group_.get();
  h.lock = keep_lock_.get();
  h.table = keep_table_.get();
  for (const auto& [id, b] : blobs_)
    h.blobs.push_back({b->sha, b->cache.get(), b->url, b->access_key, b->secret_key, b->session_token});
  char self[4096];
  ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return;
  self[n] = 0;
  try {
    start_successor(self, h);
    std::fprintf(stderr, "sandlet-loader fetch: the holder died; a successor took over %zu cache files\n", h.blobs.size());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sandlet-loader fetch: the holder died and no successor started: %s\n", e.what());
  }
}

// Every refused fill reaches <root>/loader/loader.log (this process's stderr): a reader got EIO for it.
void log_refused(const Job& j) {
  std::fprintf(stderr, "sandlet-loader fetch: blob %.12s chunks %zu-%zu refused after %d attempts: %s\n",
               j.blob->sha.c_str(), j.first, j.last, j.attempt + 1, j.why.c_str());
}

void Fetcher::report(Job& j) {
  Filled f;
  f.blob_id = j.blob->id;
  f.first = static_cast<uint32_t>(j.first);
  f.last = static_cast<uint32_t>(j.last);
  f.error = j.error;
  f.from_cache = j.from_cache ? static_cast<uint32_t>(j.last - j.first + 1) : 0;
  f.bytes_fetched = j.error || j.from_cache ? 0 : j.data.size();
  f.latency_ns = sys::now_monotonic_ns() - j.since_ns;
  (void)::send(holder_.get(), &f, sizeof f, MSG_NOSIGNAL);
}

void Fetcher::write_out(Job* j) {
  io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
  if (!sqe) {
    io_uring_submit(&ring_);
    sqe = io_uring_get_sqe(&ring_);
  }
  io_uring_prep_write(sqe, j->blob->cache.get(), j->data.data() + j->written,
                      static_cast<unsigned>(j->data.size() - j->written), j->offset + j->written);
  io_uring_sqe_set_data(sqe, j);
}

void Fetcher::completed() {
  std::deque<Job*> done;
  {
    std::lock_guard<std::mutex> lk(mu_);
    done.swap(finished_);
  }
  uint64_t now = sys::now_monotonic_ns();
  for (Job* j : done) {
    if (j->from_cache) {
      std::fill(j->blob->done.begin() + j->first, j->blob->done.begin() + j->last + 1, 1);
      report(*j);
      delete j;
    } else if (!j->error) {
      j->written = 0;
      write_out(j);
    } else if (j->retryable && now - j->since_ns < uint64_t{opt_.fill_timeout_ms} * 1'000'000) {
      // Back off: 50 ms doubling to 2 s.
      j->attempt = std::min(j->attempt + 1, 6);
      j->not_before_ns = now + std::min<uint64_t>(50'000'000ull << (j->attempt - 1), 2'000'000'000ull);
      delayed_.push_back(j);
    } else {
      log_refused(*j);
      report(*j);
      delete j;
    }
  }
}

int Fetcher::run() {
  ::signal(SIGPIPE, SIG_IGN);
  wake_.reset(::eventfd(0, EFD_CLOEXEC));
  if (!wake_) throw_errno("eventfd");
  int rc = io_uring_queue_init(256, &ring_, 0);
  if (rc < 0) throw_errno("io_uring_queue_init", -rc);
  for (uint32_t i = 0; i < std::max(1u, opt_.concurrency); ++i) workers_.emplace_back([this] { worker(); });
  submit_recv();
  submit_event_read();
  submit_tick();
  bool running = true;
  while (running) {
    io_uring_submit_and_wait(&ring_, 1);
    io_uring_cqe* cqe;
    unsigned head, seen = 0;
    io_uring_for_each_cqe(&ring_, head, cqe) {
      ++seen;
      uint64_t tag = io_uring_cqe_get_data64(cqe);
      int res = cqe->res;
      if (tag == kTagRecv) {
        if (res <= 0) {
          // The holder is gone. Killed, it leaves readers held by the group this process keeps open: a
          // successor takes the group over (a holder that stops kills this process first).
          succeed_holder();
          running = false;
          continue;
        }
        std::vector<sys::UniqueFd> fds;
        for (cmsghdr* c = CMSG_FIRSTHDR(&rmsg_); c; c = CMSG_NXTHDR(&rmsg_, c)) {
          if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
          size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
          for (size_t i = 0; i < count; ++i) {
            int f;
            std::memcpy(&f, CMSG_DATA(c) + i * sizeof(int), sizeof f);
            fds.emplace_back(f);
          }
        }
        on_holder_message(std::string(rbuf_.data(), static_cast<size_t>(res)), fds);
        submit_recv();
      } else if (tag == kTagWake) {
        completed();
        submit_event_read();
      } else if (tag == kTagTick) {
        uint64_t now = sys::now_monotonic_ns();
        std::vector<Job*> again;
        for (auto it = delayed_.begin(); it != delayed_.end();) {
          if ((*it)->not_before_ns <= now) {
            again.push_back(*it);
            it = delayed_.erase(it);
          } else {
            ++it;
          }
        }
        if (!again.empty()) {
          std::lock_guard<std::mutex> lk(mu_);
          for (Job* j : again) (j->prefetch ? prefetch_ : urgent_).push_back(j);
        }
        if (!again.empty()) cv_.notify_all();
        submit_tick();
      } else {
        Job* j = reinterpret_cast<Job*>(tag);
        if (res > 0) j->written += static_cast<size_t>(res);
        if (res > 0 && j->written < j->data.size()) {
          write_out(j);
          continue;
        }
        if (res < 0) {
          j->error = EIO;
          j->why = std::string("writing the cache: ") + std::strerror(-res);
          log_refused(*j);
        } else {
          // Claimed only once written: a later fetcher trusts nothing before checking it anyway.
          std::fill(j->blob->done.begin() + j->first, j->blob->done.begin() + j->last + 1, 1);
          if (j->blob->claims) {
            std::string ones(j->last - j->first + 1, '\1');
            (void)::pwrite(j->blob->claims.get(), ones.data(), ones.size(), static_cast<off_t>(j->first));
          }
        }
        report(*j);
        delete j;
      }
    }
    io_uring_cq_advance(&ring_, seen);
  }
  {
    std::lock_guard<std::mutex> lk(mu_);
    quit_ = true;
  }
  cv_.notify_all();
  for (auto& t : workers_) t.join();
  io_uring_queue_exit(&ring_);
  return 0;
}

}  // namespace

int run_fetcher(const FetcherOptions& options) {
  Fetcher f(options);
  return f.run();
}

}  // namespace sandlet::lazy
