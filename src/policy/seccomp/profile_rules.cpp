#include "policy/seccomp/profile_rules.hpp"

#include <seccomp.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <string>
#include <cstring>
#include <map>
#include <set>

#include "common/error.hpp"
#include "policy/seccomp/profile_table.hpp"

namespace sandlet::seccomp {
namespace {

[[noreturn]] void fail(const std::string& what, int rc) {
  throw Error(Code::kInternal, "seccomp filter: " + what + ": " + std::strerror(-rc));
}

void check(int rc, const std::string& what) {
  if (rc < 0) fail(what, rc);
}

int resolve(std::string_view name) {
  return seccomp_syscall_resolve_name_arch(SCMP_ARCH_NATIVE, std::string(name).c_str());
}

std::string export_bpf(scmp_filter_ctx ctx) {
  const int mem = ::memfd_create("sandlet-seccomp", MFD_CLOEXEC);
  if (mem < 0) throw_errno("seccomp filter: memfd_create");
  struct CloseMem {
    int fd;
    ~CloseMem() { ::close(fd); }
  } close_mem{mem};
  check(seccomp_export_bpf(ctx, mem), "export");
  const off_t size = ::lseek(mem, 0, SEEK_END);
  if (size < 0) throw_errno("seccomp filter: size of the exported program");
  std::string bpf(static_cast<size_t>(size), '\0');
  if (::pread(mem, bpf.data(), bpf.size(), 0) != size) throw_errno("seccomp filter: read the exported program");
  return bpf;
}

scmp_arg_cmp compared(const ArgMatch& m) {
  if (m.op == Cmp::kGe) return scmp_arg_cmp{m.index, SCMP_CMP_GE, m.value, 0};
  return scmp_arg_cmp{m.index, SCMP_CMP_MASKED_EQ, m.mask, m.value};
}

}  // namespace

bool syscall_known(std::string_view name) { return syscall_number(name) >= 0; }

int syscall_number(std::string_view name) {
  if (name.empty()) return -1;
  const int nr = resolve(name);
  return nr == __NR_SCMP_ERROR || nr < 0 ? -1 : nr;
}

std::string syscall_name(int nr) {
  char* name = nr >= 0 ? seccomp_syscall_resolve_num_arch(SCMP_ARCH_NATIVE, nr) : nullptr;
  if (!name) return "syscall_" + std::to_string(nr);
  std::string out(name);
  std::free(name);
  return out;
}

std::string compile_seccomp_bpf(std::string_view version, std::span<const std::string> allow,
                                std::span<const std::string> deny) {
  const std::span<const DenyRule> rules = profile_rules(version);
  if (rules.empty()) throw Error(Code::kInvalidArgument, "unknown seccomp profile '" + std::string(version) + "'");
  std::set<std::string_view> relaxed;
  std::set<const ArgMatch*> relaxed_args;
  for (const std::string& name : allow) {
    const Relaxation* r = find_relaxation(name);
    if (!r) throw Error(Code::kInvalidArgument, "unknown seccomp relaxation '" + name + "'");
    relaxed.insert(r->syscalls.begin(), r->syscalls.end());
    relaxed_args.insert(r->arguments.begin(), r->arguments.end());
  }
  // Unconditional denials first: a syscall denied outright needs none of its argument rules.
  std::map<std::string_view, int> whole;  // name -> errno
  for (const DenyRule& rule : rules)
    if (!rule.arg && !relaxed.count(rule.name)) whole.emplace(rule.name, rule.error);
  for (const std::string& name : deny) {
    if (!syscall_known(name)) throw Error(Code::kInvalidArgument, "unknown system call '" + name + "'");
    whole.emplace(name, EPERM);
  }

  scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
  if (!ctx) throw Error(Code::kInternal, "seccomp filter: seccomp_init failed");
  struct Guard {
    scmp_filter_ctx c;
    ~Guard() { seccomp_release(c); }
  } guard{ctx};
  // Another ABI's calls (i386 through int 0x80, x32's numbers with bit 30 set) are not checked by the rules
  // below, which name x86_64 numbers: the whole process dies, not just the calling thread.
  check(seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS), "bad-architecture action");
  // A binary tree over the call numbers instead of libseccomp's linear list. The kernel's allow cache
  // answers every call allowed whatever its arguments without running the program (both layouts compare
  // only the number and the architecture there); the calls with argument rules (ioctl, clone,
  // personality, socket) run it every time, and the tree shortens their path (bench/RESULTS.md, "Seccomp
  // policy overhead").
  check(seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2), "binary-tree layout");
  for (const auto& [name, error] : whole) {
    const int nr = resolve(name);
    if (nr == __NR_SCMP_ERROR) continue;  // not a call of this architecture
    check(seccomp_rule_add(ctx, SCMP_ACT_ERRNO(error), nr, 0), std::string(name));
  }
  for (const DenyRule& rule : rules) {
    if (!rule.arg || whole.count(rule.name)) continue;
    if (relaxed_args.count(rule.arg) || (rule.and_arg && relaxed_args.count(rule.and_arg))) continue;
    const int nr = resolve(rule.name);
    if (nr == __NR_SCMP_ERROR) continue;
    const scmp_arg_cmp cmp[2] = {compared(*rule.arg), rule.and_arg ? compared(*rule.and_arg) : scmp_arg_cmp{}};
    check(seccomp_rule_add_array(ctx, SCMP_ACT_ERRNO(rule.error), nr, rule.and_arg ? 2 : 1, cmp),
          std::string(rule.name) + " rule");
  }
  return export_bpf(ctx);
}

std::string build_default_seccomp_bpf() { return compile_seccomp_bpf(kNewestProfile, {}, {}); }

}  // namespace sandlet::seccomp
