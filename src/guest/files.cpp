// File transfer: atomic writes (temporary file in the same directory, then rename) with owner and mode,
// and streamed reads of regular files with a size cap.
//
// The agent is root inside; every path operation of a file call runs with the file-system credentials of
// the sandbox user it is for (fsuid, fsgid and groups of the spec's user), so the kernel checks it as it
// would that user's own open(2): a permission error is the kernel's EACCES, not a silent root write.
//
// Paths come from the host's callers (often model-generated), so they are resolved without procfs magic
// links: the agent's own /proc/1/fd/<n> would otherwise lead into objects outside the sandbox root
// (e.g. the host cgroup tree through the cgroup directory fd).
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "guest/as_user.hpp"
#include "guest/server.hpp"
#include "tree/tree_sys.hpp"

namespace sandlet::guest {
namespace {

// Opens without following /proc magic links (an agent's path must not lead out of the sandbox through them).
int open_no_magiclinks(int dirfd, const char* path, uint64_t flags) {
  return tree::sys::open_resolved(dirfd, path, flags, RESOLVE_NO_MAGICLINKS);
}

Status path_status(int e, const char* op, const std::string& path) {
  return errno_statusf(e, "%s \"%s\"", op, path.c_str());
}

// Opens the directory part of `path` (up to `slash`), creating missing components owned by uid:gid
// when `make_parents` is set.
Status open_parent(const std::string& path, size_t slash, bool make_parents, uid_t uid, gid_t gid, int* out) {
  std::string dir = slash == 0 ? std::string("/") : path.substr(0, slash);
  constexpr uint64_t kDirFlags = O_PATH | O_DIRECTORY | O_CLOEXEC;
  if (!make_parents) {
    *out = open_no_magiclinks(AT_FDCWD, dir.c_str(), kDirFlags);
    return *out < 0 ? path_status(errno, "write", path) : Status::Ok();
  }
  int cur = open("/", kDirFlags);
  if (cur < 0) return path_status(errno, "write", path);
  size_t pos = 1;
  while (pos < dir.size()) {
    size_t end = dir.find('/', pos);
    if (end == std::string::npos) end = dir.size();
    std::string comp = dir.substr(pos, end - pos);
    pos = end + 1;
    if (comp.empty()) continue;
    int next = open_no_magiclinks(cur, comp.c_str(), kDirFlags);
    if (next < 0 && errno == ENOENT) {
      if (mkdirat(cur, comp.c_str(), 0755) == 0) {
        if (fchownat(cur, comp.c_str(), uid, gid, AT_SYMLINK_NOFOLLOW) != 0) {
          Status s = path_status(errno, "chown", dir.substr(0, end));
          close(cur);
          return s;
        }
      } else if (errno != EEXIST) {
        Status s = path_status(errno, "mkdir", dir.substr(0, end));
        close(cur);
        return s;
      }
      next = open_no_magiclinks(cur, comp.c_str(), kDirFlags);
    }
    int e = errno;
    close(cur);
    if (next < 0) return path_status(e, "write", path);
    cur = next;
  }
  *out = cur;
  return Status::Ok();
}

const char* file_kind(mode_t mode) {
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a file";
}

}  // namespace

void Server::write_start(Conn* c, std::string_view payload) {
  proto::WriteFileRequest req;
  if (!proto::WriteFileRequest::decode(payload, &req)) {
    conn_reject(c, "malformed write-file request");
    return;
  }
  c->state = Conn::State::kWrite;
  WriteJob& w = c->wjob;
  w.path = req.path;
  // Errors are kept and reported at kFileEof: the host streams the whole file, then reads one reply.
  if (req.path[0] != '/') {
    w.error = make_status(SANDLET_INVALID_ARGUMENT, 0, "invalid file field 'path': \"" + req.path + "\" is not absolute");
    return;
  }
  size_t slash = req.path.rfind('/');
  w.base = req.path.substr(slash + 1);
  if (w.base.empty() || w.base == "." || w.base == ".." || req.path.find('\0') != std::string::npos) {
    w.error = make_status(SANDLET_INVALID_ARGUMENT, 0, "invalid file field 'path': \"" + req.path + "\" names no file");
    return;
  }
  Identity& id = w.id;
  if (Status st = users_.resolve(req.user.empty() ? cfg_.user : req.user, &id); !st.ok()) {
    w.error = st;
    return;
  }
  AsUser as(id, req.path);
  if (!as.status().ok()) {
    w.error = as.status();
    return;
  }
  if (Status st = open_parent(req.path, slash, req.flags & proto::kWriteMkdirParents, id.uid, id.gid, &w.dirfd);
      !st.ok()) {
    w.error = st;
    return;
  }
  // The rename below would replace a file the user may not write (the directory is all it needs): refuse
  // it as open(2) with O_WRONLY would. AT_EACCESS checks the file-system ids in force (the user's); root
  // may write any file, so it is not asked. (faccessat2: plain faccessat has no flags argument.)
  if (id.uid != 0 &&
      syscall(SYS_faccessat2, w.dirfd, w.base.c_str(), W_OK, AT_EACCESS | AT_SYMLINK_NOFOLLOW) != 0 &&
      errno != ENOENT && errno != ENOSYS) {  // (before 5.8: no check, the rename decides)
    w.error = path_status(errno, "write", req.path);
    write_abort(c);
    return;
  }
  w.tmp = ".sandlet-" + std::to_string(++file_counter_) + ".tmp";
  w.fd = openat(w.dirfd, w.tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY, 0600);
  if (w.fd < 0) {
    w.tmp.clear();
    w.error = path_status(errno, "write", req.path);
    write_abort(c);
    return;
  }
  // chown first: it clears set-id bits that the mode may ask for.
  if (fchown(w.fd, id.uid, id.gid) != 0 || fchmod(w.fd, req.mode & 07777) != 0) {
    w.error = path_status(errno, "write", req.path);
    write_abort(c);
  }
}

// `action` is kFileData or kFileEof (classify() allows nothing else here).
void Server::write_frame(Conn* c, Action action, std::string_view payload) {
  WriteJob& w = c->wjob;
  if (action == Action::kFileData) {
    if (w.error.ok() && w.fd >= 0 && !tree::sys::write_all(w.fd, payload.data(), payload.size())) {
      w.error = path_status(errno, "write", w.path);
      write_abort(c);
    }
    return;
  }
  if (w.error.ok() && close(w.fd) != 0) w.error = path_status(errno, "write", w.path);
  w.fd = -1;
  {
    AsUser as(w.id, w.path);  // (it succeeded at the start, for the same identity)
    if (w.error.ok() && renameat(w.dirfd, w.tmp.c_str(), w.dirfd, w.base.c_str()) != 0)
      w.error = path_status(errno, "write", w.path);  // (before any other call can change errno)
    if (w.error.ok()) w.tmp.clear();  // renamed: nothing to clean up
    write_abort(c);                   // closes the directory (and removes a leftover temporary file)
  }
  if (!w.error.ok()) {
    reply_error(c, w.error);
    return;
  }
  reply(c, proto::AgentMsg::kOk);
  conn_finish(c);
}

void Server::write_abort(Conn* c) {
  WriteJob& w = c->wjob;
  if (w.fd >= 0) close(w.fd);
  w.fd = -1;
  if (!w.tmp.empty() && w.dirfd >= 0) unlinkat(w.dirfd, w.tmp.c_str(), 0);
  w.tmp.clear();
  if (w.dirfd >= 0) close(w.dirfd);
  w.dirfd = -1;
}

void Server::read_start(Conn* c, std::string_view payload) {
  proto::ReadFileRequest req;
  if (!proto::ReadFileRequest::decode(payload, &req)) {
    conn_reject(c, "malformed read-file request");
    return;
  }
  if (req.path.find('\0') != std::string::npos) {
    reply_error(c, make_status(SANDLET_INVALID_ARGUMENT, 0, "invalid file field 'path': contains a NUL byte"));
    return;
  }
  Identity id;
  if (Status st = users_.resolve(cfg_.user, &id); !st.ok()) {
    reply_error(c, st);
    return;
  }
  int fd = -1, open_errno = 0;
  {
    AsUser as(id, req.path);
    if (!as.status().ok()) {
      reply_error(c, as.status());
      return;
    }
    // O_NONBLOCK: opening a FIFO must not hang the agent; it is refused below as not a regular file.
    fd = open_no_magiclinks(AT_FDCWD, req.path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    open_errno = errno;
  }
  if (fd < 0) {
    reply_error(c, path_status(open_errno, "read", req.path));
    return;
  }
  struct stat st;
  if (fstat(fd, &st) != 0) {
    Status s = path_status(errno, "read", req.path);
    close(fd);
    reply_error(c, s);
    return;
  }
  if (!S_ISREG(st.st_mode)) {
    close(fd);
    // A directory is what the kernel's read(2) would say (EISDIR); other kinds (FIFO, device, socket)
    // are refused by this agent, not by the kernel, so they carry no errno.
    reply_error(c, S_ISDIR(st.st_mode) ? path_status(EISDIR, "read", req.path)
                                       : make_status(SANDLET_FAILED_PRECONDITION, 0,
                                                     "read \"" + req.path + "\": not a regular file (" +
                                                         file_kind(st.st_mode) + ")"));
    return;
  }
  if (static_cast<uint64_t>(st.st_size) > req.max_bytes) {
    close(fd);
    reply_error(c, make_status(SANDLET_OUT_OF_RANGE, EFBIG,
                               "read \"" + req.path + "\": " + std::to_string(st.st_size) + " bytes exceed the limit of " +
                                   std::to_string(req.max_bytes)));
    return;
  }
  c->state = Conn::State::kRead;
  c->rjob.fd = fd;
  c->rjob.max = req.max_bytes;
  c->rjob.mode = st.st_mode & 07777;
  c->rjob.sent = 0;
  c->rjob.path = req.path;
  conn_flush(c);  // pumps the file into the queue
}

// Appends chunks until the queue is full or the file ends; never flushes (conn_flush drives it).
// Files whose size lies (/proc) are read to EOF, still capped at max_bytes.
void Server::read_pump(Conn* c) {
  ReadJob& r = c->rjob;
  while (c->state == Conn::State::kRead && c->out.size() < kOutHigh) {
    char* p = c->out.reserve_tail(proto::kHeaderSize + kFileChunk);
    ssize_t n = read(r.fd, p + proto::kHeaderSize, kFileChunk);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      Status s = path_status(errno, "read", r.path);
      read_end(c);
      proto::ErrorReply er{s.code, s.err_no, s.message};
      reply(c, proto::AgentMsg::kError, er.encode());
      return;
    }
    if (n == 0) {
      proto::FileDone done;
      done.size = r.sent;
      done.mode = r.mode;
      read_end(c);
      reply(c, proto::AgentMsg::kFileDone, done.encode());
      return;
    }
    if (r.sent + static_cast<uint64_t>(n) > r.max) {
      read_end(c);
      proto::ErrorReply er{SANDLET_OUT_OF_RANGE, EFBIG,
                           "read \"" + r.path + "\": file grew beyond the limit of " + std::to_string(r.max) +
                               " bytes"};
      reply(c, proto::AgentMsg::kError, er.encode());
      return;
    }
    proto::put_header(p, proto::AgentMsg::kFileChunk, static_cast<uint32_t>(n));
    c->out.commit(proto::kHeaderSize + static_cast<size_t>(n));
    r.sent += static_cast<uint64_t>(n);
  }
}

void Server::read_end(Conn* c) {
  if (c->rjob.fd >= 0) close(c->rjob.fd);
  c->rjob.fd = -1;
  if (c->state == Conn::State::kRead) {
    c->state = Conn::State::kDone;
    c->close_after_flush = true;
  }
}

}  // namespace sandlet::guest
