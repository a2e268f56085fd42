#include "lazy/holder_state.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <tuple>

#include <sys/statfs.h>

#include "common/error.hpp"
#include "lazy/fanotify_group.hpp"
#include "sys/fs_util.hpp"

namespace sandlet::lazy {
namespace {

std::string str_field(const boost::json::object& o, const char* k) {
  auto* v = o.if_contains(k);
  return v && v->is_string() ? std::string(v->as_string()) : std::string();
}

bool is_hex64(const std::string& s) {
  return s.size() == 64 && std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

void put_str(std::string& out, const std::string& s) {
  uint32_t n = static_cast<uint32_t>(s.size());
  out.append(reinterpret_cast<const char*>(&n), sizeof n);
  out += s;
}

boost::json::object percentiles(std::vector<uint32_t> v) {
  boost::json::object o;
  if (v.empty()) {
    o["p50"] = nullptr;
    o["p90"] = nullptr;
    o["p99"] = nullptr;
    return o;
  }
  std::sort(v.begin(), v.end());
  auto at = [&](double q) { return v[std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())))] / 1000.0; };
  o["p50"] = at(0.50);
  o["p90"] = at(0.90);
  o["p99"] = at(0.99);
  return o;
}

}  // namespace

HolderState::HolderState(std::string root, LoaderSettings settings, sys::UniqueFd group, PendingTable table)
    : root_(std::move(root)), settings_(settings), group_(std::move(group)), table_(std::move(table)) {
  sys::mkdir_p(cache_dir(root_), 0700);
}

CacheBlob* HolderState::open_blob(const std::string& sha, const std::string& index, const Store& store,
                                  sys::UniqueFd adopted) {
  if (auto it = blobs_.find(sha); it != blobs_.end()) return it->second.get();
  auto blob = std::make_unique<CacheBlob>(next_id_++, cache_dir(root_), sha, index, std::move(adopted));
  CacheBlob* b = blob.get();
  // Marked before anything mounts it (a mount made first would read unfilled ranges as zeros).
  mark_file(group_.get(), b->fd(), true);
  b->marked = true;
  blobs_.emplace(sha, std::move(blob));
  by_id_[b->id()] = b;
  by_inode_[{b->dev(), b->ino()}] = b;
  store_of_[b->id()] = store;
  queue_open(*b);
  return b;
}

void HolderState::queue_open(const CacheBlob& b) {
  const Store& s = store_of_.at(b.id());
  OpenBlob m;
  m.blob_id = b.id();
  m.size = b.size();
  std::memcpy(m.sha, b.sha().data(), 64);
  m.url_len = static_cast<uint32_t>(s.url.size());
  m.index_len = static_cast<uint32_t>(b.index_path().size());
  m.creds_len = static_cast<uint32_t>(s.creds.size());
  std::string bytes(reinterpret_cast<const char*>(&m), sizeof m);
  bytes += s.url;
  bytes += b.index_path();
  bytes += s.creds;
  out_.push_back({std::move(bytes), b.fd()});
}

