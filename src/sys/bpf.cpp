#include "sys/bpf.hpp"

#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/error.hpp"

namespace sandlet::sys {
namespace {

long sys_bpf(int cmd, bpf_attr& attr) { return ::syscall(__NR_bpf, cmd, &attr, sizeof attr); }

uint64_t ptr(const void* p) { return reinterpret_cast<uintptr_t>(p); }

void copy_name(char (&dst)[BPF_OBJ_NAME_LEN], const char* name) {
  std::strncpy(dst, name, BPF_OBJ_NAME_LEN - 1);
}

}  // namespace

UniqueFd bpf_map_create(const BpfMapSpec& spec) {
  bpf_attr attr{};
  attr.map_type = spec.type;
  attr.key_size = spec.key_size;
  attr.value_size = spec.value_size;
  attr.max_entries = spec.max_entries;
  attr.map_flags = spec.flags;
  if (spec.inner_map_fd >= 0) attr.inner_map_fd = static_cast<uint32_t>(spec.inner_map_fd);
  copy_name(attr.map_name, spec.name);
  const long fd = sys_bpf(BPF_MAP_CREATE, attr);
  if (fd < 0) throw_errno(std::string("bpf map create ") + spec.name);
  return UniqueFd(static_cast<int>(fd));
}

void bpf_map_update(int map_fd, const void* key, const void* value, uint64_t flags) {
  bpf_attr attr{};
  attr.map_fd = static_cast<uint32_t>(map_fd);
  attr.key = ptr(key);
  attr.value = ptr(value);
  attr.flags = flags;
  if (sys_bpf(BPF_MAP_UPDATE_ELEM, attr) < 0) throw_errno("bpf map update");
}

bool bpf_map_update_batch(int map_fd, const void* keys, const void* values, uint32_t count) {
  bpf_attr attr{};
  attr.batch.map_fd = static_cast<uint32_t>(map_fd);
  attr.batch.keys = ptr(keys);
  attr.batch.values = ptr(values);
  attr.batch.count = count;
  if (sys_bpf(BPF_MAP_UPDATE_BATCH, attr) == 0) return true;
  // The command or the map type has no batch (the kernel's ENOTSUPP is 524): the caller goes one by one
  // (which also rewrites whatever a failed batch may have written before its error).
  constexpr int kKernelNotSupp = 524;
  if (errno == EINVAL || errno == kKernelNotSupp || errno == EOPNOTSUPP) return false;
  throw_errno("bpf map update batch");
}

bool bpf_map_lookup(int map_fd, const void* key, void* value) {
  bpf_attr attr{};
  attr.map_fd = static_cast<uint32_t>(map_fd);
  attr.key = ptr(key);
  attr.value = ptr(value);
  if (sys_bpf(BPF_MAP_LOOKUP_ELEM, attr) == 0) return true;
  if (errno == ENOENT) return false;
  throw_errno("bpf map lookup");
}

bool bpf_map_delete(int map_fd, const void* key) {
  bpf_attr attr{};
  attr.map_fd = static_cast<uint32_t>(map_fd);
  attr.key = ptr(key);
  if (sys_bpf(BPF_MAP_DELETE_ELEM, attr) == 0) return true;
  if (errno == ENOENT) return false;
  throw_errno("bpf map delete");
}

bool bpf_map_next_key(int map_fd, const void* key, void* next) {
  bpf_attr attr{};
  attr.map_fd = static_cast<uint32_t>(map_fd);
  attr.key = ptr(key);
  attr.next_key = ptr(next);
  if (sys_bpf(BPF_MAP_GET_NEXT_KEY, attr) == 0) return true;
  if (errno == ENOENT) return false;
  throw_errno("bpf map next key");
}

UniqueFd bpf_prog_load(bpf_prog_type type, bpf_attach_type expected, const std::vector<bpf_insn>& insns,
                       const char* name) {
  static const char kLicense[] = "GPL";  // the helpers used are available to any license; GPL is the norm
  bpf_attr attr{};
  attr.prog_type = type;
  attr.expected_attach_type = expected;
  attr.insns = ptr(insns.data());
  attr.insn_cnt = static_cast<uint32_t>(insns.size());
  attr.license = ptr(kLicense);
  copy_name(attr.prog_name, name);
  long fd = sys_bpf(BPF_PROG_LOAD, attr);
  if (fd >= 0) return UniqueFd(static_cast<int>(fd));
  const int err = errno;
  if (err == EACCES || err == EINVAL) {  // the verifier said no: load again for its reasons
    std::string log(64 * 1024, '\0');
    attr.log_level = 1;
    attr.log_buf = ptr(log.data());
    attr.log_size = static_cast<uint32_t>(log.size());
    fd = sys_bpf(BPF_PROG_LOAD, attr);
    if (fd >= 0) return UniqueFd(static_cast<int>(fd));
    log.resize(std::strlen(log.c_str()));
    if (log.size() > 4000) log = "..." + log.substr(log.size() - 4000);
    errno = err;
    throw Error(code_from_errno(err), std::string("bpf program load ") + name + ": " + std::strerror(err) +
                                          "; verifier: " + log, err);
  }
  errno = err;
  throw_errno(std::string("bpf program load ") + name);
}

void bpf_cgroup_attach(int cgroup_fd, int prog_fd, bpf_attach_type type, int replace_fd) {
  bpf_attr attr{};
  attr.target_fd = static_cast<uint32_t>(cgroup_fd);
  attr.attach_bpf_fd = static_cast<uint32_t>(prog_fd);
  attr.attach_type = type;
  attr.attach_flags = BPF_F_ALLOW_MULTI;
  if (replace_fd >= 0) {
    attr.attach_flags |= BPF_F_REPLACE;
    attr.replace_bpf_fd = static_cast<uint32_t>(replace_fd);
  }
  if (sys_bpf(BPF_PROG_ATTACH, attr) < 0) throw_errno("bpf attach to cgroup");
}

void bpf_cgroup_detach(int cgroup_fd, int prog_fd, bpf_attach_type type) {
  bpf_attr attr{};
  attr.target_fd = static_cast<uint32_t>(cgroup_fd);
  attr.attach_bpf_fd = static_cast<uint32_t>(prog_fd);
  attr.attach_type = type;
  if (sys_bpf(BPF_PROG_DETACH, attr) < 0) throw_errno("bpf detach from cgroup");
}

UniqueFd bpf_link_create(int prog_fd, int target_fd, bpf_attach_type type) {
  bpf_attr attr{};
  attr.link_create.prog_fd = static_cast<uint32_t>(prog_fd);
  attr.link_create.target_fd = static_cast<uint32_t>(target_fd);
  attr.link_create.attach_type = type;
  const long fd = sys_bpf(BPF_LINK_CREATE, attr);
  if (fd < 0) throw_errno("bpf link create");
  return UniqueFd(static_cast<int>(fd));
}

std::vector<uint32_t> bpf_cgroup_query(int cgroup_fd, bpf_attach_type type) {
  std::vector<uint32_t> ids(64);
  bpf_attr attr{};
  attr.query.target_fd = static_cast<uint32_t>(cgroup_fd);
  attr.query.attach_type = type;
  attr.query.prog_ids = ptr(ids.data());
  attr.query.prog_cnt = static_cast<uint32_t>(ids.size());
  if (sys_bpf(BPF_PROG_QUERY, attr) < 0) throw_errno("bpf query cgroup programs");
  ids.resize(std::min<size_t>(attr.query.prog_cnt, ids.size()));
  return ids;
}

BpfProgInfo bpf_prog_info_of(int prog_fd) {
  std::vector<uint32_t> map_ids(16);
  bpf_prog_info info{};
  info.nr_map_ids = static_cast<uint32_t>(map_ids.size());
  info.map_ids = ptr(map_ids.data());
  bpf_attr attr{};
  attr.info.bpf_fd = static_cast<uint32_t>(prog_fd);
  attr.info.info_len = sizeof info;
  attr.info.info = ptr(&info);
  if (sys_bpf(BPF_OBJ_GET_INFO_BY_FD, attr) < 0) throw_errno("bpf program info");
  map_ids.resize(std::min<size_t>(info.nr_map_ids, map_ids.size()));
  return {info.id, std::string(info.name, strnlen(info.name, sizeof info.name)), std::move(map_ids)};
}

BpfMapInfo bpf_map_info_of(int map_fd) {
  bpf_map_info info{};
  bpf_attr attr{};
  attr.info.bpf_fd = static_cast<uint32_t>(map_fd);
  attr.info.info_len = sizeof info;
  attr.info.info = ptr(&info);
  if (sys_bpf(BPF_OBJ_GET_INFO_BY_FD, attr) < 0) throw_errno("bpf map info");
  return {info.id, std::string(info.name, strnlen(info.name, sizeof info.name)), info.type, info.max_entries};
}

UniqueFd bpf_prog_by_id(uint32_t id) {
  bpf_attr attr{};
  attr.prog_id = id;
  const long fd = sys_bpf(BPF_PROG_GET_FD_BY_ID, attr);
  if (fd < 0 && errno != ENOENT) throw_errno("bpf program by id " + std::to_string(id));
  return UniqueFd(fd < 0 ? -1 : static_cast<int>(fd));
}

UniqueFd bpf_map_by_id(uint32_t id) {
  bpf_attr attr{};
  attr.map_id = id;
  const long fd = sys_bpf(BPF_MAP_GET_FD_BY_ID, attr);
  if (fd < 0 && errno != ENOENT) throw_errno("bpf map by id " + std::to_string(id));
  return UniqueFd(fd < 0 ? -1 : static_cast<int>(fd));
}

namespace bpf_asm {

namespace {
bpf_insn make(uint8_t code, int dst, int src, int16_t off, int32_t imm) {
  bpf_insn i{};
  i.code = code;
  i.dst_reg = static_cast<uint8_t>(dst);
  i.src_reg = static_cast<uint8_t>(src);
  i.off = off;
  i.imm = imm;
  return i;
}
}  // namespace

bpf_insn mov64_reg(int dst, int src) { return make(BPF_ALU64 | BPF_MOV | BPF_X, dst, src, 0, 0); }
bpf_insn mov64_imm(int dst, int32_t imm) { return make(BPF_ALU64 | BPF_MOV | BPF_K, dst, 0, 0, imm); }
bpf_insn alu64_imm(int op, int dst, int32_t imm) { return make(static_cast<uint8_t>(BPF_ALU64 | op | BPF_K), dst, 0, 0, imm); }
bpf_insn alu64_reg(int op, int dst, int src) { return make(static_cast<uint8_t>(BPF_ALU64 | op | BPF_X), dst, src, 0, 0); }
bpf_insn to_be16(int dst) { return make(BPF_ALU | BPF_END | BPF_TO_BE, dst, 0, 0, 16); }
bpf_insn ldx(int size, int dst, int src, int16_t off) { return make(static_cast<uint8_t>(BPF_LDX | size | BPF_MEM), dst, src, off, 0); }
bpf_insn stx(int size, int dst, int src, int16_t off) { return make(static_cast<uint8_t>(BPF_STX | size | BPF_MEM), dst, src, off, 0); }
bpf_insn st_imm(int size, int dst, int16_t off, int32_t imm) { return make(static_cast<uint8_t>(BPF_ST | size | BPF_MEM), dst, 0, off, imm); }
bpf_insn atomic_add64(int dst, int src, int16_t off) { return make(BPF_STX | BPF_DW | BPF_ATOMIC, dst, src, off, BPF_ADD); }
bpf_insn atomic_fetch_add64(int dst, int src, int16_t off) { return make(BPF_STX | BPF_DW | BPF_ATOMIC, dst, src, off, BPF_ADD | BPF_FETCH); }
bpf_insn jmp_imm(int op, int dst, int32_t imm, int16_t off) { return make(static_cast<uint8_t>(BPF_JMP | op | BPF_K), dst, 0, off, imm); }
bpf_insn jmp_reg(int op, int dst, int src, int16_t off) { return make(static_cast<uint8_t>(BPF_JMP | op | BPF_X), dst, src, off, 0); }
bpf_insn jmp32_imm(int op, int dst, int32_t imm, int16_t off) { return make(static_cast<uint8_t>(BPF_JMP32 | op | BPF_K), dst, 0, off, imm); }
bpf_insn ja(int16_t off) { return make(BPF_JMP | BPF_JA, 0, 0, off, 0); }
bpf_insn call(int helper) { return make(BPF_JMP | BPF_CALL, 0, 0, 0, helper); }
bpf_insn exit_insn() { return make(BPF_JMP | BPF_EXIT, 0, 0, 0, 0); }

void ld_map_fd(std::vector<bpf_insn>& out, int dst, int map_fd) {
  out.push_back(make(BPF_LD | BPF_DW | BPF_IMM, dst, BPF_PSEUDO_MAP_FD, 0, map_fd));
  out.push_back(make(0, 0, 0, 0, 0));
}

}  // namespace bpf_asm
}  // namespace sandlet::sys
