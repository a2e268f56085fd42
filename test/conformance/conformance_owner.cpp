// The owner process of the crash tests: this binary run as `conformance-tests --owner COMMAND ...`. It
// opens a runtime of its own (a separate process, as a trainer would be), does what it is told, prints
// one line per step and then waits to be killed with SIGKILL.
//   create ROOT LIFETIME         creates a sandbox (owned|detached), prints its id, waits
//   exec ROOT ID SECONDS         attaches to sandbox ID, prints "attached", runs `sleep SECONDS` in it
//   create-loop ROOT             creates and destroys owned sandboxes until killed, printing each id
//   create-die-at ROOT cold|pooled STEP   (conformance-create-steps only) one create, without a warm pool
//                                or served from a full one (which then refills), dying by SIGKILL the
//                                first time it reaches STEP ("-": prints every step); "done" if it lived
#include <unistd.h>

#include <chrono>
#include <iostream>
#include <thread>

#include "conformance/conformance.hpp"

namespace conformance {

void (*arm_fault_points)(const std::string& point) = nullptr;

int owner_main(int argc, char** argv) {
  const std::vector<std::string> args(argv, argv + argc);
  try {
    if (args.size() == 3 && args[0] == "create") {
      auto rt = sandlet::Runtime::open(args[1]);
      auto sb = rt.create(Fixture::spec().lifetime(args[2]));
      std::cout << sb.id() << std::endl;
      for (;;) ::pause();
    }
    if (args.size() == 4 && args[0] == "exec") {
      auto rt = sandlet::Runtime::open(args[1]);
      auto sb = rt.attach(args[2]);
      std::cout << "attached" << std::endl;
      sb.exec({"sleep", args[3]});
      for (;;) ::pause();
    }
    if (args.size() == 4 && args[0] == "create-die-at" && arm_fault_points != nullptr) {
      const bool pooled = args[2] == "pooled";
      sandlet::RuntimeOptions o;
      o.disable_warm_pool = !pooled;
      auto rt = sandlet::Runtime::open(args[1], o);
      std::vector<sandlet::Sandbox> boxes;
      if (pooled) {  // from the second create on the runtime keeps sandboxes prepared: let it fill
        for (int i = 0; i < 2; ++i) boxes.push_back(rt.create(Fixture::spec()));
        std::this_thread::sleep_for(std::chrono::seconds(1));
      }
      arm_fault_points(args[3]);
      boxes.push_back(rt.create(Fixture::spec()));  // pooled: served from the pool, which then refills
      std::this_thread::sleep_for(std::chrono::seconds(pooled ? 1 : 0));
      arm_fault_points("");  // (closing ends sandboxes; no create step is reached any more)
      std::cout << "done" << std::endl;
      return 0;
    }
    if (args.size() == 2 && args[0] == "create-loop") {
      auto rt = sandlet::Runtime::open(args[1]);
      for (;;) {
        auto sb = rt.create(Fixture::spec());
        std::cout << sb.id() << std::endl;
        sb.destroy();
      }
    }
  } catch (const sandlet::Error& e) {
    std::cout << "error: " << e.code_name() << ": " << e.what() << std::endl;
    return 100;
  }
  std::cerr << "usage: --owner create ROOT LIFETIME | exec ROOT ID SECONDS | create-loop ROOT | "
               "create-die-at ROOT cold|pooled STEP\n";
  return 2;
}

}  // namespace conformance