boost::json::object HolderState::attach(const boost::json::object& req) {
  std::string digest = str_field(req, "layer");
  if (!is_hex64(digest)) throw Error(Code::kInvalidArgument, "attach: bad layer digest");
  Store store{str_field(req, "store"), {}};
  if (auto* c = req.if_contains("creds"); c && c->is_object()) {
    for (const char* k : {"access_key", "secret_key", "session_token"}) put_str(store.creds, str_field(c->as_object(), k));
  }
  const auto* blobs = req.if_contains("blobs");
  if (!blobs || !blobs->is_array()) throw Error(Code::kInvalidArgument, "attach: no blobs");
  if (auto it = layers_.find(digest); it != layers_.end() && it->second.attached) detach(req);  // a remount
  Layer layer;
  layer.name = str_field(req, "name");
  if (auto* v = req.if_contains("image_bytes"); v && (v->is_uint64() || v->is_int64())) layer.image_bytes = v->is_uint64() ? v->as_uint64() : static_cast<uint64_t>(v->as_int64());
  boost::json::array paths;
  for (const auto& v : blobs->as_array()) {
    if (!v.is_object()) throw Error(Code::kInvalidArgument, "attach: bad blob entry");
    std::string sha = str_field(v.as_object(), "sha");
    std::string index = str_field(v.as_object(), "index");
    if (!is_hex64(sha)) throw Error(Code::kInvalidArgument, "attach: bad blob digest");
    if (index != root_ + "/layers/blobs/" + sha + ".chunks")
      throw Error(Code::kInvalidArgument, "attach: the chunk index of blob " + sha + " must be the store's own");
    CacheBlob* b = open_blob(sha, index, store);
    ++b->layers;
    b->last_used_ns = sys::now_monotonic_ns();
    layer.blobs.push_back(sha);
    paths.push_back(boost::json::value(b->path()));
    // Prefetch what earlier uses read first, in that order (bounded by the fetcher's concurrency).
    std::vector<uint32_t> order = b->recorded_order();
    for (size_t i = 0; i < order.size();) {
      size_t j = i;
      while (j + 1 < order.size() && order[j + 1] == order[j] + 1) ++j;
      if (order[i] < b->index().size() && order[j] < b->index().size()) request(*b, order[i], order[j], true);
      i = j + 1;
    }
  }
  layers_[digest] = std::move(layer);
  boost::json::object reply{{"ok", true}};
  reply["cache"] = std::move(paths);
  return reply;
}

boost::json::object HolderState::detach(const boost::json::object& req) {
  std::string digest = str_field(req, "layer");
  auto it = layers_.find(digest);
  if (it == layers_.end() || !it->second.attached) return {{"ok", true}, {"attached", false}};
  for (const auto& sha : it->second.blobs) {
    auto b = blobs_.find(sha);
    if (b != blobs_.end() && b->second->layers > 0) {
      --b->second->layers;
      b->second->last_used_ns = sys::now_monotonic_ns();
    }
  }
  it->second.attached = false;
  // Blobs stay open and marked: a sandbox may still hold a detached clone of the layer's mount.
  return {{"ok", true}, {"attached", true}};
}

bool HolderState::idle() const {
  if (!pending_.empty()) return false;
  for (const auto& [d, l] : layers_)
    if (l.attached) return false;
  return true;
}

void HolderState::request(CacheBlob& b, size_t first, size_t last, bool prefetch) {
  // Runs of chunks neither verified nor already asked for.
  size_t c = first;
  while (c <= last) {
    if (b.verified(c) || b.requested(c)) {
      ++c;
      continue;
    }
    size_t end = c;
    while (end + 1 <= last && !b.verified(end + 1) && !b.requested(end + 1)) ++end;
    b.set_requested(c, end, true);
    Fill f;
    f.blob_id = b.id();
    f.first = static_cast<uint32_t>(c);
    f.last = static_cast<uint32_t>(end);
    f.prefetch = prefetch ? 1 : 0;
    out_.push_back({std::string(reinterpret_cast<const char*>(&f), sizeof f), -1});
    c = end + 1;
  }
}

void HolderState::answer(Pending& p, uint32_t response) {
  respond(group_.get(), p.fd, response);
  if (!p.adopted) ::close(p.fd);
  table_.clear(p.slot);
  p.fd = -1;
}

