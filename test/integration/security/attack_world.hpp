// The world the attack suite runs in (docs/SECURITY-TESTS.md): an attacker sandbox with the attack
// programs mounted read-only at /attacks, a neighbour sandbox holding files, and on the host: sentinel
// files, listeners (TCP on 127.0.0.1 and ::1, UDP as a resolver, an abstract and a path unix socket) and a
// sentinel process. snapshot() records what must never change; check_unchanged() compares.
#pragma once
#include <arpa/inet.h>
#include <dirent.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <algorithm>
#include <map>
#include <set>
#include <vector>

#include "integration/mounts_support.hpp"

inline constexpr const char* kAttackMarker = "SANDLET-HOST-SENTINEL";

// FNV-1a over path, mode, owner, size, link target and content of every entry under `dir`: a layer's
// digest as far as the sandbox could change it.
inline std::string tree_digest(const std::string& dir) {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&h](std::string_view s) {
    for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
    h = (h ^ 0xff) * 1099511628211ull;
  };
  std::vector<std::string> paths;
  for (auto& e : fs::recursive_directory_iterator(dir, fs::directory_options::none)) paths.push_back(e.path());
  std::sort(paths.begin(), paths.end());
  size_t files = 0;
  for (const auto& p : paths) {
    struct stat st {};
    if (::lstat(p.c_str(), &st) != 0) continue;
    mix(p);
    mix(std::to_string(st.st_mode) + ":" + std::to_string(st.st_uid) + ":" + std::to_string(st.st_gid) + ":" +
        std::to_string(st.st_size));
    if (S_ISLNK(st.st_mode)) mix(fs::read_symlink(p).string());
    if (S_ISREG(st.st_mode)) mix(slurp(p)), ++files;
  }
  return std::to_string(files) + " files, " + std::to_string(h);
}

// The host's mount table without other tests' mounts (sandlet's and network namespaces'), sorted.
inline std::string host_mounts() {
  std::istringstream in(slurp("/proc/1/mountinfo"));
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);) {
    if (line.find("sandlet") != std::string::npos || line.find("netns") != std::string::npos) continue;
    std::istringstream f(line);
    std::string id, parent, dev, root, point;
    f >> id >> parent >> dev >> root >> point;
    out.push_back(dev + " " + root + " " + point);
  }
  std::sort(out.begin(), out.end());
  std::string s;
  for (auto& l : out) s += l + "\n";
  return s;
}

inline std::string ns_of(pid_t pid, const char* ns) {
  std::error_code ec;
  return fs::read_symlink("/proc/" + std::to_string(pid) + "/ns/" + ns, ec).string();
}

// Host processes running as a uid of [base, base + 65536) that are not in the pid namespace `pidns` (a
// container's) or, with `jail` set, not in the cgroup whose path ends so (a microVM's QEMU and multiplexer
// run in the host's pid namespace, jailed in the sandbox's cgroup), each described (name, state, pid
// namespace) so that a failure says what it found.
inline std::vector<std::string> escaped_processes(uint32_t base, const std::string& pidns, const std::string& jail = "") {
  std::vector<std::string> out;
  std::error_code ec;
  for (auto& e : fs::directory_iterator("/proc", ec)) {
    const std::string name = e.path().filename();
    if (name.empty() || !isdigit(static_cast<unsigned char>(name[0]))) continue;
    std::istringstream st(slurp(e.path().string() + "/status"));
    std::string comm, state;
    for (std::string line; std::getline(st, line);) {
      if (line.rfind("Name:", 0) == 0) comm = line.substr(5);
      if (line.rfind("State:", 0) == 0) state = line.substr(6);
      if (line.rfind("Uid:", 0) != 0) continue;
      unsigned long uid = std::stoul(line.substr(4));
      // (A zombie runs nothing: an earlier sandbox's init that a PID 1 which never reaps, as on some CI
      // machines, keeps in the table.)
      if (state.rfind("\tZ", 0) == 0 || state.rfind("Z", 0) == 0) break;
      const bool outside = jail.empty() ? ns_of(std::stoi(name), "pid") != pidns && !pidns.empty()
                                        : slurp(e.path().string() + "/cgroup").find(jail + "\n") == std::string::npos;
      if (uid >= base && uid < base + 65536ul && outside)
        out.push_back(name + " (uid " + std::to_string(uid) + ", pid ns '" + ns_of(std::stoi(name), "pid") + "', " +
                      comm + ", " + state + ", stat " + slurp(e.path().string() + "/stat").substr(0, 80) + ")");
      break;
    }
  }
  return out;
}

struct HostListeners {
  int tcp4 = -1, tcp6 = -1, udp = -1, abstract_unix = -1, path_unix = -1;
  int port4 = 0, port6 = 0, udp_port = 0;
  std::string abstract_name, unix_path;

