// Directory trees in and out of the sandbox (the put-tree and get-tree requests of proto/tree_protocol.hpp),
// on the tree code shared with the host (src/tree): the applier writes what the host sends under the
// destination, the walker reads a tree as entries. Both run with the file-system credentials of the
// request's user, as the single-file calls do (guest/as_user.hpp); keeping the entries' owners needs root,
// so such a put runs as root.
//
// A put that fails replies with the error at once and then drops what the host still sends until its end
// (the host stops sending when it sees the error); a get streams entries and data until its queue is full,
// and is refilled as the host drains it, as a file read is.
#include <linux/openat2.h>

#include "guest/as_user.hpp"
#include "guest/server.hpp"

namespace sandlet::guest {

void Server::tree_put_start(Conn* c, std::string_view payload) {
  proto::PutTreeRequest req;
  if (!proto::PutTreeRequest::decode(payload, &req)) {
    conn_reject(c, "malformed put-tree request");
    return;
  }
  c->state = Conn::State::kPutTree;
  c->tput = std::make_unique<TreePutJob>();
  TreePutJob& job = *c->tput;
  job.path = req.path;
  if (req.path[0] != '/' || req.path.find('\0') != std::string::npos) {
    tree_put_fail(c, make_status(SANDLET_INVALID_ARGUMENT, 0,
                                 "invalid copy field 'path': \"" + req.path + "\" is not an absolute path"));
    return;
  }
  Identity owner;
  if (Status st = users_.resolve(req.user.empty() ? cfg_.user : req.user, &owner); !st.ok()) {
    tree_put_fail(c, st);
    return;
  }
  const bool keep_owners = req.flags & proto::kTreeKeepOwners;
  if (!keep_owners) job.id = owner;  // else root (the default Identity)
  tree::ApplyOptions opts;
  opts.keep_owners = keep_owners;
  opts.uid = owner.uid;
  opts.gid = owner.gid;
  opts.mkdir_parents = req.flags & proto::kTreeMkdirParents;
  opts.resolve = RESOLVE_NO_MAGICLINKS;
  AsUser as(job.id, req.path);
  if (!as.status().ok()) {
    tree_put_fail(c, as.status());
    return;
  }
  if (tree::TreeStatus st = job.applier.begin(req.path, opts); !st.ok()) tree_put_fail(c, st);
}

void Server::tree_put_fail(Conn* c, const Status& s) {
  TreePutJob& job = *c->tput;
  job.applier.abort();
  job.failed = true;
  proto::ErrorReply r;
  r.code = s.code == SANDLET_OK ? static_cast<uint32_t>(SANDLET_INTERNAL) : s.code;
  r.err_no = s.err_no;
  r.message = s.message;
  reply(c, proto::AgentMsg::kError, r.encode());
  conn_flush(c);
}

// `action` is kTreeEntry, kFileData or kFileEof (classify() allows nothing else here).
void Server::tree_put_frame(Conn* c, Action action, std::string_view payload) {
  TreePutJob& job = *c->tput;
  if (job.failed) {
    if (action == Action::kFileEof) conn_finish(c);  // the error is queued already
    return;
  }
  tree::TreeStatus st;
  {
    AsUser as(job.id, job.path);
    if (!as.status().ok()) {
      tree_put_fail(c, as.status());
      return;
    }
    if (action == Action::kTreeEntry) {
      proto::TreeEntry e;
      if (!proto::TreeEntry::decode(payload, &e))
        st = tree::tree_error(SANDLET_INVALID_ARGUMENT, 0, "copy to \"" + job.path + "\": a malformed tree entry");
      else
        st = job.applier.entry(e);
    } else if (action == Action::kFileData) {
      st = job.applier.data(payload.data(), payload.size());
    } else {
      st = job.applier.finish();
    }
  }
  if (!st.ok()) {
    tree_put_fail(c, st);
    if (action == Action::kFileEof) conn_finish(c);
    return;
  }
  if (action != Action::kFileEof) return;
  proto::TreeDone done;
  done.entries = job.applier.entries();
  done.bytes = job.applier.bytes();
  c->tput.reset();
  reply(c, proto::AgentMsg::kTreeDone, done.encode());
  conn_finish(c);
}

void Server::tree_get_start(Conn* c, std::string_view payload) {
  proto::GetTreeRequest req;
  if (!proto::GetTreeRequest::decode(payload, &req)) {
    conn_reject(c, "malformed get-tree request");
    return;
  }
  if (req.path.find('\0') != std::string::npos) {
    reply_error(c, make_status(SANDLET_INVALID_ARGUMENT, 0, "invalid copy field 'path': contains a NUL byte"));
    return;
  }
  auto job = std::make_unique<TreeGetJob>();
  job->path = req.path;
  if (Status st = users_.resolve(req.user.empty() ? cfg_.user : req.user, &job->id); !st.ok()) {
    reply_error(c, st);
    return;
  }
  tree::WalkOptions opts;
  opts.follow_root = req.flags & proto::kTreeFollowRoot;
  opts.max_bytes = req.max_bytes;
  opts.resolve = RESOLVE_NO_MAGICLINKS;
  tree::TreeStatus st;
  {
    AsUser as(job->id, req.path);
    if (!as.status().ok()) {
      reply_error(c, as.status());
      return;
    }
    st = job->walker.open(req.path, opts);
  }
  if (!st.ok()) {
    reply_error(c, st);
    return;
  }
  c->tget = std::move(job);
  c->state = Conn::State::kGetTree;
  conn_flush(c);  // pumps the tree into the queue
}

// Appends entries and data until the queue is full or the tree ends; never flushes (conn_flush drives it).
void Server::tree_get_pump(Conn* c) {
  TreeGetJob& job = *c->tget;
  AsUser as(job.id, job.path);
  if (!as.status().ok()) {
    proto::ErrorReply er{as.status().code, as.status().err_no, as.status().message};
    tree_get_end(c, proto::AgentMsg::kError, er.encode());
    return;
  }
  while (c->state == Conn::State::kGetTree && c->out.size() < kOutHigh) {
    tree::TreeStatus st;
    if (job.in_file) {
      char* p = c->out.reserve_tail(proto::kHeaderSize + kFileChunk);
      const long n = job.walker.read(p + proto::kHeaderSize, kFileChunk, &st);
      if (n > 0) {
        proto::put_header(p, proto::AgentMsg::kFileChunk, static_cast<uint32_t>(n));
        c->out.commit(proto::kHeaderSize + static_cast<size_t>(n));
        continue;
      }
      if (n == 0) {
        job.in_file = false;
        continue;
      }
    } else {
      proto::TreeEntry e;
      if (job.walker.next(&e, &st)) {
        reply(c, proto::AgentMsg::kTreeEntryOut, e.encode());
        job.in_file = e.kind == proto::TreeKind::kFile && e.size > 0;
        continue;
      }
      if (st.ok()) {
        proto::TreeDone done;
        done.entries = job.walker.entries();
        done.bytes = job.walker.bytes();
        done.skipped = job.walker.skipped();
        tree_get_end(c, proto::AgentMsg::kTreeDone, done.encode());
        return;
      }
    }
    proto::ErrorReply er{st.code, st.err_no, st.message};
    tree_get_end(c, proto::AgentMsg::kError, er.encode());
    return;
  }
}

void Server::tree_get_end(Conn* c, proto::AgentMsg type, std::string_view payload) {
  reply(c, type, payload);
  c->state = Conn::State::kDone;
  c->close_after_flush = true;
  // (the job's descriptors close with the connection)
}

}  // namespace sandlet::guest
