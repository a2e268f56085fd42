/* Whether this program runs inside a sandlet microVM (the test programs' guard against running on a host,
 * beside their user-namespace check): the guest kernel was booted by sandlet (its command line names the
 * layers the host attached) and PID 1 of this pid namespace is the VM's agent, a fork of the guest's
 * /init. A host has neither. */
#pragma once
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

static int sandlet_microvm_guest(void) {
  char line[1024], init[64];
  int fd = open("/proc/cmdline", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  ssize_t n = read(fd, line, sizeof line - 1);
  close(fd);
  if (n <= 0) return 0;
  line[n] = 0;
  if (strncmp(line, "sandlet.layers=", 15) != 0 && !strstr(line, " sandlet.layers=")) return 0;
  fd = open("/proc/1/cmdline", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  n = read(fd, init, sizeof init - 1);
  close(fd);
  if (n <= 0) return 0;
  init[n] = 0;
  return strcmp(init, "/init") == 0;
}