  explicit HostListeners(const std::string& dir) {
    tcp4 = listen_on(AF_INET, SOCK_STREAM, "127.0.0.1", &port4);
    tcp6 = listen_on(AF_INET6, SOCK_STREAM, "::1", &port6);
    udp = listen_on(AF_INET, SOCK_DGRAM, "127.0.0.1", &udp_port);
    abstract_name = "sandlet-attack-" + std::to_string(::getpid());
    abstract_unix = unix_listener(std::string(1, '\0') + abstract_name);
    unix_path = dir + "/host.sock";
    path_unix = unix_listener(unix_path);
  }
  ~HostListeners() {
    for (int fd : {tcp4, tcp6, udp, abstract_unix, path_unix})
      if (fd >= 0) ::close(fd);
  }
  // Whatever reached a listener: a queued connection or a datagram.
  std::string reached() const {
    std::string out;
    for (auto [fd, what] : {std::pair{tcp4, "tcp 127.0.0.1"}, {tcp6, "tcp ::1"}, {abstract_unix, "abstract unix"},
                            {path_unix, "unix path"}}) {
      if (fd < 0) continue;
      int c = ::accept4(fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (c >= 0) out += std::string(what) + " got a connection; ", ::close(c);
    }
    char buf[64];
    if (udp >= 0 && ::recv(udp, buf, sizeof buf, MSG_DONTWAIT) >= 0) out += "udp resolver got a datagram; ";
    return out;
  }

 private:
  static int listen_on(int family, int type, const char* addr, int* port) {
    int fd = ::socket(family, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    sockaddr_storage ss{};
    socklen_t len;
    if (family == AF_INET) {
      auto* a = reinterpret_cast<sockaddr_in*>(&ss);
      a->sin_family = AF_INET;
      ::inet_pton(AF_INET, addr, &a->sin_addr);
      len = sizeof *a;
    } else {
      auto* a = reinterpret_cast<sockaddr_in6*>(&ss);
      a->sin6_family = AF_INET6;
      ::inet_pton(AF_INET6, addr, &a->sin6_addr);
      len = sizeof *a;
    }
    if (::bind(fd, reinterpret_cast<sockaddr*>(&ss), len) != 0 || (type == SOCK_STREAM && ::listen(fd, 16) != 0) ||
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) {
      ::close(fd);
      return -1;
    }
    *port = ntohs(family == AF_INET ? reinterpret_cast<sockaddr_in*>(&ss)->sin_port
                                    : reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
    return fd;
  }
  static int unix_listener(const std::string& name) {
    int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::memcpy(a.sun_path, name.data(), std::min(name.size(), sizeof a.sun_path - 1));
    socklen_t len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + name.size() + (name[0] ? 1 : 0));
    if (::bind(fd, reinterpret_cast<sockaddr*>(&a), len) != 0 || ::listen(fd, 16) != 0) {
      ::close(fd);
      return -1;
    }
    return fd;
  }
};

// The host's own non-loopback addresses (the sandbox must reach none of them).
inline std::vector<std::string> host_addresses() {
  std::vector<std::string> out;
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return out;
  for (ifaddrs* i = list; i; i = i->ifa_next) {
    if (!i->ifa_addr || (i->ifa_flags & IFF_LOOPBACK)) continue;
    char buf[INET6_ADDRSTRLEN] = "";
    if (i->ifa_addr->sa_family == AF_INET)
      ::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr, buf, sizeof buf);
    else if (i->ifa_addr->sa_family == AF_INET6)
      ::inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(i->ifa_addr)->sin6_addr, buf, sizeof buf);
    if (buf[0] && std::find(out.begin(), out.end(), buf) == out.end() && out.size() < 8) out.push_back(buf);
  }
  ::freeifaddrs(list);
  return out;
}

// A container's records its agent socket; a microVM's is its multiplexer's, in the sandbox's directory.
inline std::string agent_socket_of(sandlet::Sandbox& sb, const std::string& root = "") {
  const auto o = boost::json::parse(sb.info_json()).as_object();
  if (const auto* p = o.at("backend_state").as_object().if_contains("agent_socket")) return std::string(p->as_string());
  return root + "/sandboxes/" + sb.id() + "/agent.sock";
}
inline pid_t init_pid_of(sandlet::Sandbox& sb) {
  const auto o = boost::json::parse(sb.info_json()).as_object();
  return o.at("backend_state").at("init_pid").to_number<pid_t>();
}

class AttackWorld {
 public:
  static constexpr const char* kNeighbourFiles = "/tmp/secret /dev/shm/secret /home/sandbox/answer /etc/passwd";

