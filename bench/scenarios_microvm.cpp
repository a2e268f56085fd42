// microvm: the microvm backend against plain QEMU, same accelerator, same run.
// - create -> first exec of /bin/true, vs QEMU booting the same kernel, initramfs and disks to the point
//   where the guest init would wait for its configuration (its `sandlet.marker=1` mode prints a marker and
//   powers off): what sandlet adds around a boot (jail, disks, channel, agent start-up).
// - the same from the warm pool (VMs launched ahead), against the cold create and the plain boot.
// - exec p50 in a running microVM vs in a container.
// - host memory per idle microVM (MemAvailable drop / N) vs N idle plain QEMUs (marker mode 2).
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <x86intrin.h>

#include <filesystem>
#include <string>
#include <vector>

#include "capi.hpp"
#include "memory.hpp"
#include "report.hpp"
#include "scenarios.hpp"
#include "stats.hpp"

namespace bench {
namespace json = boost::json;
namespace fs = std::filesystem;

namespace {

std::uint64_t tsc_khz() {
  timespec a, b;
  clock_gettime(CLOCK_MONOTONIC_RAW, &a);
  const std::uint64_t t0 = __rdtsc();
  usleep(20000);
  clock_gettime(CLOCK_MONOTONIC_RAW, &b);
  const std::uint64_t t1 = __rdtsc();
  const std::uint64_t ns = (b.tv_sec - a.tv_sec) * 1000000000ull + b.tv_nsec - a.tv_nsec;
  return (t1 - t0) * 1000000ull / ns;
}

void run_tool(const std::vector<std::string> &argv) {
  std::string cmd;
  for (const auto &a : argv) cmd += "'" + a + "' ";
  if (std::system((cmd + ">/dev/null 2>&1").c_str()) != 0) throw BenchError("failed: " + cmd);
}

// A plain QEMU with the same machine, kernel, initramfs and disks as the backend's (qemu_command.cpp).
struct PlainQemu {
  pid_t pid = -1;
  int out = -1;  // its serial console
  PlainQemu(const std::string &kernel, const std::string &initrd, const std::string &layer,
            const std::string &upper, int marker) {
    std::vector<std::string> a = {"qemu-system-x86_64", "-M", "microvm,pit=off,pic=on,rtc=on,isa-serial=on,acpi=on",
                                  "-accel", "tcg,tb-size=64", "-cpu", "max", "-smp", "1", "-m", "512",
                                  "-nodefaults", "-no-user-config", "-no-reboot", "-display", "none",
                                  "-serial", "stdio", "-kernel", kernel, "-initrd", initrd, "-append",
                                  "console=ttyS0 quiet panic=-1 cryptomgr.notests sandlet.layers=1 sandlet.marker=" +
                                      std::to_string(marker) + " tsc_early_khz=" + std::to_string(tsc_khz()) +
                                      " tsc=reliable",
                                  "-drive", "file=" + layer + ",if=none,format=raw,id=d0,readonly=on",
                                  "-device", "virtio-blk-device,drive=d0,serial=sl-layer0",
                                  "-drive", "file=" + upper + ",if=none,format=raw,id=d1,cache=unsafe",
                                  "-device", "virtio-blk-device,drive=d1,serial=sl-upper",
                                  "-device", "virtio-serial-device,max_ports=2"};
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0) throw BenchError("pipe");
    pid = fork();
    if (pid == 0) {
      dup2(p[1], 1);
      int null = open("/dev/null", O_RDWR);
      dup2(null, 0);
      dup2(null, 2);
      std::vector<char *> argv;
      for (auto &s : a) argv.push_back(s.data());
      argv.push_back(nullptr);
      execvp(argv[0], argv.data());
      _exit(127);
    }
    close(p[1]);
    out = p[0];
  }
  // Until the marker line (false when QEMU ended first).
  bool wait_marker() {
    std::string seen;
    char buf[4096];
    for (;;) {
      ssize_t n = read(out, buf, sizeof buf);
      if (n <= 0) return false;
      seen.append(buf, static_cast<size_t>(n));
      if (seen.find("SANDLET-MARKER") != std::string::npos) return true;
      if (seen.size() > 65536) seen.erase(0, seen.size() - 64);
    }
  }
  void end() {
    if (pid > 0) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
      pid = -1;
    }
    if (out >= 0) close(out), out = -1;
  }
  ~PlainQemu() { end(); }
};

std::string find_initramfs(const fs::path &root) {
  for (const auto &e : fs::directory_iterator(root / "microvm"))
    if (e.path().extension() == ".cpio") return e.path();
  throw BenchError("no initramfs under " + (root / "microvm").string());
}

std::string kernel_path() {
  const char *env = std::getenv("SANDLET_MICROVM_KERNEL");
  return std::string(env && *env ? env : "/var/cache/sandlet/microvm-kernel/default") + "/vmlinux";
}

}  // namespace

