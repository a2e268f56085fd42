// The owner process of the crash tests: this binary run as `conformance-tests --owner COMMAND ...`. It
// opens a runtime of its own (a separate process, as a trainer would be), does what it is told, prints
// one line per step and then waits to be killed with SIGKILL.
//   create ROOT LIFETIME         creates a sandbox (owned|detached), prints its id, waits
//   exec ROOT ID SECONDS         attaches to sandbox ID, prints "attached", runs `sleep SECONDS` in it
//   create-loop ROOT             creates and destroys owned sandboxes until killed, printing each id
#include <unistd.h>

#include <iostream>

#include "conformance/conformance.hpp"

namespace conformance {

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
  std::cerr << "usage: --owner create ROOT LIFETIME | exec ROOT ID SECONDS | create-loop ROOT\n";
  return 2;
}

}  // namespace conformance