  // `backend`: where the attacker runs. A microVM takes no host mounts: the programs come in a layer.
  explicit AttackWorld(const std::string& backend = "container") : sentinels_(0755), listeners_(sentinels_.path) {
    sentinels_.write("secret", std::string(kAttackMarker) + " host secret\n", 0, 0644);
    sentinels_.write("root-only", std::string(kAttackMarker) + " root only\n", 0, 0600);
    REQUIRE(fs::exists(std::string(SANDLET_ATTACKS_DIR) + "/attack-fs"));
    if (backend == "microvm") {
      fs::create_directory(attack_layer_ / "attacks");
      fs::copy(SANDLET_ATTACKS_DIR, attack_layer_ / "attacks", fs::copy_options::recursive);
      // With a NIC (QEMU's user-mode network, an empty allowlist): its addresses are attacked too.
      attacker_ = h_.rt().create(
          Harness::spec().backend(backend).layer(attack_layer_.path).pids(512).network_json(R"({"allow": []})"));
      const auto o = boost::json::parse(attacker_.info_json()).as_object();
      attacker_base_ = o.at("backend_state").at("uid").to_number<uint32_t>();
      attacker_jail_ = "/" + attacker_.id();
    } else {
      attacker_ = h_.rt().create(Harness::spec().backend(backend).mount(SANDLET_ATTACKS_DIR, "/attacks").pids(512));
      attacker_base_ = uid_base_of(attacker_);
      attacker_pidns_ = ns_of(init_pid_of(attacker_), "pid");
    }
    neighbour_ = h_.rt().create(Harness::spec());
    run_out(neighbour_, "echo neighbour-secret > /tmp/secret && echo shm-secret > /dev/shm/secret && "
                        "echo 42 > /home/sandbox/answer");
    sentinel_pid_ = ::fork();
    if (sentinel_pid_ == 0) {
      ::execl("/bin/sleep", "sleep", "600", static_cast<char*>(nullptr));
      ::_exit(127);
    }
    snapshot();
  }
  ~AttackWorld() {
    if (sentinel_pid_ > 0) {
      ::kill(sentinel_pid_, SIGKILL);
      ::waitpid(sentinel_pid_, nullptr, 0);
    }
  }

  Harness& harness() { return h_; }
  sandlet::Sandbox& attacker() { return attacker_; }
  sandlet::Sandbox& neighbour() { return neighbour_; }
  const HostDir& sentinels() const { return sentinels_; }
  const HostListeners& listeners() const { return listeners_; }
  pid_t sentinel_pid() const { return sentinel_pid_; }

  void snapshot() {
    layer_ = tree_digest(SANDLET_TEST_ROOTFS);
    sentinel_files_ = sentinel_state();
    neighbour_sums_ = run_out(neighbour_, std::string("md5sum ") + kNeighbourFiles);
    mounts_ = host_mounts();
  }

  // Everything snapshot() recorded is as it was; the host's sentinel process lives; no process of the
  // attacker's uid range runs outside its pid namespace; nothing reached a host listener.
  void check_unchanged(const std::string& after) {
    INFO("after " << after);
    CHECK(sentinel_state() == sentinel_files_);
    CHECK(::waitpid(sentinel_pid_, nullptr, WNOHANG) == 0);
    CHECK(escaped_processes(attacker_base_, attacker_pidns_, attacker_jail_) == std::vector<std::string>{});
    CHECK(listeners_.reached() == "");
    CHECK(host_mounts() == mounts_);
    auto sums = neighbour_.exec({"md5sum", "/tmp/secret", "/dev/shm/secret", "/home/sandbox/answer", "/etc/passwd"});
    CHECK(sums.stdout_data == neighbour_sums_);
  }
  void check_layer_unchanged() { CHECK(tree_digest(SANDLET_TEST_ROOTFS) == layer_); }

 private:
  // Names, modes, owners and contents of the sentinel directory.
  std::string sentinel_state() const {
    std::string s;
    std::vector<std::string> names;
    for (auto& e : fs::directory_iterator(sentinels_.path)) names.push_back(e.path());
    std::sort(names.begin(), names.end());
    for (auto& n : names) {
      struct stat st {};
      ::lstat(n.c_str(), &st);
      s += n + " " + std::to_string(st.st_mode) + " " + std::to_string(st.st_uid) + " ";
      if (S_ISREG(st.st_mode)) s += slurp(n);
      s += "\n";
    }
    return s;
  }

  Harness h_;
  HostDir sentinels_;
  HostListeners listeners_;
  HostDir attack_layer_;  // a microVM attacker's layer: the programs under /attacks
  sandlet::Sandbox attacker_, neighbour_;
  pid_t sentinel_pid_ = -1;
  uint32_t attacker_base_ = 0;
  std::string attacker_pidns_;  // a container's pid namespace ...
  std::string attacker_jail_;   // ... or a microVM's cgroup (its path's end)
  std::string layer_, sentinel_files_, neighbour_sums_, mounts_;
};
