#include "policy/net_program.hpp"

#include <netinet/in.h>

#include <cstddef>

#include "policy/net_rules.hpp"
#include "sys/bpf.hpp"

namespace sandlet::policy {
namespace {

using namespace sys::bpf_asm;

// Stack layout (offsets from r10).
constexpr int16_t kKey = -32;       // NetTrieKey, 20 bytes
constexpr int16_t kSlotKey = -36;   // u32 0: the outer map's only slot
constexpr int16_t kStatKey = -40;   // u32 hook index
constexpr int16_t kHeader = -96;    // up to 40 bytes of IP header
constexpr int16_t kL4 = -100;       // 4 bytes: source and destination port

enum Label { kAllow, kDeny, kRefuse, kMatch, kV4, kV6, kLabelCount };

// Instructions with forward jumps to labels, resolved when the label is placed.
class Program {
 public:
  void emit(bpf_insn i) { code_.push_back(i); }
  void map(int dst, int fd) { ld_map_fd(code_, dst, fd); }
  void jump_imm(int op, int reg, int32_t imm, Label to) { fix(to), emit(jmp_imm(op, reg, imm, 0)); }
  void jump_reg(int op, int reg, int src, Label to) { fix(to), emit(jmp_reg(op, reg, src, 0)); }
  void jump(Label to) { fix(to), emit(ja(0)); }
  void place(Label l) {
    const auto here = static_cast<int>(code_.size());
    for (int at : pending_[l]) code_[at].off = static_cast<int16_t>(here - at - 1);
    pending_[l].clear();
  }
  std::vector<bpf_insn> take() { return std::move(code_); }