json::object scenario_microvm(const Context &ctx) {
  const std::size_t n = iterations_of(ctx);
  Runtime rt(ctx.root, ctx.opt.workers, false);
  Spec vm(ctx.rootfs);
  vm.set_backend("microvm");
  Spec ct(ctx.rootfs);
  const fs::path scratch = ctx.root / "bench-microvm";
  fs::create_directories(scratch);
  const std::string layer = scratch / "layer.erofs", upper = scratch / "upper.img";
  run_tool({"mkfs.erofs", "--quiet", "-x-1", layer, ctx.rootfs.string()});

  std::vector<std::uint64_t> ours, peer;
  for (std::size_t i = 0; i < n + 1; ++i) {  // the first of each is a warm-up (initramfs build, page cache)
    throw_if_stopped();
    const auto t0 = now_ns();
    Sandbox sb = create_sandbox(rt.get(), vm);
    exec_ok(sb, {"/bin/true"});
    const auto t1 = now_ns();
    sb.destroy();
    sb.reset();
    fs::remove(upper);
    run_tool({"truncate", "-s", "2G", upper});
    run_tool({"mkfs.ext4", "-q", "-F", "-O", "^has_journal", "-E", "lazy_itable_init=1,nodiscard", "-m", "0", upper});
    const auto p0 = now_ns();
    PlainQemu q(kernel_path(), find_initramfs(ctx.root), layer, upper, 1);
    if (!q.wait_marker()) throw BenchError("plain QEMU ended before its marker");
    const auto p1 = now_ns();
    q.end();
    if (i == 0) continue;
    ours.push_back(t1 - t0);
    peer.push_back(p1 - p0);
  }
  json::object out;
  put_summary(out, summarize(ours));
  out["peer"] = peer_json("qemu", "qemu-system-x86_64 -M microvm (same kernel, initramfs, disks) to the init's marker",
                          summarize(peer), 0);
  out["ratio_vs_peer"] = round3(paired_ratio_median(ours, peer));

  // The warm pool: from a runtime's third create of the same store layers on, a VM the pool launched
  // ahead (given time to boot) only takes its configuration. (A host directory is never launched ahead.)
  {
    Runtime warm_rt(ctx.root, ctx.opt.workers, true);
    char* res = nullptr;
    sandlet_layer_import_options_t io = SANDLET_LAYER_IMPORT_OPTIONS_INIT;
    io.name = "bench-microvm-base";
    check(sandlet_layer_import(warm_rt.get(), ctx.rootfs.c_str(), &io, &res), "sandlet_layer_import(rootfs)");
    const json::value imported = json::parse(res);
    sandlet_free(res);
    Spec stored(json::value_to<std::string>(imported.as_object().at("layers").as_array().at(0).as_object().at("digest")));
    stored.set_backend("microvm");
    std::vector<std::uint64_t> warm;
    for (std::size_t i = 0; i < n + 2; ++i) {
      throw_if_stopped();
      const auto t0 = now_ns();
      Sandbox sb = create_sandbox(warm_rt.get(), stored);
      exec_ok(sb, {"/bin/true"});
      const auto t1 = now_ns();
      sb.destroy();
      if (i >= 2) warm.push_back(t1 - t0);
      sleep(5);
    }
    const Summary w = summarize(warm);
    json::object o;
    o["p50_ms"] = round3(w.p50_ms);
    o["p99_ms"] = round3(w.p99_ms);
    o["ratio_vs_cold"] = round3(w.p50_ms / summarize(ours).p50_ms);
    o["ratio_vs_qemu_boot"] = round3(w.p50_ms / summarize(peer).p50_ms);
    out["warm_pool"] = o;
  }

  // exec p50: a running microVM against a container.
  {
    const std::size_t execs = 200;
    std::vector<std::uint64_t> in_vm, in_ct;
    Sandbox a = create_sandbox(rt.get(), vm);
    Sandbox b = create_sandbox(rt.get(), ct);
    for (std::size_t i = 0; i < execs; ++i) {
      auto t = now_ns();
      exec_ok(a, {"/bin/true"});
      in_vm.push_back(now_ns() - t);
      t = now_ns();
      exec_ok(b, {"/bin/true"});
      in_ct.push_back(now_ns() - t);
    }
    a.destroy();
    b.destroy();
    json::object e;
    e["microvm_p50_ms"] = round3(summarize(in_vm).p50_ms);
    e["microvm_p99_ms"] = round3(summarize(in_vm).p99_ms);
    e["container_p50_ms"] = round3(summarize(in_ct).p50_ms);
    e["ratio_vs_container"] = round3(summarize(in_vm).p50_ms / summarize(in_ct).p50_ms);
    out["exec"] = e;
  }

  // Host memory per idle microVM, against idle plain QEMUs at the same point of their boot.
  {
    const std::size_t idle = 3;
    const MemSample before = sample_memory();
    std::vector<Sandbox> vms;
    for (std::size_t i = 0; i < idle; ++i) vms.push_back(create_sandbox(rt.get(), vm));
    sleep(2);
    const MemSample with_vms = sample_memory();
    for (auto &s : vms) s.destroy();
    vms.clear();
    std::vector<std::unique_ptr<PlainQemu>> qs;
    std::vector<std::string> uppers;
    const MemSample before_q = sample_memory();
    for (std::size_t i = 0; i < idle; ++i) {
      const std::string u = scratch / ("idle" + std::to_string(i) + ".img");
      run_tool({"truncate", "-s", "2G", u});
      run_tool({"mkfs.ext4", "-q", "-F", "-O", "^has_journal", "-m", "0", u});
      qs.push_back(std::make_unique<PlainQemu>(kernel_path(), find_initramfs(ctx.root), layer, u, 2));
      if (!qs.back()->wait_marker()) throw BenchError("plain QEMU ended before its marker");
    }
    sleep(2);
    const MemSample with_q = sample_memory();
    qs.clear();
    const auto drop_mib = [](const MemSample &a, const MemSample &b, std::size_t k) {
      const double d = static_cast<double>(a.kib.at("MemAvailable")) - static_cast<double>(b.kib.at("MemAvailable"));
      return round3(d / 1024.0 / static_cast<double>(k));
    };
    json::object m;
    m["idle_vms"] = idle;
    m["microvm_mib_per_vm"] = drop_mib(before, with_vms, idle);
    m["qemu_mib_per_vm"] = drop_mib(before_q, with_q, idle);
    out["memory"] = m;
  }
  fs::remove_all(scratch);
  return out;
}

}  // namespace bench
