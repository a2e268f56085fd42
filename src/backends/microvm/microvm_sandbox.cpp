#include "backends/microvm/microvm_sandbox.hpp"

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <cmath>
#include <algorithm>
#include <cstring>

#include "backends/host/init_file_policy.hpp"
#include "backends/host/sandbox_cgroup.hpp"
#include "backends/microvm/guest_kit.hpp"
#include "backends/microvm/qemu_command.hpp"
#include "backends/microvm/qmp_client.hpp"
#include "backends/microvm/vm_disks.hpp"
#include "backends/microvm/vm_jail_root.hpp"
#include "backends/microvm/vm_network.hpp"
#include "backends/host/sandbox_net.hpp"
#include "backends/vm_accel.hpp"
#include "common/error.hpp"
#include "common/fault_point.hpp"
#include "policy/seccomp_profile.hpp"
#include "proto/init_protocol.hpp"
#include "proto/vm_channel.hpp"
#include "spec/exec_env.hpp"
#include "sys/fs_util.hpp"
#include "sys/pidfd.hpp"
#include "sys/unix_socket.hpp"

namespace json = boost::json;

namespace sandlet::microvm {
namespace {

constexpr uint64_t kMiB = 1ull << 20;
constexpr uint64_t kDefaultMemoryMiB = 512;  // guest RAM without a memory limit
constexpr uint64_t kGuestKernelMiB = 128;     // guest RAM beyond the limit: its kernel, page cache, agent
// QEMU's own memory beside the guest's RAM (its code, the TCG translation cache of tb-size, device
// buffers): what the jail's memory limit adds to the guest's.
constexpr uint64_t kVmmOverheadMiB = 192;
constexpr uint64_t kJailPids = 256;  // QEMU's threads and the multiplexer (the spec's pids bind the guest)
constexpr size_t kConsoleMax = 1u << 20;  // bytes of the guest's console (and of QEMU's diagnostics) kept
constexpr double kLifetimeGraceS = 30;    // past the lifetime, the host kills a VM whose agent did not end it
constexpr int kExitWaitMs = 5000;
constexpr int kQmpTimeoutMs = 10000;

// How long a boot may take before the create fails: TCG boots take seconds, more on a busy host.
int boot_timeout_ms() {
  if (const char* v = std::getenv("SANDLET_MICROVM_BOOT_TIMEOUT_MS"); v && *v) {
    long ms = std::atol(v);
    if (ms > 0) return static_cast<int>(ms);
  }
  return 180000;
}

void write_all(int fd, const std::string& data) {
  size_t off = 0;
  while (off < data.size()) {
    ssize_t n = ::write(fd, data.data() + off, data.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw_errno("write to the microVM's channel");
    off += static_cast<size_t>(n);
  }
}

// Reads exactly `n` bytes before `deadline_ns`, giving up when `pidfd` says the VM ended.
bool read_exact(int fd, int pidfd, char* out, size_t n, uint64_t deadline_ns, const char** why) {
  size_t got = 0;
  while (got < n) {
    const uint64_t now = sys::now_monotonic_ns();
    if (now >= deadline_ns) {
      *why = "timeout";
      return false;
    }
    struct pollfd p[2] = {{fd, POLLIN, 0}, {pidfd, POLLIN, 0}};
    int r = ::poll(p, 2, static_cast<int>((deadline_ns - now) / 1000000 + 1));
    if (r < 0 && errno == EINTR) continue;
    if (p[0].revents & (POLLIN | POLLHUP | POLLERR)) {
      ssize_t k = ::read(fd, out + got, n - got);
      if (k < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (k <= 0) {
        *why = "closed";
        return false;
      }
      got += static_cast<size_t>(k);
      continue;
    }
    if (p[1].revents & POLLIN) {
      *why = "ended";
      return false;
    }
  }
  return true;
}

// How the multiplexer (our child, not reaped yet) ended: its exit codes before QEMU runs say which jail
// step failed (launch()).
std::string describe_exit(int pidfd) {
  siginfo_t si = {};
  if (::waitid(static_cast<idtype_t>(P_PIDFD), static_cast<id_t>(pidfd), &si, WEXITED | WNOHANG | WNOWAIT) != 0 || si.si_pid == 0)
    return "";
  if (si.si_code != CLD_EXITED) return " (killed by signal " + std::to_string(si.si_status) + ")";
  switch (si.si_status) {
    case 0: return "";
    case 120: return " (could not join its cgroup)";
    case 121: return " (could not make its namespaces)";
    case 122: return " (could not drop to its uid)";
    case 123: return " (could not pass its descriptors)";
    case 124: return " (could not build its root file system)";
    case 126: case 127: return " (could not start QEMU)";
    default: return " (exit status " + std::to_string(si.si_status) + ")";
  }
}

// The guest's RAM: the sandbox's memory limit (which binds its commands through the guest's cgroup) plus
// room for the guest kernel and the agent.
uint64_t guest_memory_mib(const Limits& l) {
  return l.memory ? (l.memory + kMiB - 1) / kMiB + kGuestKernelMiB : kDefaultMemoryMiB;
}
uint32_t guest_vcpus(const Limits& l) {
  return l.cpus > 0 ? static_cast<uint32_t>(std::ceil(l.cpus)) : 1;
}

}  // namespace

json::object MicrovmState::to_json() const {
  json::array v1;
  for (const auto& p : cgroups.v1) v1.emplace_back(p);
  return {{"slot", slot},          {"uid", uid},           {"mux_pid", mux_pid},
          {"mux_start", mux_start}, {"cgroup_v2", cgroups.v2}, {"cgroup_v1", std::move(v1)},
          {"net_gateway", net_gateway}};
}

MicrovmState MicrovmState::from_json(const json::object& o) {
  MicrovmState s;
  if (o.empty()) return s;
  try {
    s.slot = json::value_to<int>(o.at("slot"));
    s.uid = json::value_to<uint32_t>(o.at("uid"));
    s.mux_pid = json::value_to<pid_t>(o.at("mux_pid"));
    s.mux_start = json::value_to<uint64_t>(o.at("mux_start"));
    s.cgroups.v2 = json::value_to<std::string>(o.at("cgroup_v2"));
    for (const auto& p : o.at("cgroup_v1").as_array()) s.cgroups.v1.push_back(json::value_to<std::string>(p));
    if (const auto* g = o.if_contains("net_gateway")) s.net_gateway = g->as_bool();
  } catch (const std::exception& e) {
    throw Error(Code::kDataLoss, std::string("microVM record is malformed: ") + e.what());
  }
  return s;
}

MicrovmSandbox::MicrovmSandbox(std::shared_ptr<MicrovmNode> node, std::string id, std::string dir, MicrovmState state)
    : BackendSandbox("microvm"), node_(std::move(node)), id_(std::move(id)), dir_(std::move(dir)), state_(std::move(state)) {}

MicrovmSandbox::~MicrovmSandbox() {
  if (!starting_) return;
  // A start that did not finish: nothing of it may stay.
  kill();
  try {
    reclaim();
  } catch (...) {
    // gc finds the rest from the record's directory
  }
}

std::string MicrovmSandbox::unsupported(const Spec& spec) {
  if (!spec.mounts.empty())
    return "mounts: a microVM does not take host directories (copy files in with the file calls, or pack them "
           "as a layer)";
  if (spec.layers.empty()) return "layers: a microVM needs a root file system (a layer or an environment)";
  return "";
}

bool MicrovmSandbox::alive() const {
  if (pidfd_) return !sys::pidfd_wait_exit(pidfd_.get(), 0);
  if (prepared_here_ && state_.mux_pid == 0) return true;  // prepared, launching at finish: nothing to die yet
  return state_.mux_pid > 0 && sys::process_alive(state_.mux_pid, state_.mux_start);
}

bool MicrovmSandbox::ended() {
  if (pidfd_) return sys::pidfd_reap_if_exited(pidfd_.get());
  return !alive();
}

sys::UniqueFd MicrovmSandbox::connect() const {
  sys::UniqueFd fd = sys::connect_unix(path("agent.sock"));
  const char port = static_cast<char>(proto::vmchan::kAgentPort);
  if (::send(fd.get(), &port, 1, MSG_NOSIGNAL) != 1) throw Error(Code::kUnavailable, "sandbox " + id_ + ": its microVM does not answer");
  return fd;
}

void MicrovmSandbox::kill() noexcept {
  // Every process of the jail (the multiplexer and QEMU) at once, then the multiplexer by its pidfd in case
  // the cgroup could not be written.
  if (!state_.cgroups.v2.empty()) (void)sys::try_write_existing(state_.cgroups.v2 + "/cgroup.kill", "1");
  if (pidfd_) {
    sys::pidfd_signal(pidfd_.get(), SIGKILL);
  } else if (state_.mux_pid > 0) {
    sys::UniqueFd fd = sys::open_pidfd_checked(state_.mux_pid, state_.mux_start);
    if (fd) sys::pidfd_signal(fd.get(), SIGKILL);
  }
}

void MicrovmSandbox::reclaim() {
  if (pidfd_) {
    sys::pidfd_wait_exit(pidfd_.get(), kExitWaitMs);
    sys::pidfd_reap_if_exited(pidfd_.get());
  } else if (state_.mux_pid > 0) {
    sys::UniqueFd fd = sys::open_pidfd_checked(state_.mux_pid, state_.mux_start);
    if (fd) sys::pidfd_wait_exit(fd.get(), kExitWaitMs);
  }
  const sys::CgroupPaths expected = sys::cgroup_paths_for(node_->cgroups, id_);
  sys::CgroupPaths groups = state_.cgroups.v2.empty() ? expected : state_.cgroups;
  if (groups.v2 != expected.v2) throw Error(Code::kDataLoss, "sandbox " + id_ + ": its record names cgroups outside sandlet's");
  for (const auto& p : groups.v1)
    if (std::find(expected.v1.begin(), expected.v1.end(), p) == expected.v1.end())
      throw Error(Code::kDataLoss, "sandbox " + id_ + ": its record names cgroups outside sandlet's");
  if (!sys::kill_and_remove_cgroups(groups)) throw Error(Code::kInternal, "sandbox " + id_ + ": cgroup still busy after kill");
  // The disks are the big files: gone now, not when the directory goes.
  for (const auto& name : sys::list_dir(dir_))
    if (name == "upper.img" || (name.rfind("layer", 0) == 0 && name.size() > 6 && name.compare(name.size() - 6, 6, ".erofs") == 0))
      ::unlink((dir_ + "/" + name).c_str());
  if (state_.slot >= 0) node_->slots->release(state_.slot, dir_);
  state_.slot = -1;
  starting_ = false;  // nothing left to unwind
  // The gateway drops a sandbox whose multiplexer has ended by itself; this only makes it prompt.
  if (state_.net_gateway) node_->gateway().detach(id_);
}

void MicrovmSandbox::launch_ahead(const Spec& staged, const Shape& shape, std::vector<LayerImage> images) {
  // Nothing is launched (the create launches its own) for a spec that fails anyway, for a host directory
  // (packed at launch, it would be a stale copy by the create) or for published ports (the create takes
  // them, as a container's; a pooled VM would hold them for nobody).
  if (!unsupported(staged).empty() || !staged.network.publish.empty()) return;
  for (const LayerImage& img : images)
    if (!img.host_dir.empty() || img.toolkit) return;  // a toolkit: its disk is attached by the create's launch
  Spec spec = staged;
  spec.limits.memory = shape.memory;
  spec.limits.cpus = shape.cpus;
  if (shape.disk) spec.limits.disk = shape.disk;
  images_ = std::move(images);
  starting_ = true;  // dropped unused (the pool discards it): killed and reclaimed
  launch(spec);
  launched_for_ = std::move(spec);
}

// What a launch fixes: the disks (layers, writable size), the shape, the NIC and its policy, the
// parent-death tie and the host's lifetime backstop.
bool MicrovmSandbox::fits(const Spec& spec) const {
  if (!launched_for_) return true;
  const Spec& l = *launched_for_;
  return l.layers == spec.layers && l.toolkit == spec.toolkit && Shape::of(l.limits) == Shape::of(spec.limits) &&
         l.network == spec.network &&
         l.lifetime == spec.lifetime && l.max_lifetime_s == spec.max_lifetime_s && l.on_expiry == spec.on_expiry &&
         (l.on_expiry != OnExpiry::kKeep || l.keep_s == spec.keep_s);
}

void MicrovmSandbox::finish(const Spec& spec, OneShot* one_shot) {
  if (one_shot) unimplemented("one-shot runs");
  if (std::string why = unsupported(spec); !why.empty()) throw Error(Code::kInvalidArgument, why);
  starting_ = true;
  if (!launched_for_) launch(spec);
  else if (!fits(spec)) throw Error(Code::kInternal, "sandbox " + id_ + ": a microVM launched ahead for another spec");
  attach_gateway(spec);
  configure(spec, boot_timeout_ms());
  starting_ = false;
}

void MicrovmSandbox::launch(const Spec& spec) {
  const vm_accel::Probe accel = vm_accel::probe();
  if (accel.qemu.empty()) throw Error(Code::kUnavailable, "the microvm backend needs qemu-system-x86_64 on PATH");
  const bool kvm = vm_accel::choose(accel, accel_setting(), "$SANDLET_MICROVM_ACCEL") == "kvm";  // before anything is made
  state_.slot = node_->slots->claim(dir_);
  state_.uid = SlotTable::uid_base(state_.slot);
  const KernelKit kit = find_kernel_kit(node_->kernel);
  const std::string initrd = initramfs_for(kit, node_->cache_dir);
  fault_point("microvm.kit");

  // Descriptors, in the order the child puts them from fd 2 on: QEMU's diagnostics, the agent and QMP
  // listeners, the console file, then the kernel, the initramfs and the disks (6, 7, 8, ...).
  std::vector<sys::UniqueFd> fds;
  const auto open_or_throw = [](const std::string& p, int flags, mode_t mode = 0) {
    sys::UniqueFd fd(::open(p.c_str(), flags | O_CLOEXEC, mode));
    if (!fd) throw_errno("open " + p);
    return fd;
  };
  fds.push_back(open_or_throw(path("qemu.log"), O_WRONLY | O_CREAT | O_TRUNC, 0600));
  fds.push_back(sys::listen_unix(path("agent.sock")));
  fds.push_back(sys::listen_unix(path("qmp.sock"), 4));
  fds.push_back(open_or_throw(path("console.log"), O_WRONLY | O_CREAT | O_TRUNC, 0600));
  fds.push_back(open_or_throw(kit.vmlinux, O_RDONLY));
  fds.push_back(open_or_throw(initrd, O_RDONLY));

  VmCommand cmd;
  cmd.qemu = accel.qemu;
  cmd.kvm = kvm;
  if (!cmd.kvm) cmd.tsc_khz = host_tsc_khz();
  cmd.vcpus = guest_vcpus(spec.limits);
  cmd.memory_mib = guest_memory_mib(spec.limits);
  cmd.kernel_fd = 6;
  cmd.initrd_fd = 7;
  int next_fd = 8;
  // Each layer is a disk (a store layer's metadata image, and one more per data blob it has; a host
  // directory packed into an image now), found by the guest by its serial.
  size_t disks = 1;  // the writable one
  for (const LayerImage& img : images_) disks += 1 + img.blobs.size();
  if (disks > static_cast<size_t>(kMaxDisks))
    throw Error(Code::kInvalidArgument, "layers: " + std::to_string(images_.size()) + " layers need " +
                                            std::to_string(disks) + " disks, and a microVM takes at most " +
                                            std::to_string(kMaxDisks) + " (merge layers, e.g. by a snapshot)");
  int layers = 0;
  for (size_t i = 0; i < images_.size(); ++i) {
    const LayerImage& img = images_[i];
    // The toolkit is a disk of its own (the guest's init mounts it read-only at the toolkit's path).
    if (img.toolkit && img.lazy)
      throw Error(Code::kInvalidArgument, "toolkit: a lazily pulled layer cannot be a microVM's toolkit (pull it whole)");
    const std::string serial = img.toolkit ? std::string("sl-toolkit") : "sl-layer" + std::to_string(layers++);
    std::string meta = img.meta_path;
    if (!img.host_dir.empty()) {
      meta = path(((img.toolkit ? std::string("layer-toolkit") : "layer" + std::to_string(i)) + ".erofs").c_str());
      pack_directory(img.host_dir, meta);
    }
    fds.push_back(open_or_throw(meta, O_RDONLY));
    cmd.disks.push_back({next_fd++, true, serial});
    for (size_t b = 0; b < img.blobs.size(); ++b) {
      fds.push_back(open_or_throw(img.blobs[b], O_RDONLY));
      cmd.disks.push_back({next_fd++, true, serial + "-b" + std::to_string(b)});
    }
  }
  cmd.layers = layers;
  make_writable_disk(path("upper.img"), spec.limits.disk);
  if (::chown(path("upper.img").c_str(), state_.uid, state_.uid) != 0) throw_errno("chown the writable disk");
  fds.push_back(open_or_throw(path("upper.img"), O_RDWR));
  cmd.disks.push_back({next_fd++, false, "sl-upper"});
  fault_point("microvm.disks");

  // The jail's cgroup bounds the guest's RAM plus QEMU's own memory, the CPU quota, and QEMU's threads.
  Limits jail;
  jail.memory = (cmd.memory_mib + kVmmOverheadMiB) * kMiB;
  jail.cpus = spec.limits.cpus;
  jail.pids = kJailPids;
  // Owned by root, not delegated: nothing in the jail makes groups (the child joins while still root).
  host::SandboxCgroup cgroup = host::SandboxCgroup::create(node_->cgroups, id_, 0, &jail);
  cgroup.apply_limits(jail);
  state_.cgroups = cgroup.paths();
  sys::UniqueFd procs(::openat(cgroup.v2_fd(), "cgroup.procs", O_WRONLY | O_CLOEXEC));
  if (!procs) throw_errno("open the microVM's cgroup.procs");
  const std::vector<int> v1_join = cgroup.v1_join_fds();
  // With a network policy: QEMU's namespace and the allowlist on its cgroup, before QEMU exists.
  if (!spec.network.none) {
    netns_ = prepare_vm_network(cgroup.v2_fd(), spec.network);
    for (auto& a : nic_args(spec.network)) cmd.extra.push_back(std::move(a));
  }
  const int netns_fd = netns_ ? netns_.get() : -1;

  // Everything the child needs is made before the fork: it only makes system calls.
  // The host's backstop for the lifetime (the agent inside ends the VM itself, keep time included).
  const double lifetime_s = spec.max_lifetime_s + (spec.on_expiry == OnExpiry::kKeep ? spec.keep_s : 0) + kLifetimeGraceS;
  std::vector<std::string> args = {"sandlet-vm-init", "host-mux", std::to_string(kConsoleMax),
                                   std::to_string(static_cast<uint64_t>(lifetime_s * 1000)), "--"};
  for (auto& a : qemu_argv(cmd)) args.push_back(std::move(a));
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  char* envp[] = {const_cast<char*>("PATH=/usr/sbin:/usr/bin:/sbin:/bin"), nullptr};
  sys::UniqueFd exe(::open(vm_init_binary(node_->bin_dir).c_str(), O_PATH | O_CLOEXEC));
  if (!exe) throw_errno("open sandlet-vm-init");
  sys::UniqueFd null(::open("/dev/null", O_RDWR | O_CLOEXEC));
  const uid_t uid = state_.uid;
  const bool owned = spec.lifetime == Lifetime::kOwned;
  sys::mkdir_p(path("jail"), 0755);
  const JailRoot jail_root = JailRoot::plan(path("jail"), uid, cmd.kvm, cmd.qemu);
  std::vector<int> src;
  for (const auto& f : fds) src.push_back(f.get());
  fault_point("microvm.spawn");

  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) throw_errno("fork the microVM's multiplexer");
  if (pid == 0) {
    if (::write(procs.get(), "0", 1) != 1) _exit(120);
    for (int fd : v1_join)
      if (::write(fd, "0", 1) != 1) _exit(120);
    if (netns_fd >= 0 && ::setns(netns_fd, CLONE_NEWNET) != 0) _exit(121);
    if (::unshare((netns_fd >= 0 ? 0 : CLONE_NEWNET) | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWNS) != 0) _exit(121);
    if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) _exit(121);
    if (!jail_root.enter()) _exit(124);
    const struct rlimit no_core = {0, 0};
    if (::setrlimit(RLIMIT_CORE, &no_core) != 0) _exit(124);
    ::setsid();
    if (::setgroups(0, nullptr) != 0) _exit(122);
    if (::setresgid(uid, uid, uid) != 0 || ::setresuid(uid, uid, uid) != 0) _exit(122);
    if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) _exit(122);
    // An owned VM dies with its creator (set after the uid change, which would clear it); QEMU dies with
    // the multiplexer (host_mux.cpp).
    if (owned && (::prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0 || ::getppid() != parent)) _exit(122);
    // Into place: copies up high first (no source is clobbered), then 0/1 from /dev/null, 2.. in order.
    std::vector<int>::size_type i = 0;
    int high[64];
    for (i = 0; i < src.size() && i < 64; ++i) {
      high[i] = ::fcntl(src[i], F_DUPFD_CLOEXEC, 200);
      if (high[i] < 0) _exit(123);
    }
    const int exe_high = ::fcntl(exe.get(), F_DUPFD_CLOEXEC, 200);
    if (exe_high < 0 || ::dup2(null.get(), 0) < 0 || ::dup2(null.get(), 1) < 0) _exit(123);
    for (i = 0; i < src.size() && i < 64; ++i)
      if (::dup2(high[i], static_cast<int>(2 + i)) < 0) _exit(123);
    const int exe_fd = static_cast<int>(2 + src.size());  // the executable, closed by the exec itself
    if (::dup3(exe_high, exe_fd, O_CLOEXEC) < 0) _exit(123);
    ::syscall(SYS_close_range, static_cast<unsigned>(exe_fd + 1), ~0u, 0);
    ::syscall(SYS_execveat, exe_fd, "", argv.data(), envp, AT_EMPTY_PATH);
    _exit(127);
  }
  pidfd_ = sys::UniqueFd(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
  state_.mux_pid = pid;
  state_.mux_start = sys::process_start_time(pid).value_or(0);
  cgroup.release();  // kept: reclaim() removes it
  if (!pidfd_) throw_errno("pidfd_open of the microVM's multiplexer");
}

// Connectivity through the node's gateway, at the create (a VM launched ahead waits in the pool without it:
// no host port is taken for it, and a gateway restarted meanwhile misses nothing); nothing in the guest runs
// a command before configure() has its answer. A failure: the destructor kills the VM; reclaim detaches it.
void MicrovmSandbox::attach_gateway(const Spec& spec) {
  if (!netns_) return;
  state_.net_gateway = true;
  sys::UniqueFd group(::open(state_.cgroups.v2.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!group) throw_errno("open the microVM's cgroup");
  try {
    attach_vm_gateway(*node_, id_, dir_, netns_.get(), pidfd_.get(), group.get(), spec.network);
  } catch (const Error&) {
    // A VM that ended already (its jail or its boot failed): that is the news, not the gateway's answer.
    if (sys::pidfd_wait_exit(pidfd_.get(), 0))
      throw Error(Code::kInternal, "sandbox " + id_ + ": the microVM ended while starting" + describe_exit(pidfd_.get()) + console_tail());
    throw;
  }
  netns_.reset();
}

void MicrovmSandbox::configure(const Spec& spec, int timeout_ms) {
  proto::InitConfig config;
  config.hostname = spec.hostname;
  config.workdir = spec.workdir;
  config.user = spec.user;
  config.env = base_env(spec);
  config.seccomp_bpf = policy::seccomp_bpf_for(spec.policy.seccomp);
  config.max_lifetime_ms = static_cast<uint64_t>(std::llround(spec.max_lifetime_s * 1000));
  config.idle_timeout_ms = static_cast<uint64_t>(std::llround(spec.idle_timeout_s * 1000));
  if (spec.on_expiry == OnExpiry::kKeep) config.keep_ms = static_cast<uint64_t>(std::llround(spec.keep_s * 1000));
  config.flags = proto::kInitHasCgroup | proto::kInitLoopbackUp | proto::kInitGuestLimits;
  if (!spec.network.none) config.flags |= proto::kInitGuestNic;
  if (!spec.network.none && !spec.network.dns.empty()) config.flags |= proto::kInitResolverConf;
  config.pids_max = spec.limits.pids;
  config.memory_max = spec.limits.memory;
  host::add_file_policy(spec.policy, config);  // applied by the guest's init before anything of the sandbox runs
  if (!spec.toolkit.empty()) config.flags |= proto::kInitToolkitDisk;

  const uint64_t deadline = sys::now_monotonic_ns() + static_cast<uint64_t>(timeout_ms) * 1000000ull;
  sys::UniqueFd sock;
  try {
    sock = sys::connect_unix(path("agent.sock"));
  } catch (const Error&) {
    // The multiplexer may have failed in its jail already: say how.
    if (sys::pidfd_wait_exit(pidfd_.get(), 0))
      throw Error(Code::kInternal, "sandbox " + id_ + ": the microVM ended while starting" + describe_exit(pidfd_.get()) + console_tail());
    throw;
  }
  const int flags = ::fcntl(sock.get(), F_GETFL);
  ::fcntl(sock.get(), F_SETFL, flags & ~O_NONBLOCK);
  std::string out(1, static_cast<char>(proto::vmchan::kBootPort));
  out += proto::frame(proto::InitMsg::kConfig, config.encode());
  write_all(sock.get(), out);
  ::fcntl(sock.get(), F_SETFL, flags | O_NONBLOCK);

  char hdr[proto::kHeaderSize];
  const char* why = "";
  const auto fail = [&](Code code, const std::string& what) {
    throw Error(code, "sandbox " + id_ + ": the microVM " + what + console_tail());
  };
  if (!read_exact(sock.get(), pidfd_.get(), hdr, sizeof hdr, deadline, &why)) {
    if (std::strcmp(why, "timeout") == 0)
      fail(Code::kDeadlineExceeded, "did not finish booting within " + std::to_string(timeout_ms / 1000) +
                                        " s ($SANDLET_MICROVM_BOOT_TIMEOUT_MS)");
    fail(Code::kInternal, "ended while booting" + describe_exit(pidfd_.get()));
  }
  const proto::FrameHeader h = proto::parse_header(hdr);
  if (proto::check_header(proto::kInitToHost, h) != proto::HeaderCheck::kOk)
    fail(Code::kInternal, "answered its configuration with " + proto::describe(proto::check_header(proto::kInitToHost, h), h, proto::kInitToHost));
  std::string payload(h.len, '\0');
  if (h.len && !read_exact(sock.get(), pidfd_.get(), payload.data(), h.len, deadline, &why))
    fail(Code::kInternal, "stopped answering while booting");
  if (h.type == static_cast<uint8_t>(proto::InitMsg::kError)) {
    proto::ErrorReply r;
    if (!proto::ErrorReply::decode(payload, &r)) fail(Code::kInternal, "sent a malformed error");
    throw Error(static_cast<Code>(r.code), "sandbox " + id_ + ": microVM start-up: " + r.message, r.err_no);
  }
  if (h.type != static_cast<uint8_t>(proto::InitMsg::kReady)) fail(Code::kInternal, "answered its configuration out of order");
  fault_point("microvm.ready");
}

// The last lines the guest's console and QEMU wrote, for a failed start's message.
std::string MicrovmSandbox::console_tail() const {
  std::string out;
  for (const char* name : {"qemu.log", "console.log"}) {
    sys::UniqueFd fd(::open(path(name).c_str(), O_RDONLY | O_CLOEXEC));
    struct stat st;
    if (!fd || ::fstat(fd.get(), &st) != 0 || st.st_size == 0) continue;
    std::string t(static_cast<size_t>(std::min<off_t>(st.st_size, 4096)), '\0');
    const ssize_t n = ::pread(fd.get(), t.data(), t.size(), st.st_size - static_cast<off_t>(t.size()));
    if (n <= 0) continue;
    t.resize(static_cast<size_t>(n));
    while (!t.empty() && (t.back() == '\n' || t.back() == '\r')) t.pop_back();
    size_t start = t.size();
    for (int lines = 0; lines < 6 && start > 0; ++lines) {
      size_t nl = t.rfind('\n', start - 1);
      start = nl == std::string::npos ? 0 : nl;
      if (nl == std::string::npos) break;
    }
    std::string tail = t.substr(start);
    for (char& c : tail)
      if (c == '\r' || (static_cast<unsigned char>(c) < 0x20 && c != '\n')) c = ' ';
    out += std::string("; ") + name + " ends: " + tail;
  }
  return out;
}

// (The filter is found from the recorded group: a damaged record must not lead to another group's.)
void MicrovmSandbox::check_own_cgroup() const {
  if (state_.cgroups.v2 != sys::cgroup_paths_for(node_->cgroups, id_).v2)
    throw Error(Code::kDataLoss, "sandbox " + id_ + ": its record names a cgroup outside sandlet's");
}

void MicrovmSandbox::net_update(const NetworkPolicy& policy) {
  check_own_cgroup();
  host::update_sandbox_network(state_.net_gateway ? &node_->gateway() : nullptr, state_.cgroups.v2, id_, policy,
                               node_->net_uplink_netns);
}

json::object MicrovmSandbox::net_stats() const {
  check_own_cgroup();
  return host::sandbox_network_stats(state_.net_gateway ? &node_->gateway() : nullptr, state_.cgroups.v2, id_, dir_);
}

void MicrovmSandbox::pause() { qmp_command(path("qmp.sock"), "stop", kQmpTimeoutMs); }
void MicrovmSandbox::resume() { qmp_command(path("qmp.sock"), "cont", kQmpTimeoutMs); }

}  // namespace sandlet::microvm
