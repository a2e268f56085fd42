// Thin wrappers over bpf(2): maps, program loading, cgroup attachment, ids. No ELF loader: programs are
// instruction arrays (src/policy/net_program.hpp). Every failure throws an Error naming the operation.
#pragma once
#include <linux/bpf.h>

#include <cstdint>
#include <string>
#include <vector>

#include "sys/fd.hpp"

namespace sandlet::sys {

struct BpfMapSpec {
  bpf_map_type type = BPF_MAP_TYPE_ARRAY;
  uint32_t key_size = 4;
  uint32_t value_size = 8;
  uint32_t max_entries = 1;
  uint32_t flags = 0;
  int inner_map_fd = -1;  // map-in-map: a map of the inner type
  const char* name = "";  // <= 15 characters, shown by bpftool
};

UniqueFd bpf_map_create(const BpfMapSpec& spec);
void bpf_map_update(int map_fd, const void* key, const void* value, uint64_t flags = BPF_ANY);
// `count` keys and values in one call (BPF_MAP_UPDATE_BATCH): a map of maps then waits for the programs
// reading it once, not once per element. False when this kernel or map type has no batch update (write
// them one by one then); throws on other errors.
bool bpf_map_update_batch(int map_fd, const void* keys, const void* values, uint32_t count);
bool bpf_map_lookup(int map_fd, const void* key, void* value);  // false: no such key
bool bpf_map_delete(int map_fd, const void* key);                // false: no such key
// The key after `key` (nullptr: the first) into `next`; false when there is none.
bool bpf_map_next_key(int map_fd, const void* key, void* next);

// Loads a program; on a verifier rejection the error carries the verifier's log.
UniqueFd bpf_prog_load(bpf_prog_type type, bpf_attach_type expected, const std::vector<bpf_insn>& insns,
                       const char* name);
// Attaches to a cgroup2 directory (BPF_F_ALLOW_MULTI: descendants' groups run it too). With
// `replace_fd` >= 0 that attached program is swapped for `prog_fd` in one step (BPF_F_REPLACE).
void bpf_cgroup_attach(int cgroup_fd, int prog_fd, bpf_attach_type type, int replace_fd = -1);
void bpf_cgroup_detach(int cgroup_fd, int prog_fd, bpf_attach_type type);
// A BPF link of `prog_fd` to `target_fd` (a network namespace for BPF_SK_LOOKUP): attached while the
// returned fd (or a pin) lives, so the holder's exit detaches it.
UniqueFd bpf_link_create(int prog_fd, int target_fd, bpf_attach_type type);
// Ids of the programs attached directly to the group for `type`.
std::vector<uint32_t> bpf_cgroup_query(int cgroup_fd, bpf_attach_type type);

struct BpfProgInfo {
  uint32_t id = 0;
  std::string name;
  std::vector<uint32_t> map_ids;
};
struct BpfMapInfo {
  uint32_t id = 0;
  std::string name;
  uint32_t type = 0;
  uint32_t max_entries = 0;
};
BpfProgInfo bpf_prog_info_of(int prog_fd);
BpfMapInfo bpf_map_info_of(int map_fd);
UniqueFd bpf_prog_by_id(uint32_t id);  // empty when the id is gone
UniqueFd bpf_map_by_id(uint32_t id);   // empty when the id is gone

// Instruction builders (the kernel's encoding; names follow the BPF instruction set document).
namespace bpf_asm {
bpf_insn mov64_reg(int dst, int src);
bpf_insn mov64_imm(int dst, int32_t imm);
bpf_insn alu64_imm(int op, int dst, int32_t imm);   // op: BPF_ADD, BPF_AND, BPF_LSH, ...
bpf_insn alu64_reg(int op, int dst, int src);
bpf_insn to_be16(int dst);                          // host <-> network order of the low 16 bits
bpf_insn ldx(int size, int dst, int src, int16_t off);  // size: BPF_B, BPF_H, BPF_W, BPF_DW
bpf_insn stx(int size, int dst, int src, int16_t off);
bpf_insn st_imm(int size, int dst, int16_t off, int32_t imm);
bpf_insn atomic_add64(int dst, int src, int16_t off);   // *(u64 *)(dst + off) += src
bpf_insn atomic_fetch_add64(int dst, int src, int16_t off);  // the same, and src = the value before
bpf_insn jmp_imm(int op, int dst, int32_t imm, int16_t off);  // op: BPF_JEQ, BPF_JNE, BPF_JGT, ...
bpf_insn jmp_reg(int op, int dst, int src, int16_t off);
bpf_insn ja(int16_t off);
bpf_insn call(int helper);
bpf_insn jmp32_imm(int op, int dst, int32_t imm, int16_t off);  // compares the low 32 bits only
bpf_insn exit_insn();
// The two halves of a 64-bit load of a map's fd (BPF_PSEUDO_MAP_FD).
void ld_map_fd(std::vector<bpf_insn>& out, int dst, int map_fd);
}  // namespace bpf_asm

}  // namespace sandlet::sys
