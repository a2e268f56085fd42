/* Common part of the attack programs (test/integration/security/attacks). Each program is a family of
 * attacks, run as `attack-FAMILY NAME [ARGS...]` as root inside a sandbox. An attack prints one verdict
 * line and exits with its code:
 *   "VERDICT NAME BLOCKED: why"  exit 0 — every attempt failed the way the boundary makes it fail
 *   "VERDICT NAME ESCAPED: what" exit 1 — an attempt got through: a finding
 *   "VERDICT NAME ERROR: what"   exit 2 — the attack could not be carried out (a bug in the attack)
 *   "VERDICT - REFUSED: why"     exit 3 — not inside a sandlet sandbox: nothing was tried
 * Statically linked (the test root filesystem has no libc). The programs run only inside a sandbox: the
 * guard refuses a host, i.e. the initial user namespace (identity uid map) or a PID 1 that is not sandlet's
 * init, unless the program is in a sandlet microVM's guest (microvm_guest.h). */
#pragma once
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "microvm_guest.h"

enum { kBlocked = 0, kEscaped = 1, kError = 2, kRefused = 3 };

static const char *attack_name = "-";

static int verdict(int code, const char *fmt, ...) {
  static const char *const words[] = {"BLOCKED", "ESCAPED", "ERROR", "REFUSED"};
  char buf[900];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  printf("VERDICT %s %s: %s\n", attack_name, words[code], buf);
  fflush(stdout);
  return code;
}

/* The first `max - 1` bytes of a file, or -1. */
static ssize_t read_small(const char *path, char *buf, size_t max) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  ssize_t n = read(fd, buf, max - 1);
  close(fd);
  if (n >= 0) buf[n] = 0;
  return n;
}

/* Inside a sandlet sandbox: not the initial user namespace, and PID 1 is sandlet's init; or a microVM. */
static int inside_sandbox(char *why, size_t whylen) {
  char map[256], cmd[256];
  if (sandlet_microvm_guest()) return 1;
  if (read_small("/proc/self/uid_map", map, sizeof map) <= 0) {
    snprintf(why, whylen, "cannot read /proc/self/uid_map");
    return 0;
  }
  unsigned inside = 1, outside = 1, count = 0;
  if (sscanf(map, "%u %u %u", &inside, &outside, &count) != 3 || (inside == 0 && outside == 0)) {
    snprintf(why, whylen, "the initial user namespace (uid_map \"%u %u %u\")", inside, outside, count);
    return 0;
  }
  ssize_t n = read_small("/proc/1/cmdline", cmd, sizeof cmd);
  if (n <= 0 || strncmp(cmd, "sandlet-init", 12) != 0) {
    snprintf(why, whylen, "PID 1 is not sandlet's init");
    return 0;
  }
  return 1;
}

struct attack {
  const char *name;
  int (*run)(int argc, char **argv); /* argv[0] is the attack's name */
};

/* The family's main: the guard, then the named attack. */
static int attack_main(const struct attack *table, size_t n, int argc, char **argv) {
  char why[256];
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (!inside_sandbox(why, sizeof why)) return verdict(kRefused, "not inside a sandlet sandbox: %s", why);
  if (argc < 2) {
    for (size_t i = 0; i < n; ++i) printf("%s\n", table[i].name);
    return kError;
  }
  for (size_t i = 0; i < n; ++i)
    if (strcmp(table[i].name, argv[1]) == 0) {
      attack_name = table[i].name;
      return table[i].run(argc - 1, argv + 1);
    }
  return verdict(kError, "no attack named %s", argv[1]);
}

#define ATTACK_MAIN(table) \
  int main(int argc, char **argv) { return attack_main(table, sizeof table / sizeof table[0], argc, argv); }

/* errno as text, for verdicts. */
#define E() strerror(errno)
