// Dies (SIGKILL, as `kill -9` would) at a named step of a create, so that tests can check what a crash
// there leaves is cleaned up by the next runtime's gc. Built from the C ABI's shims and the core archive
// (not libsandlet.so), which is what makes the library's fault points (src/common/fault_point.hpp)
// reachable; the create itself goes through the public API.
// usage: sandlet-crash-helper ROOT LAYER POINT [BACKEND [N]]
//   creates N (default 1) sandboxes of BACKEND (default "container") under runtime root ROOT. N = 1: the
//   create runs with the fault point armed; N = 2: armed from the second create on (when the warm pool's
//   thread starts preparing); N >= 3: armed for the Nth create, once the warm pool has a sandbox ready (a
//   hit). Exit 0: POINT was never reached; 2: an error (printed).
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <string>

#include "common/fault_point.hpp"
#include "sandlet/sandlet.hpp"

namespace {

const char* g_point = nullptr;

void die_at(const char* point) {
  if (g_point && std::strcmp(point, g_point) == 0) ::kill(::getpid(), SIGKILL);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s ROOT LAYER POINT [BACKEND [N]]\n", argv[0]);
    return 2;
  }
  const std::string backend = argc > 4 ? argv[4] : "container";
  const int n = argc > 5 ? std::atoi(argv[5]) : 1;
  try {
    auto rt = sandlet::Runtime::open(argv[1]);
    std::vector<sandlet::Sandbox> boxes;
    for (int i = 1; i <= n; ++i) {
      if (i == n && n >= 3) {
        for (int wait = 0; wait < 500 && rt.stats_json().find("\"ready\":0") != std::string::npos; ++wait)
          ::usleep(10000);
      }
      if (i == std::min(n, 2)) {
        g_point = argv[3];
        sandlet::testing::set_fault_hook(&die_at);
      }
      boxes.push_back(rt.create(sandlet::Spec().backend(backend).layer(argv[2])));
    }
    return 0;
  } catch (const sandlet::Error& e) {
    std::fprintf(stderr, "sandlet-crash-helper: %s\n", e.what());
    return 2;
  }
}
