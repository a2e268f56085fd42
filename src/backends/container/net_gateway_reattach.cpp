// After a gateway restart (the previous one was killed): every live container sandbox of the root with
// network through the gateway is attached again, from its record. Its open connections died with the old
// gateway; new ones work again.
#include <fcntl.h>

#include <cstdio>
#include <filesystem>

#include "backends/container/container_node.hpp"
#include "backends/container/container_state.hpp"
#include "backends/container/net_gateway_reattach.hpp"
#include "runtime/record.hpp"
#include "sys/fs_util.hpp"
#include "sys/pidfd.hpp"

namespace sandlet::container {

void reattach_gateway_sandboxes(ContainerNode& node) noexcept {
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(node.root + "/sandboxes", ec)) {
    try {
      const std::string name = e.path().filename().string();
      if (name.empty() || name[0] == '.') continue;
      auto text = sys::read_file_if_exists(e.path().string() + "/record.json", 1u << 20);
      if (!text) continue;
      const SandboxRecord rec = SandboxRecord::from_json(*text);
      if (rec.backend != "container" || (rec.state != SandboxState::kRunning && rec.state != SandboxState::kPaused))
        continue;
      const ContainerState st = ContainerState::from_json(rec.backend_state);
      if (!st.net_gateway) continue;
      const sys::UniqueFd pidfd = sys::open_pidfd_checked(st.init_pid, st.init_start);
      if (!pidfd) continue;  // ended meanwhile
      const std::string ns_path = "/proc/" + std::to_string(st.init_pid) + "/ns/net";
      const sys::UniqueFd ns(::open(ns_path.c_str(), O_RDONLY | O_CLOEXEC));
      const sys::UniqueFd group(::open(st.cgroups.v2.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
      // Checked again after the opens: the namespace is the init's that the pidfd names.
      if (!ns || !group || !sys::process_alive(st.init_pid, st.init_start)) continue;
      node.gateway().attach(rec.id, ns.get(), pidfd.get(), group.get(), rec.spec.network);
    } catch (const std::exception&) {
      // One sandbox that cannot be attached again (e.g. its published port was taken meanwhile) does
      // not keep the others from it.
    }
  }
}

}  // namespace sandlet::container