void HolderState::on_access_events() {
  struct Seen {
    AccessEvent ev;
    CacheBlob* blob;
    size_t first, last;
    int slot;
  };
  for (;;) {
    std::vector<AccessEvent> evs = read_events(group_.get());
    if (evs.empty()) return;
    // Each event into the shared table before any is answered: killed from here on, this holder's
    // successor knows what every reader waits for.
    std::vector<Seen> seen;
    seen.reserve(evs.size());
    for (const auto& ev : evs) {
      Seen x{ev, nullptr, 0, 0, -1};
      struct stat st;
      if (ev.pid != fetcher_pid_ && ::fstat(ev.fd, &st) == 0) {
        auto it = by_inode_.find({st.st_dev, st.st_ino});
        if (it != by_inode_.end()) {
          x.blob = it->second;
          std::tie(x.first, x.last) = x.blob->index().touching(ev.offset, ev.count);
          x.slot = table_.put(ev.fd, x.blob->sha(), static_cast<uint32_t>(x.first), static_cast<uint32_t>(x.last));
        }
      }
      seen.push_back(x);
    }
    for (auto& x : seen) {
      const AccessEvent& ev = x.ev;
      CacheBlob* b = x.blob;
      if (ev.pid == fetcher_pid_ && fetcher_pid_ > 0) {
        respond(group_.get(), ev.fd, kFanAllow);  // it writes only verified bytes, and checks what it reads
        ::close(ev.fd);
        continue;
      }
      if (!b) {
        // A file we no longer know (a mark left by an earlier group cannot exist): refuse, never guess.
        ++unknown_events_;
        respond(group_.get(), ev.fd, fan_deny_errno(EIO));
        ::close(ev.fd);
        continue;
      }
      size_t first = x.first, last = x.last;
      bool ready = true;
      for (size_t c = first; c <= last && first <= last; ++c) {
        if (!b->verified(c)) {
          ready = false;
          break;
        }
      }
      b->last_used_ns = sys::now_monotonic_ns();
      if (ready) {
        ++b->counters.hits;
        respond(group_.get(), ev.fd, kFanAllow);
        ::close(ev.fd);
        table_.clear(x.slot);
        continue;
      }
      ++b->counters.misses;
      b->record_first_use(first, last);
      pending_.push_back({ev.fd, b, first, last, sys::now_monotonic_ns(), x.slot, false});
      request(*b, first, last, false);
    }
  }
}

void HolderState::answer_ready(CacheBlob& b, int error, size_t efirst, size_t elast) {
  for (auto it = pending_.begin(); it != pending_.end();) {
    if (it->blob != &b) {
      ++it;
      continue;
    }
    bool ready = true, failed = false;
    for (size_t c = it->first; c <= it->last; ++c) {
      if (!b.verified(c)) {
        ready = false;
        if (error && c >= efirst && c <= elast) failed = true;
      }
    }
    if (ready || failed) {
      answer(*it, ready ? kFanAllow : fan_deny_errno(error));
      it = pending_.erase(it);
    } else {
      ++it;
    }
  }
}

void HolderState::on_filled(const Filled& f) {
  auto it = by_id_.find(f.blob_id);
  if (it == by_id_.end()) return;
  CacheBlob& b = *it->second;
  if (f.first > f.last || f.last >= b.index().size()) return;
  b.set_requested(f.first, f.last, false);
  if (f.error == 0) {
    b.set_verified(f.first, f.last);
    if (f.bytes_fetched) b.counters.add_latency(f.latency_ns);
    b.counters.fetched_bytes += f.bytes_fetched;
  } else {
    ++b.counters.fetch_errors;
  }
  answer_ready(b, f.error ? (f.error > 0 && f.error < 256 ? f.error : EIO) : 0, f.first, f.last);
  // Every chunk verified: the file needs no more events (reads then cost what an eager layer's do).
  if (b.all_verified() && b.marked) {
    try {
      mark_file(group_.get(), b.fd(), false);
      b.marked = false;
    } catch (const Error&) {
    }
  }
}

void HolderState::on_tick(uint64_t now) {
  uint64_t deadline = uint64_t{settings_.fill_timeout_ms} * 1'000'000;
  for (auto it = pending_.begin(); it != pending_.end();) {
    if (now - it->since_ns >= deadline) {
      std::fprintf(stderr, "sandlet-loader: blob %.12s chunks %zu-%zu not filled within %u ms: the read gets EIO\n",
                   it->blob->sha().c_str(), it->first, it->last, settings_.fill_timeout_ms);
      answer(*it, fan_deny_errno(EIO));
      // Whatever became of that request, the next reader of these chunks asks again.
      it->blob->set_requested(it->first, it->last, false);
      it = pending_.erase(it);
    } else {
      ++it;
    }
  }
  if (now - last_cap_check_ns_ > 1'000'000'000ull) {
    last_cap_check_ns_ = now;
    enforce_cache_cap();
  }
}

