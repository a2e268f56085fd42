// A second process for the integration tests (attach from another process, creator crashes).
// Usage (runtime root from $SANDLET_ROOT):
//   sandlet-test-helper create LAYER owned|detached [hang]   prints the id; "hang" then sleeps until killed
//   sandlet-test-helper create-n LAYER owned|detached N      creates N (the warm pool serves from the 2nd
//                                                            on), prints the ids, exits
//   sandlet-test-helper exec ID CMD...                       runs CMD in the attached sandbox, prints stdout
#include <unistd.h>

#include <cstdio>
#include <iostream>

#include "sandlet/sandlet.hpp"

int main(int argc, char** argv) {
  try {
    if (argc >= 4 && std::string(argv[1]) == "create") {
      auto rt = sandlet::Runtime::open(nullptr);
      auto sb = rt.create(sandlet::Spec().layer(argv[2]).lifetime(argv[3]));
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
      }
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
