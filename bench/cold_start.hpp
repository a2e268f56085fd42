// The cold-start scenario's set-up (issue 17; cold_start_setup.cpp): the image and its tarball, the store
// (nginx over a temp directory, behind the throttling proxy), the push, the per-arm runtime roots, the
// workload, and the store calls of sandlet_store.h looked up at run time.
#pragma once

#include "capi.hpp"
#include "cold_start_infra.hpp"
#include "common.hpp"

#include <boost/json.hpp>

#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace bench {

// The command every sandbox runs, and what it needs.
struct Workload {
  std::vector<std::string> argv;
  std::vector<std::pair<std::string, std::string>> env;
  std::string inject_path, inject_data;  // a file written into each sandbox first (when the image lacks it)
  std::string describe() const;
};

// A spec of one layer with the workload's env (one per thread: a spec is used from one thread at a time).
class WorkloadSpec final {
 public:
  WorkloadSpec(const std::string &layer, const Workload &w);
  ~WorkloadSpec() { sandlet_spec_delete(spec_); }
  WorkloadSpec(const WorkloadSpec &) = delete;
  WorkloadSpec &operator=(const WorkloadSpec &) = delete;
  Sandbox create(sandlet_runtime_t *rt) const;  // registered for the leftover check

 private:
  sandlet_spec_t *spec_ = nullptr;
};

// Runs the workload; throws unless it exits 0. Returns its stdout without the trailing newline.
std::string run_workload(const Sandbox &sb, const Workload &w, double timeout_s);

class ColdStart final {
 public:
  explicit ColdStart(const Context &ctx);
  ~ColdStart();
  ColdStart(const ColdStart &) = delete;
  ColdStart &operator=(const ColdStart &) = delete;

  boost::json::object setup_json() const { return setup_; }
  std::size_t n() const { return n_; }
  double timeout_s() const { return 1800; }
  const std::vector<std::string> &arms() const { return arms_; }
  unsigned warm_rounds() const { return warm_rounds_; }
  const Workload &workload() const { return workload_; }
  std::uint64_t image_bytes() const { return image_bytes_; }
  const std::filesystem::path &www() const { return www_; }
  const BlockDevice &device() const { return *device_; }
  const ThrottleProxy &proxy() const { return *proxy_; }
  double background_write_bps() const { return background_bps_; }
  const std::string &layer_digest() const { return digest_; }

  // "" when the arm can run, else why not (a store call missing or UNIMPLEMENTED, the push failed).
  std::string unavailable(const std::string &arm) const;
  // <scratch>/arms/<name>: emptied and made again when `fresh`.
  std::filesystem::path arm_root(const std::string &name, bool fresh = true) const;
  // sandlet_layer_pull of the pushed layer through the proxy; its result JSON. Throws on error.
  boost::json::object pull(sandlet_runtime_t *rt, bool lazy) const;
  // GET of the tarball through the proxy streamed into `tar -x` in a fresh directory; returns its path.
  std::string untar(boost::json::object &arm) const;
  // sandlet_loader_status of an arm's root (opens a runtime on it), or {"error": ...}.
  boost::json::value loader_status(const std::string &arm) const;
  // Every sandbox of the run must print the same line; throws otherwise.
  void check_output(const std::string &what, const std::string &output, bool identical);
  // Stops the loader processes the lazy (and eager) roots' runtimes started (not our children).
  boost::json::object stop_loaders() const;
  // Stops the proxy and nginx and removes everything under the scratch directory.
  void finish(boost::json::object &out);
  std::string note() const;

 private:
  using PushFn = decltype(&sandlet_layer_push);
  using PullFn = decltype(&sandlet_layer_pull);
  using StatusFn = decltype(&sandlet_loader_status);

  void locate_image(const Context &ctx);
  void make_tarball();
  void push_image(const Context &ctx);

  std::size_t n_ = 32;
  double rate_mbps_ = 200;
  std::string store_kind_ = "dir";
  std::vector<std::string> arms_;
  unsigned warm_rounds_ = 1;
  uint32_t fetch_unit_ = 0;
  unsigned workers_ = 0;
  std::filesystem::path source_dir_;  // bench/ of the source tree (scripts, workload)
  std::filesystem::path image_, tarball_, scratch_, www_;
  bool tarball_cached_ = false;
  std::uint64_t image_bytes_ = 0, image_allocated_ = 0, tarball_bytes_ = 0;
  Workload workload_;
  std::unique_ptr<BlockDevice> device_;
  std::unique_ptr<Nginx> nginx_;
  std::unique_ptr<ThrottleProxy> proxy_;
  double background_bps_ = 0;
  PushFn push_ = nullptr;
  PullFn pull_ = nullptr;
  StatusFn status_ = nullptr;
  std::string push_reason_, pull_reason_;  // why push / pull cannot be used ("" = they can)
  std::string digest_, pull_url_;
  std::string expected_output_;
  boost::json::object setup_;
};

}  // namespace bench