void HolderState::fetcher_lost() {
  for (auto& [sha, b] : blobs_) b->clear_requested();
}

void HolderState::queue_restart_messages() {
  // What was asked while no fetcher ran went nowhere: ask again from scratch.
  out_.clear();
  fetcher_lost();
  for (auto& [sha, b] : blobs_) queue_open(*b);
  for (auto& p : pending_) request(*p.blob, p.first, p.last, false);
}

void HolderState::enforce_cache_cap() {
  uint64_t used = 0;
  std::vector<CacheBlob*> idle;
  for (auto& [sha, b] : blobs_) {
    struct stat st;
    if (::fstat(b->fd(), &st) == 0) used += static_cast<uint64_t>(st.st_blocks) * 512;
    if (b->layers == 0) idle.push_back(b.get());
  }
  if (used <= settings_.cache_max_bytes) return;
  // Least recently used first; only blobs no attached layer needs (their files stay marked: a late reader
  // of a lazily unmounted layer waits for a new fetch, never reads a hole).
  std::sort(idle.begin(), idle.end(), [](auto* a, auto* b) { return a->last_used_ns < b->last_used_ns; });
  for (CacheBlob* b : idle) {
    if (used <= settings_.cache_max_bytes) break;
    struct stat st;
    if (::fstat(b->fd(), &st) != 0) continue;
    if (!b->marked) {
      mark_file(group_.get(), b->fd(), true);
      b->marked = true;
    }
    if (::fallocate(b->fd(), FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, static_cast<off_t>(b->size())) != 0) continue;
    b->evicted();
    ::truncate((b->path() + ".filled").c_str(), 0);
    used -= std::min<uint64_t>(used, static_cast<uint64_t>(st.st_blocks) * 512);
  }
}

void HolderState::adopt_blobs(const std::vector<Handover::Blob>& blobs) {
  for (const auto& hb : blobs) {
    sys::UniqueFd fd(hb.fd);
    if (!is_hex64(hb.sha) || blobs_.count(hb.sha)) continue;
    Store store{hb.url, {}};
    for (const auto* f : {&hb.access_key, &hb.secret_key, &hb.session_token}) put_str(store.creds, *f);
    try {
      open_blob(hb.sha, root_ + "/layers/blobs/" + hb.sha + ".chunks", store, std::move(fd));
    } catch (const std::exception& e) {
      std::fprintf(stderr, "sandlet-loader: cache file of blob %.12s not taken over: %s\n", hb.sha.c_str(), e.what());
    }
  }
}

void HolderState::adopt_pending() {
  std::vector<bool> known(table_.fd_limit() + 1, false);
  size_t adopted = 0, refused = 0;
  uint64_t now = sys::now_monotonic_ns();
  for (const auto& e : table_.entries()) {
    if (static_cast<size_t>(e.fd) < known.size()) known[static_cast<size_t>(e.fd)] = true;
    auto it = blobs_.find(e.sha);
    if (it != blobs_.end() && e.first > e.last) {  // an empty range: nothing to wait for
      respond(group_.get(), e.fd, kFanAllow);
      table_.clear(e.slot);
      continue;
    }
    if (it == blobs_.end() || e.last >= it->second->index().size()) {
      respond(group_.get(), e.fd, fan_deny_errno(EIO));
      table_.clear(e.slot);
      ++refused;
      continue;
    }
    pending_.push_back({e.fd, it->second.get(), e.first, e.last, now, e.slot, true});
    ++adopted;
  }
  // Events read but not yet recorded when the holder died: their readers are refused, never let through.
  for (uint32_t n = 0; n < table_.fd_limit(); ++n)
    if (!known[n] && respond(group_.get(), static_cast<int>(n), fan_deny_errno(EIO))) ++refused;
  std::fprintf(stderr, "sandlet-loader: took over %zu cache files, %zu waiting reads; %zu refused\n", blobs_.size(),
               adopted, refused);
}

