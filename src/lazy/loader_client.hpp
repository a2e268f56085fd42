// The library's side of a node's loader: finds it through its control socket under the runtime root, starts
// it when none runs (from the copy of sandlet-loader embedded in the library), and sends it requests.
#pragma once
#include <boost/json.hpp>
#include <mutex>
#include <string>

#include "lazy/loader_settings.hpp"
#include "sys/fd.hpp"

namespace sandlet::lazy {

class LoaderClient final {
 public:
  LoaderClient(std::string root, LoaderSettings settings);

  // One request and its reply; starts the loader first when `start` and none runs. A reply with "ok": false
  // is thrown as the Error it names.
  boost::json::object call(const boost::json::object& request, bool start);
  // The status of the running loader, or {"running": false}.
  boost::json::object status();
  // Stops the loader if nothing is attached (gc). True when it stopped or none ran.
  bool stop_if_idle();
  // Starts the loader if none answers (it then watches every mounted lazy layer again). Costs one poll()
  // while this client's connection is up.
  void ensure_running();

 private:
  void start_loader();
  std::string root_;
  LoaderSettings settings_;
  std::mutex mu_;
  sys::UniqueFd conn_;
};

// Path of an executable copy of the embedded loader (written once per node under `dir`, named by its hash).
std::string loader_executable(const std::string& dir);

}  // namespace sandlet::lazy
