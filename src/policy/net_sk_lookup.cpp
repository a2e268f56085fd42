#include "policy/net_sk_lookup.hpp"

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstddef>
#include <cstring>
#include <map>

#include "sys/bpf.hpp"

namespace sandlet::policy {

using namespace sys::bpf_asm;

namespace {

// Forward jumps to named places, resolved when the place is reached.
class Code {
 public:
  void emit(bpf_insn i) { p_.push_back(i); }
  void jump(int label, bpf_insn i) { pending_[label].push_back(p_.size()), p_.push_back(i); }
  void place(int label) {
    for (size_t at : pending_[label]) p_[at].off = static_cast<int16_t>(p_.size() - at - 1);
    pending_[label].clear();
  }
  std::vector<bpf_insn>& insns() { return p_; }

 private:
  std::vector<bpf_insn> p_;
  std::map<int, std::vector<size_t>> pending_;
};

enum { kPassLabel, kV6, kProto, kNext1, kNext2 };

// Jumps to `to` when the lookup's local IPv6 address equals `addr` (16 bytes, network order).
void if_local6_is(Code& c, const uint8_t* addr, int to, int next) {
  for (int i = 0; i < 4; ++i) {
    uint32_t w;
    std::memcpy(&w, addr + 4 * i, 4);
    c.emit(ldx(BPF_W, BPF_REG_3, BPF_REG_6, static_cast<int16_t>(offsetof(bpf_sk_lookup, local_ip6) + 4 * i)));
    if (i < 3) c.jump(next, jmp32_imm(BPF_JNE, BPF_REG_3, static_cast<int32_t>(w), 0));
    else c.jump(to, jmp32_imm(BPF_JEQ, BPF_REG_3, static_cast<int32_t>(w), 0));
  }
  c.place(next);
}

}  // namespace

std::vector<bpf_insn> gateway_sk_lookup_program(int sockmap_fd) {
  constexpr int16_t kSlot = -4;
  constexpr int32_t kPass = 1;
  constexpr int32_t kLoopbackIfindex = 1;  // LOOPBACK_IFINDEX: fixed by the kernel  // SK_PASS: an unassigned lookup goes on to the regular socket tables
  Code c;
  c.emit(mov64_reg(BPF_REG_6, BPF_REG_1));
  // Only what the namespace sends itself (it arrives on lo, ifindex 1 in every namespace): a packet from
  // another interface (one an operator or a test added) is a reply or a peer's, never steered.
  c.emit(ldx(BPF_W, BPF_REG_2, BPF_REG_6, offsetof(bpf_sk_lookup, ingress_ifindex)));
  c.jump(kPassLabel, jmp_imm(BPF_JNE, BPF_REG_2, kLoopbackIfindex, 0));
  c.emit(ldx(BPF_W, BPF_REG_2, BPF_REG_6, offsetof(bpf_sk_lookup, family)));
  c.jump(kV6, jmp_imm(BPF_JEQ, BPF_REG_2, AF_INET6, 0));
  // IPv4: 127.0.0.0/8 (the first byte of the network-order address) and the sandbox's own source
  // address are the namespace's own.
  c.emit(ldx(BPF_W, BPF_REG_3, BPF_REG_6, offsetof(bpf_sk_lookup, local_ip4)));
  uint32_t own4;
  std::memcpy(&own4, kSandboxSource4, 4);
  c.jump(kPassLabel, jmp32_imm(BPF_JEQ, BPF_REG_3, static_cast<int32_t>(own4), 0));
  c.emit(alu64_imm(BPF_AND, BPF_REG_3, 0xff));
  c.jump(kPassLabel, jmp_imm(BPF_JEQ, BPF_REG_3, 127, 0));
  c.emit(mov64_imm(BPF_REG_4, kGwTcp4));
  c.jump(kProto, ja(0));
  // IPv6: ::1 and the sandbox's own source address.
  c.place(kV6);
  static const uint8_t loopback6[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
  if_local6_is(c, loopback6, kPassLabel, kNext1);
  if_local6_is(c, kSandboxSource6, kPassLabel, kNext2);
  c.emit(mov64_imm(BPF_REG_4, kGwTcp6));
  // TCP keeps the slot, UDP takes the next pair, anything else passes.
  c.place(kProto);
  c.emit(ldx(BPF_W, BPF_REG_2, BPF_REG_6, offsetof(bpf_sk_lookup, protocol)));
  c.emit(jmp_imm(BPF_JEQ, BPF_REG_2, IPPROTO_TCP, 2));
  c.jump(kPassLabel, jmp_imm(BPF_JNE, BPF_REG_2, IPPROTO_UDP, 0));
  c.emit(alu64_imm(BPF_ADD, BPF_REG_4, 2));
  c.emit(stx(BPF_W, BPF_REG_10, BPF_REG_4, kSlot));
  ld_map_fd(c.insns(), BPF_REG_1, sockmap_fd);
  c.emit(mov64_reg(BPF_REG_2, BPF_REG_10));
  c.emit(alu64_imm(BPF_ADD, BPF_REG_2, kSlot));
  c.emit(call(BPF_FUNC_map_lookup_elem));
  c.jump(kPassLabel, jmp_imm(BPF_JEQ, BPF_REG_0, 0, 0));  // no gateway socket (yet): pass
  c.emit(mov64_reg(BPF_REG_7, BPF_REG_0));
  c.emit(mov64_reg(BPF_REG_1, BPF_REG_6));
  c.emit(mov64_reg(BPF_REG_2, BPF_REG_7));
  c.emit(mov64_imm(BPF_REG_3, 0));
  c.emit(call(BPF_FUNC_sk_assign));
  c.emit(mov64_reg(BPF_REG_1, BPF_REG_7));
  c.emit(call(BPF_FUNC_sk_release));
  c.place(kPassLabel);
  c.emit(mov64_imm(BPF_REG_0, kPass));
  c.emit(exit_insn());
  return std::move(c.insns());
}

}  // namespace sandlet::policy
