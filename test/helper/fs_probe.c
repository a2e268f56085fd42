/* fs_probe OP PATH [ARG]: one file operation inside a sandbox (static: the test root filesystem has no
   libc), for the file-rule tests' operations busybox has no applet for; also "shmget", "semget" and
   "msgget" (PATH ignored), which leave a new SysV object in the sandbox's IPC namespace. Prints "ok" or the errno's number
   and exits 0 on success, 1 on failure. Refuses to run outside a sandbox (no /tmp/.sandlet-fs-probe-inside). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/msg.h>
#include <sys/sem.h>
#include <sys/shm.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

static int done(int r) {
  if (r == 0) {
    puts("ok");
    return 0;
  }
  printf("errno %d %s\n", errno, strerror(errno));
  return 1;
}

int main(int argc, char **argv) {
  if (access("/tmp/.sandlet-fs-probe-inside", F_OK) != 0) {
    fputs("fs_probe: not inside a test sandbox; refusing\n", stderr);
    return 2;
  }
  if (argc < 3) return 2;
  const char *op = argv[1], *path = argv[2], *arg = argc > 3 ? argv[3] : "";
  if (!strcmp(op, "setxattr")) return done(setxattr(path, "user.probe", "x", 1, 0));
  if (!strcmp(op, "setxattr-trusted")) return done(setxattr(path, "trusted.probe", "x", 1, 0));
  if (!strcmp(op, "removexattr")) return done(removexattr(path, arg));
  if (!strcmp(op, "link")) return done(link(path, arg));
  if (!strcmp(op, "rename")) return done(rename(path, arg));
  if (!strcmp(op, "truncate")) return done(truncate(path, 0));
  if (!strcmp(op, "otrunc")) {
    int fd = open(path, O_WRONLY | O_TRUNC);
    if (fd >= 0) close(fd);
    return done(fd >= 0 ? 0 : -1);
  }
  if (!strcmp(op, "owrite")) {
    int fd = open(path, O_RDWR);
    if (fd >= 0) close(fd);
    return done(fd >= 0 ? 0 : -1);
  }
  if (!strcmp(op, "chmod")) return done(chmod(path, 0777));
  if (!strcmp(op, "chown")) return done(chown(path, 1, 1));
  if (!strcmp(op, "unlink")) return done(unlink(path));
  if (!strcmp(op, "rmdir")) return done(rmdir(path));
  if (!strcmp(op, "symlink-over")) return done(unlink(path) == 0 ? symlink(arg, path) : -1);
  if (!strcmp(op, "utimes")) return done(utimensat(AT_FDCWD, path, NULL, 0));
  if (!strcmp(op, "shmget")) return done(shmget(IPC_PRIVATE, 4096, IPC_CREAT | 0600) >= 0 ? 0 : -1);
  if (!strcmp(op, "semget")) return done(semget(IPC_PRIVATE, 1, IPC_CREAT | 0600) >= 0 ? 0 : -1);
  if (!strcmp(op, "msgget")) return done(msgget(IPC_PRIVATE, IPC_CREAT | 0600) >= 0 ? 0 : -1);
  return 2;
}