bool HolderState::waiting_for_adopted() const {
  return std::any_of(pending_.begin(), pending_.end(), [](const Pending& p) { return p.adopted; });
}

size_t HolderState::reattach_mounted() {
  constexpr uint32_t kErofsMagic = 0xE0F5E1E2;
  size_t n = 0;
  const std::string mounts = root_ + "/layers/mounts";
  for (const auto& name : sys::list_dir(mounts)) {
    struct statfs fs;
    if (!is_hex64(name) || ::statfs((mounts + "/" + name).c_str(), &fs) != 0 ||
        static_cast<uint32_t>(fs.f_type) != kErofsMagic)
      continue;
    try {
      auto text = sys::read_file_if_exists(root_ + "/layers/manifests/" + name + ".json", 1u << 20);
      if (!text) continue;
      boost::json::value v = boost::json::parse(*text);
      const auto& m = v.as_object();
      std::string store = str_field(m, "store");
      if (store.empty()) continue;
      boost::json::array blobs;
      for (const auto& b : m.at("blobs").as_array()) {
        std::string sha(b.as_string());
        struct stat st;
        if (::stat((root_ + "/layers/blobs/" + sha).c_str(), &st) == 0) continue;  // local data
        blobs.push_back(boost::json::object{{"sha", sha}, {"index", root_ + "/layers/blobs/" + sha + ".chunks"}});
      }
      boost::json::object req{{"op", "attach"}, {"layer", name}, {"name", str_field(m, "name")}, {"store", store},
                              {"blobs", std::move(blobs)}};
      if (auto* sz = m.if_contains("size"); sz && sz->is_uint64()) req["image_bytes"] = sz->as_uint64();
      else if (sz && sz->is_int64()) req["image_bytes"] = static_cast<uint64_t>(sz->as_int64());
      attach(req);
      ++n;
    } catch (const std::exception&) {
      // A layer that cannot be watched again stays as it is; nothing better can be done from here.
    }
  }
  return n;
}

boost::json::object HolderState::status(pid_t holder_pid, pid_t fetcher_pid, double started) const {
  boost::json::object o;
  o["running"] = true;
  o["pid"] = holder_pid;
  o["fetcher_pid"] = fetcher_pid;
  o["started"] = started;
  o["settings"] = {{"cache_max_bytes", settings_.cache_max_bytes},
                   {"fetch_unit", settings_.fetch_unit},
                   {"fetch_concurrency", settings_.fetch_concurrency},
                   {"fill_timeout_ms", settings_.fill_timeout_ms}};
  uint64_t used = 0;
  for (const auto& [sha, b] : blobs_) {
    struct stat st;
    if (::fstat(b->fd(), &st) == 0) used += static_cast<uint64_t>(st.st_blocks) * 512;
  }
  o["cache"] = {{"dir", cache_dir(root_)}, {"bytes", used}, {"max_bytes", settings_.cache_max_bytes},
                {"blobs", blobs_.size()}};
  boost::json::array layers;
  for (const auto& [digest, l] : layers_) {
    uint64_t hits = 0, misses = 0, fetched = 0, errors = 0;
    std::vector<uint32_t> lat;
    for (const auto& sha : l.blobs) {
      auto it = blobs_.find(sha);
      if (it == blobs_.end()) continue;
      const auto& c = it->second->counters;
      hits += c.hits;
      misses += c.misses;
      fetched += c.fetched_bytes;
      errors += c.fetch_errors;
      lat.insert(lat.end(), c.latencies_us.begin(), c.latencies_us.end());
    }
    boost::json::object lo{{"digest", digest}, {"name", l.name}, {"image_bytes", l.image_bytes},
                           {"fetched_bytes", fetched}, {"hits", hits}, {"misses", misses}, {"fetch_errors", errors},
                           {"attached", l.attached}};
    lo["fetch_ms"] = percentiles(std::move(lat));
    layers.push_back(std::move(lo));
  }
  o["layers"] = std::move(layers);
  o["waiting_reads"] = pending_.size();
  o["refused_unknown"] = unknown_events_;
  return o;
}

}  // namespace sandlet::lazy
