// The kernel's limits on what execve(2) takes, computed as fs/exec.c does (Linux 5.x to 6.x alike): the
// strings of argv and envp with their NULs, the file name, and one pointer per string, must fit in a
// quarter of the stack limit, capped at 3/4 of _STK_LIM (6 MiB) and never below ARG_MAX (32 pages); one
// string (with its NUL) may not exceed MAX_ARG_STRLEN (32 pages). The host checks a request against the
// limit of its own stack rlimit (what a container sandbox inherits) before sending it; the agent, which
// knows its own, names the same sizes when the kernel answers E2BIG. Header-only: the guest includes it.
#pragma once
#include <cstdint>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace sandlet::proto {

constexpr uint64_t kMaxArgStrlen = 32 * 4096;  // MAX_ARG_STRLEN, NUL included
constexpr uint64_t kArgMaxFloor = 32 * 4096;   // ARG_MAX: allowed whatever the stack limit
constexpr uint64_t kArgMaxCeiling = (8u << 20) / 4 * 3;  // _STK_LIM / 4 * 3

// The space execve gives arguments and environment under a soft RLIMIT_STACK of `stack_limit` bytes.
inline uint64_t arg_space_for_stack(uint64_t stack_limit) {
  uint64_t limit = stack_limit / 4 < kArgMaxCeiling ? stack_limit / 4 : kArgMaxCeiling;
  return limit > kArgMaxFloor ? limit : kArgMaxFloor;
}

struct ArgProblem {
  enum Kind : uint8_t { kNone, kNulByte, kStringTooLong, kTotalTooLarge } kind = kNone;
  bool in_env = false;   // which vector the string is in (kNulByte, kStringTooLong)
  size_t index = 0;      // its position there
  uint64_t size = 0;     // the string's length with its NUL, or the total as execve counts it
  uint64_t limit = 0;
  uint64_t stack_limit = 0;

  bool ok() const { return kind == kNone; }
};

// What execve counts for these vectors and a file name of `file_name_len` bytes; by default argv[0] (the
// path a PATH search finds is at least as long).
inline uint64_t exec_arg_bytes(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                               size_t file_name_len = SIZE_MAX) {
  uint64_t total = file_name_len != SIZE_MAX ? file_name_len + 1 : argv.empty() ? 0 : argv[0].size() + 1;
  for (const auto& s : argv) total += s.size() + 1 + sizeof(void*);
  for (const auto& s : env) total += s.size() + 1 + sizeof(void*);
  return total;
}

// `stack_limit` gives the soft RLIMIT_STACK; asked only when the total is over ARG_MAX's floor.
inline ArgProblem check_exec_args(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                                  uint64_t (*stack_limit)()) {
  ArgProblem p;
  const std::vector<std::string>* lists[2] = {&argv, &env};
  for (int l = 0; l < 2; ++l) {
    for (size_t i = 0; i < lists[l]->size(); ++i) {
      const std::string& s = (*lists[l])[i];
      if (s.size() + 1 > kMaxArgStrlen) {
        p.kind = ArgProblem::kStringTooLong;
        p.size = s.size() + 1;
        p.limit = kMaxArgStrlen;
      } else if (std::memchr(s.data(), 0, s.size()) != nullptr) {
        p.kind = ArgProblem::kNulByte;
      } else {
        continue;
      }
      p.in_env = l == 1;
      p.index = i;
      return p;
    }
  }
  const uint64_t total = exec_arg_bytes(argv, env);
  if (total <= kArgMaxFloor) return p;  // the common case: no need to know the stack limit
  p.stack_limit = stack_limit();
  const uint64_t limit = arg_space_for_stack(p.stack_limit);
  if (total > limit) {
    p.kind = ArgProblem::kTotalTooLarge;
    p.size = total;
    p.limit = limit;
  }
  return p;
}

// The INVALID_ARGUMENT message; `what` is "exec" or "run" (whose fields are named).
[[gnu::cold]] inline std::string describe(const ArgProblem& p, const char* what) {
  const char* field = p.in_env ? "env" : "argv";
  const char* item = p.in_env ? "environment entry" : "argument";
  const unsigned long long index = p.index, size = p.size, limit = p.limit;
  char stack[32];
  if (p.stack_limit == ~0ull) std::snprintf(stack, sizeof stack, "unlimited");
  else std::snprintf(stack, sizeof stack, "%llu bytes", static_cast<unsigned long long>(p.stack_limit));
  char buf[320];
  switch (p.kind) {
    case ArgProblem::kNone: return "";
    case ArgProblem::kNulByte:
      std::snprintf(buf, sizeof buf, "invalid %s field '%s': %s %llu contains a NUL byte", what, field, item, index);
      break;
    case ArgProblem::kStringTooLong:
      std::snprintf(buf, sizeof buf,
                    "invalid %s field '%s': %s %llu takes %llu bytes with its NUL, over the kernel's limit of %llu "
                    "per string (MAX_ARG_STRLEN)",
                    what, field, item, index, size, limit);
      break;
    case ArgProblem::kTotalTooLarge:
      std::snprintf(buf, sizeof buf,
                    "invalid %s fields 'argv' and 'env': they take %llu bytes as execve counts them (strings, NULs "
                    "and pointers), over the kernel's limit of %llu bytes for a stack limit of %s (ARG_MAX)",
                    what, size, limit, stack);
      break;
  }
  return buf;
}

}  // namespace sandlet::proto
