// The pure cgroup v2 code path, as far as a hybrid host can show it: in a private mount namespace the
// controller-less cgroup2 tree is mounted over /sys/fs/cgroup, so the runtime sees a pure v2 host whose
// root offers no controllers (like a delegated subtree without them). What it checks for real: detection,
// the parent group, the sandbox group made and removed again, and an error that names the missing
// controller. (Limits on a v2 host with controllers need such a host; this one binds them to v1.)
#include <iostream>

#include "integration/harness.hpp"

// (Its own ctest entry, integration-hybrid-host: run elsewhere it says why on stdout and ctest reports a skip.)
TEST_CASE("pure cgroup v2 without controllers: a create fails naming the controller and leaves nothing",
          "[cgroups][needs-hybrid-host]") {
  if (!fs::exists("/sys/fs/cgroup/unified") || host_sh("command -v unshare").empty()) {
    std::cout << "SANDLET-SKIP: needs a hybrid host (a cgroup2 tree at /sys/fs/cgroup/unified) and unshare(1)"
              << std::endl;
    return;
  }
  Harness h;
  const std::string root = h.root() + "/v2-root";
  // $0 = CLI, $1 = root, $2 = rootfs. The namespace is private: the bind mount never reaches the host.
  const std::string script =
      "mount --bind /sys/fs/cgroup/unified /sys/fs/cgroup || exit 90; "
      "\"$0\" --root \"$1\" run --layer \"$2\" -- /bin/true 2>&1; echo \"rc=$?\"; "
      "ls /sys/fs/cgroup/sandlet | grep -c '^[0-9a-f]\\{12\\}$'; "
      "\"$0\" --root \"$1\" gc >/dev/null";
  const std::string out = host_sh("unshare -m --propagation private sh -c '" + script + "' " + SANDLET_CLI + " " +
                                  root + " " + SANDLET_TEST_ROOTFS);
  INFO(out);
  CHECK(out.find("limits.pids: the pids cgroup controller is not available under /sys/fs/cgroup/sandlet") !=
        std::string::npos);
  CHECK(out.find("rc=1\n0\n") != std::string::npos);  // a runtime error, and no sandbox group left
  // The bind mount lived and died with the child's namespace.
  CHECK(host_sh("grep -c ' /sys/fs/cgroup ' /proc/self/mountinfo") == "1\n");
  h.check_no_leaks();
}