 private:
  void fix(Label l) { pending_[l].push_back(static_cast<int>(code_.size())); }
  std::vector<bpf_insn> code_;
  std::vector<int> pending_[kLabelCount];
};

// The IPv4-mapped head of the key and a prefix length of 128; the caller stores the address.
void key_v4_head(Program& p) {
  p.emit(st_imm(BPF_W, BPF_REG_10, kKey, 128));
  p.emit(st_imm(BPF_W, BPF_REG_10, kKey + 4, 0));
  p.emit(st_imm(BPF_W, BPF_REG_10, kKey + 8, 0));
  p.emit(st_imm(BPF_W, BPF_REG_10, kKey + 12, static_cast<int32_t>(0xffff0000u)));  // bytes 00 00 ff ff
}

// r7 = the protocol bit of the IP protocol number in `reg` (0 when no rule can name it).
void proto_bit(Program& p, int reg) {
  p.emit(mov64_imm(BPF_REG_7, 0));
  const struct {
    int number, bit;
  } table[] = {{IPPROTO_TCP, kNetTcp}, {IPPROTO_UDP, kNetUdp}, {IPPROTO_ICMP, kNetIcmp}, {IPPROTO_ICMPV6, kNetIcmp}};
  for (const auto& m : table) {
    p.emit(jmp_imm(BPF_JNE, reg, m.number, 1));
    p.emit(mov64_imm(BPF_REG_7, m.bit));
  }
}

// With the key at kKey, r7 the protocol bit and r8 the destination port (host order): allow (1) when an
// entry of the longest matching prefix covers them, else count a denial for `hook` and return 0.
void match_and_return(Program& p, const NetMaps& maps, NetHook hook) {
  const int rules_fd = maps.rules, stats_fd = maps.stats;
  p.place(kMatch);
  p.jump_imm(BPF_JEQ, BPF_REG_7, 0, kDeny);
  // r9 = the reach a protected range holding the destination asks for, 0 when none holds it.
  p.emit(mov64_imm(BPF_REG_9, 0));
  p.map(BPF_REG_1, maps.protect);
  p.emit(mov64_reg(BPF_REG_2, BPF_REG_10));
  p.emit(alu64_imm(BPF_ADD, BPF_REG_2, kKey));
  p.emit(call(BPF_FUNC_map_lookup_elem));
  p.emit(jmp_imm(BPF_JEQ, BPF_REG_0, 0, 1));
  p.emit(ldx(BPF_W, BPF_REG_9, BPF_REG_0, 0));
  p.emit(st_imm(BPF_W, BPF_REG_10, kSlotKey, 0));
  p.map(BPF_REG_1, rules_fd);
  p.emit(mov64_reg(BPF_REG_2, BPF_REG_10));
  p.emit(alu64_imm(BPF_ADD, BPF_REG_2, kSlotKey));
  p.emit(call(BPF_FUNC_map_lookup_elem));
  p.jump_imm(BPF_JEQ, BPF_REG_0, 0, kDeny);
  p.emit(mov64_reg(BPF_REG_1, BPF_REG_0));
  p.emit(mov64_reg(BPF_REG_2, BPF_REG_10));
  p.emit(alu64_imm(BPF_ADD, BPF_REG_2, kKey));
  p.emit(call(BPF_FUNC_map_lookup_elem));
  p.jump_imm(BPF_JEQ, BPF_REG_0, 0, kDeny);
  for (int i = 0; i < kNetEntriesPerPrefix; ++i) {
    const auto base = static_cast<int>(i * sizeof(NetPortEntry));
    p.emit(ldx(BPF_B, BPF_REG_1, BPF_REG_0, static_cast<int16_t>(base + offsetof(NetPortEntry, protos))));
    p.emit(alu64_reg(BPF_AND, BPF_REG_1, BPF_REG_7));
    p.emit(jmp_imm(BPF_JEQ, BPF_REG_1, 0, 6));  // not this protocol: the next entry
    p.emit(ldx(BPF_B, BPF_REG_1, BPF_REG_0, static_cast<int16_t>(base + offsetof(NetPortEntry, reach))));
    p.emit(jmp_reg(BPF_JGT, BPF_REG_9, BPF_REG_1, 4));  // a rule wider than the protected range: the next
    p.emit(ldx(BPF_H, BPF_REG_1, BPF_REG_0, static_cast<int16_t>(base + offsetof(NetPortEntry, lo))));
    p.emit(jmp_reg(BPF_JGT, BPF_REG_1, BPF_REG_8, 2));  // below the range: the next entry
    p.emit(ldx(BPF_H, BPF_REG_1, BPF_REG_0, static_cast<int16_t>(base + offsetof(NetPortEntry, hi))));
    p.jump_reg(BPF_JGE, BPF_REG_1, BPF_REG_8, kAllow);
  }
  p.place(kDeny);
  p.emit(st_imm(BPF_W, BPF_REG_10, kStatKey, static_cast<int32_t>(hook)));
  p.map(BPF_REG_1, stats_fd);
  p.emit(mov64_reg(BPF_REG_2, BPF_REG_10));
  p.emit(alu64_imm(BPF_ADD, BPF_REG_2, kStatKey));
  p.emit(call(BPF_FUNC_map_lookup_elem));
  p.emit(jmp_imm(BPF_JEQ, BPF_REG_0, 0, 2));
  p.emit(mov64_imm(BPF_REG_1, 1));
  p.emit(atomic_add64(BPF_REG_0, BPF_REG_1, 0));
  // The record: number it from the total, write it into its ring slot.
  p.emit(st_imm(BPF_W, BPF_REG_10, kStatKey, kNetStatTotal));
  p.map(BPF_REG_1, stats_fd);
  p.emit(mov64_reg(BPF_REG_2, BPF_REG_10));
  p.emit(alu64_imm(BPF_ADD, BPF_REG_2, kStatKey));
  p.emit(call(BPF_FUNC_map_lookup_elem));
  p.jump_imm(BPF_JEQ, BPF_REG_0, 0, kRefuse);
  p.emit(mov64_imm(BPF_REG_9, 1));
  p.emit(atomic_fetch_add64(BPF_REG_0, BPF_REG_9, 0));  // r9 = the total before this denial
  p.emit(mov64_reg(BPF_REG_1, BPF_REG_9));
  p.emit(alu64_imm(BPF_AND, BPF_REG_1, kNetDeniedSlots - 1));
  p.emit(stx(BPF_W, BPF_REG_10, BPF_REG_1, kStatKey));
  p.map(BPF_REG_1, maps.denied);
  p.emit(mov64_reg(BPF_REG_2, BPF_REG_10));
  p.emit(alu64_imm(BPF_ADD, BPF_REG_2, kStatKey));
  p.emit(call(BPF_FUNC_map_lookup_elem));
  p.jump_imm(BPF_JEQ, BPF_REG_0, 0, kRefuse);
  p.emit(alu64_imm(BPF_ADD, BPF_REG_9, 1));
  p.emit(stx(BPF_DW, BPF_REG_0, BPF_REG_9, offsetof(NetDeniedRecord, seq)));
  for (int i = 0; i < 4; ++i) {
    p.emit(ldx(BPF_W, BPF_REG_1, BPF_REG_10, static_cast<int16_t>(kKey + 4 + 4 * i)));
    p.emit(stx(BPF_W, BPF_REG_0, BPF_REG_1, static_cast<int16_t>(offsetof(NetDeniedRecord, addr) + 4 * i)));
  }
  p.emit(stx(BPF_H, BPF_REG_0, BPF_REG_8, offsetof(NetDeniedRecord, port)));
  p.emit(stx(BPF_B, BPF_REG_0, BPF_REG_7, offsetof(NetDeniedRecord, protos)));
  p.emit(st_imm(BPF_B, BPF_REG_0, offsetof(NetDeniedRecord, hook), static_cast<int32_t>(hook)));
  p.place(kRefuse);
  p.emit(mov64_imm(BPF_REG_0, 0));
  p.emit(exit_insn());
  p.place(kAllow);
  p.emit(mov64_imm(BPF_REG_0, 1));
  p.emit(exit_insn());
}

// r1 = skb, r2 = offset, r3 = stack buffer, r4 = length; a failed load drops the packet.
void load_bytes(Program& p, int offset_reg, int32_t offset_imm, int16_t buf, int32_t len) {
  p.emit(mov64_reg(BPF_REG_1, BPF_REG_6));
  if (offset_reg >= 0)
    p.emit(mov64_reg(BPF_REG_2, offset_reg));
  else
    p.emit(mov64_imm(BPF_REG_2, offset_imm));
  p.emit(mov64_reg(BPF_REG_3, BPF_REG_10));
  p.emit(alu64_imm(BPF_ADD, BPF_REG_3, buf));
  p.emit(mov64_imm(BPF_REG_4, len));
  p.emit(call(BPF_FUNC_skb_load_bytes));
  p.jump_imm(BPF_JNE, BPF_REG_0, 0, kDeny);
}

}  // namespace

std::vector<bpf_insn> net_sock_addr_program(bool ipv6, NetHook hook, const NetMaps& maps) {
  Program p;
  p.emit(mov64_reg(BPF_REG_6, BPF_REG_1));
  if (!ipv6) {
    key_v4_head(p);
    p.emit(ldx(BPF_W, BPF_REG_1, BPF_REG_6, offsetof(bpf_sock_addr, user_ip4)));
    p.emit(stx(BPF_W, BPF_REG_10, BPF_REG_1, kKey + 16));
  } else {
    p.emit(st_imm(BPF_W, BPF_REG_10, kKey, 128));
    for (int i = 0; i < 4; ++i) {
      p.emit(ldx(BPF_W, BPF_REG_1, BPF_REG_6, static_cast<int16_t>(offsetof(bpf_sock_addr, user_ip6) + 4 * i)));
      p.emit(stx(BPF_W, BPF_REG_10, BPF_REG_1, static_cast<int16_t>(kKey + 4 + 4 * i)));
    }
  }
  p.emit(ldx(BPF_W, BPF_REG_2, BPF_REG_6, offsetof(bpf_sock_addr, protocol)));
  proto_bit(p, BPF_REG_2);
  p.emit(ldx(BPF_W, BPF_REG_8, BPF_REG_6, offsetof(bpf_sock_addr, user_port)));
  p.emit(to_be16(BPF_REG_8));
  match_and_return(p, maps, hook);
  return p.take();
}

std::vector<bpf_insn> net_egress_program(const NetMaps& maps) {
  Program p;
  p.emit(mov64_reg(BPF_REG_6, BPF_REG_1));
  // A header that cannot be read is denied before these are known: the record then shows zeros.
  p.emit(mov64_imm(BPF_REG_7, 0));
  p.emit(mov64_imm(BPF_REG_8, 0));
  for (int off = 0; off < 20; off += 4) p.emit(st_imm(BPF_W, BPF_REG_10, static_cast<int16_t>(kKey + off), 0));
  p.emit(ldx(BPF_W, BPF_REG_2, BPF_REG_6, offsetof(__sk_buff, protocol)));
  p.jump_imm(BPF_JEQ, BPF_REG_2, 0x0008, kV4);  // htons(ETH_P_IP)
  p.jump_imm(BPF_JEQ, BPF_REG_2, 0xdd86, kV6);  // htons(ETH_P_IPV6)
  p.emit(mov64_imm(BPF_REG_0, 1));  // not IP (only inet sockets reach this hook)
  p.emit(exit_insn());

  p.place(kV4);
  load_bytes(p, -1, 0, kHeader, 20);
  key_v4_head(p);
  p.emit(ldx(BPF_W, BPF_REG_1, BPF_REG_10, kHeader + 16));  // destination address
  p.emit(stx(BPF_W, BPF_REG_10, BPF_REG_1, kKey + 16));
  p.emit(ldx(BPF_B, BPF_REG_2, BPF_REG_10, kHeader + 9));  // protocol
  p.emit(ldx(BPF_B, BPF_REG_9, BPF_REG_10, kHeader));
  p.emit(alu64_imm(BPF_AND, BPF_REG_9, 0x0f));
  p.emit(alu64_imm(BPF_LSH, BPF_REG_9, 2));  // header length in bytes
  proto_bit(p, BPF_REG_2);
  p.jump_imm(BPF_JEQ, BPF_REG_7, kNetIcmp, kMatch);
  p.jump_imm(BPF_JEQ, BPF_REG_7, 0, kMatch);
  load_bytes(p, BPF_REG_9, 0, kL4, 4);
  p.emit(ldx(BPF_H, BPF_REG_8, BPF_REG_10, kL4 + 2));
  p.emit(to_be16(BPF_REG_8));
  p.jump(kMatch);

  p.place(kV6);
  load_bytes(p, -1, 0, kHeader, 40);
  p.emit(st_imm(BPF_W, BPF_REG_10, kKey, 128));
  for (int i = 0; i < 4; ++i) {
    p.emit(ldx(BPF_W, BPF_REG_1, BPF_REG_10, static_cast<int16_t>(kHeader + 24 + 4 * i)));
    p.emit(stx(BPF_W, BPF_REG_10, BPF_REG_1, static_cast<int16_t>(kKey + 4 + 4 * i)));
  }
  p.emit(ldx(BPF_B, BPF_REG_2, BPF_REG_10, kHeader + 6));  // next header (no extension headers allowed)
  proto_bit(p, BPF_REG_2);
  p.jump_imm(BPF_JEQ, BPF_REG_7, kNetIcmp, kMatch);
  p.jump_imm(BPF_JEQ, BPF_REG_7, 0, kMatch);
  load_bytes(p, -1, 40, kL4, 4);
  p.emit(ldx(BPF_H, BPF_REG_8, BPF_REG_10, kL4 + 2));
  p.emit(to_be16(BPF_REG_8));
  match_and_return(p, maps, kNetHookEgress);
  return p.take();
}

}  // namespace sandlet::policy
