// What the holder knows and decides, apart from its I/O loop: the blobs of attached lazy layers, the readers
// waiting for chunks, and the counters. Answers the kernel's access events; queues what the fetcher must do.
#pragma once
#include <sys/types.h>

#include <boost/json.hpp>
#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "lazy/cache_blob.hpp"
#include "lazy/loader_protocol.hpp"
#include "lazy/loader_settings.hpp"
#include "lazy/pending_table.hpp"
#include "lazy/takeover.hpp"
#include "sys/fd.hpp"

namespace sandlet::lazy {

class HolderState final {
 public:
  HolderState(std::string root, LoaderSettings settings, sys::UniqueFd group, PendingTable table);

  struct Out {
    std::string bytes;
    int fd = -1;  // sent with the message (not owned)
  };
  std::vector<Out> take_outgoing() { return std::move(out_); }

  int group() const { return group_.get(); }
  int table_fd() const { return table_.fd(); }
  // Accesses by the fetcher itself (its writes and cache checks) are always let through.
  void set_fetcher_pid(pid_t pid) { fetcher_pid_ = pid; }
  const LoaderSettings& settings() const { return settings_; }

  // Control requests (JSON objects); each returns the reply.
  boost::json::object attach(const boost::json::object& req);
  boost::json::object detach(const boost::json::object& req);
  boost::json::object status(pid_t holder_pid, pid_t fetcher_pid, double started) const;
  bool idle() const;  // no layer attached, no reader waiting

  void on_access_events();           // the group is readable
  void on_filled(const Filled& f);   // the fetcher wrote (or failed) chunks
  void on_tick(uint64_t now_ns);     // fill deadlines; cache cap
  void fetcher_lost();               // nothing it was asked is coming
  void queue_restart_messages();     // a new fetcher: every blob, then every chunk a reader waits for
  // A holder started while lazy layers are mounted (the previous one died): their cache files are watched
  // again before anything else (until then, their unfilled ranges would read as zeros). Returns how many.
  size_t reattach_mounted();
  // A successor of a killed holder: takes over the cache files (their unwatched descriptors, kept by the
  // fetcher) and the reads the dead holder had recorded as waiting. Any other event it had read is refused
  // with EIO (never let through). Until those waits are answered no new event may be read (their numbers
  // could collide): waiting_for_adopted().
  void adopt_blobs(const std::vector<Handover::Blob>& blobs);
  void adopt_pending();
  bool waiting_for_adopted() const;

 private:
  struct Pending {
    int fd;
    CacheBlob* blob;
    size_t first, last;
    uint64_t since_ns;
    int slot = -1;         // in the table of waiting reads
    bool adopted = false;  // read by a dead holder: `fd` is only a number to answer, not ours to close
  };
  struct Store {
    std::string url;
    std::string creds;  // length-prefixed access key, secret, token (never written to disk)
  };
  struct Layer {
    std::string name;
    uint64_t image_bytes = 0;
    std::vector<std::string> blobs;
    bool attached = true;  // detached layers keep their counters until the loader stops
  };

  CacheBlob* open_blob(const std::string& sha, const std::string& index, const Store& store,
                       sys::UniqueFd adopted = {});
  void queue_open(const CacheBlob& b);
  void request(CacheBlob& b, size_t first, size_t last, bool prefetch);
  void answer(Pending& p, uint32_t response);
  void answer_ready(CacheBlob& b, int error, size_t efirst, size_t elast);
  void enforce_cache_cap();

  std::string root_;
  LoaderSettings settings_;
  sys::UniqueFd group_;
  PendingTable table_;
  pid_t fetcher_pid_ = -1;
  std::map<std::string, std::unique_ptr<CacheBlob>> blobs_;  // by sha
  std::map<uint32_t, CacheBlob*> by_id_;
  std::map<std::pair<dev_t, ino_t>, CacheBlob*> by_inode_;
  std::map<uint32_t, Store> store_of_;
  std::map<std::string, Layer> layers_;
  std::list<Pending> pending_;
  std::vector<Out> out_;
  uint32_t next_id_ = 1;
  uint64_t last_cap_check_ns_ = 0;
  uint64_t unknown_events_ = 0;
};

}  // namespace sandlet::lazy
