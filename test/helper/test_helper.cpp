// A second process for the integration tests (attach from another process, creator crashes).
// Usage (runtime root from $SANDLET_ROOT):
//   sandlet-test-helper create LAYER owned|detached [hang]   prints the id; "hang" then sleeps until killed
//   sandlet-test-helper create-n LAYER owned|detached N      creates N (the warm pool serves from the 3rd
//                                                            on), prints the ids and "hits H", exits
//   sandlet-test-helper exec ID CMD...                       runs CMD in the attached sandbox, prints stdout
// `create` takes the sandbox's network policy from $SANDLET_TEST_NETWORK (JSON) when set.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>

#include "sandlet/sandlet.hpp"

namespace {

// A counter of the runtime's warm pool (sandlet_runtime_stats_json), -1 when absent.
long long pool_counter(sandlet::Runtime& rt, const std::string& key) {
  const std::string json = rt.stats_json();
  const size_t at = json.find("\"" + key + "\":");
  return at == std::string::npos ? -1 : std::atoll(json.c_str() + at + key.size() + 3);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (argc >= 4 && std::string(argv[1]) == "create") {
      auto rt = sandlet::Runtime::open(nullptr);
      sandlet::Spec spec = sandlet::Spec().layer(argv[2]).lifetime(argv[3]);
      if (const char* net = std::getenv("SANDLET_TEST_NETWORK")) spec.network_json(net);
      auto sb = rt.create(spec);
      std::cout << sb.id() << std::endl;
      if (argc >= 5 && std::string(argv[4]) == "hang")
        for (;;) ::pause();
      return 0;
    }
    if (argc >= 5 && std::string(argv[1]) == "create-n") {
      auto rt = sandlet::Runtime::open(nullptr);
      std::vector<sandlet::Sandbox> boxes;
      for (int i = 0; i < std::atoi(argv[4]); ++i) {
        boxes.push_back(rt.create(sandlet::Spec().layer(argv[2]).lifetime(argv[3])));
        std::cout << boxes.back().id() << std::endl;
        // From the second create on the pool fills on a thread of its own: let it, so the next is served.
        for (int wait = 0; i >= 1 && wait < 500 && pool_counter(rt, "ready") < 1; ++wait) ::usleep(20000);
      }
      std::cout << "hits " << pool_counter(rt, "hits") << std::endl;
      return 0;  // closing the handles leaves detached sandboxes running (owned ones go with the runtime)
    }
    if (argc >= 4 && std::string(argv[1]) == "exec") {
      auto rt = sandlet::Runtime::open(nullptr);
      auto sb = rt.attach(argv[2]);
      auto r = sb.exec(std::vector<std::string>(argv + 3, argv + argc));
      std::cout << r.stdout_data << std::flush;
      return r.exit_code;
    }
  } catch (const sandlet::Error& e) {
    std::cerr << "helper: " << e.what() << "\n";
    return 100;
  }
  std::cerr << "usage: sandlet-test-helper create LAYER owned|detached [hang] | exec ID CMD...\n";
  return 2;
}
