#include "runtime/agent/tree_transfer.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <vector>

#include "common/error.hpp"
#include "proto/frame_reader.hpp"
#include "runtime/agent/agent_client.hpp"

namespace sandlet {
namespace {

constexpr size_t kChunk = 256u << 10;       // file data per frame
constexpr size_t kQueueHigh = 1u << 20;     // queued bytes before the sender waits for the socket
constexpr uint64_t kProgressEvery = 4u << 20;

// One connection to the agent, driven by poll(2): frames out from a queue, frames in through the frame
// reader (a staging buffer lets one read take many small frames).
class Channel final {
 public:
  Channel(sys::UniqueFd fd, std::chrono::seconds idle) : fd_(std::move(fd)), idle_ms_(static_cast<int>(idle.count() * 1000)) {
    const int fl = ::fcntl(fd_.get(), F_GETFL);
    if (fl < 0 || ::fcntl(fd_.get(), F_SETFL, fl | O_NONBLOCK) != 0)
      throw Error(Code::kInternal, std::string("copy: fcntl on the agent connection: ") + std::strerror(errno), errno);
  }

  void queue(proto::AgentMsg type, std::string_view payload) {
    if (out_off_ == out_.size()) {
      out_.clear();
      out_off_ = 0;
    }
    out_ += proto::frame(type, payload);
  }
  size_t queued() const { return out_.size() - out_off_; }

  // Writes until at most `low` bytes are queued. Returns true (and stops) when a whole frame came in
  // meanwhile: the agent only speaks early to report an error.
  bool flush_to(size_t low) {
    while (queued() > low) {
      if (wait(POLLOUT | POLLIN) & POLLIN) {
        if (read_some()) return true;
        continue;
      }
      const ssize_t n = ::send(fd_.get(), out_.data() + out_off_, queued(), MSG_NOSIGNAL);
      if (n > 0) {
        out_off_ += static_cast<size_t>(n);
      } else if (n < 0 && errno != EAGAIN && errno != EINTR) {
        // The agent hung up: an error it sent first is the reason.
        if (read_final_frame_after_hangup()) return true;
        throw Error(Code::kUnavailable, std::string("copy: the sandbox agent closed the connection: ") + std::strerror(errno), errno);
      }
    }
    return false;
  }

  // Blocks until a whole frame is in (type() and payload() then hold it).
  void read_frame() {
    while (!take_staged()) {
      wait(POLLIN);
      read_some();
      if (have_frame_) break;
    }
    have_frame_ = false;
  }

  proto::AgentMsg type() const { return static_cast<proto::AgentMsg>(reader_.type()); }
  std::string_view payload() const { return reader_.payload(); }

 private:
  short wait(short events) {
    struct pollfd p = {fd_.get(), events, 0};
    for (;;) {
      const int r = ::poll(&p, 1, idle_ms_);
      if (r > 0) return p.revents & (POLLHUP | POLLERR) ? static_cast<short>(p.revents | POLLIN) : p.revents;
      if (r == 0)
        throw Error(Code::kDeadlineExceeded, "copy: the sandbox agent moved no data for " +
                                                 std::to_string(idle_ms_ / 1000) + " s", ETIMEDOUT);
      if (errno != EINTR) throw Error(Code::kInternal, std::string("copy: poll: ") + std::strerror(errno), errno);
    }
  }
  // Takes a frame from what is staged; true when one is complete.
  bool take_staged() {
    std::string_view in(stage_.data() + stage_off_, stage_len_ - stage_off_);
    const auto res = reader_.take(in);
    stage_off_ = stage_len_ - in.size();
    if (res == proto::FrameReader::Result::kBad) throw_protocol_violation(reader_.error());
    return res == proto::FrameReader::Result::kFrame;
  }
  // Reads what is there; true when a frame became complete.
  bool read_some() {
    if (stage_off_ < stage_len_ && take_staged()) return have_frame_ = true;
    const ssize_t n = ::read(fd_.get(), stage_.data(), stage_.size());
    if (n < 0) {
      if (errno == EAGAIN || errno == EINTR) return false;
      if (errno == ECONNRESET)
        throw Error(Code::kUnavailable, "copy: the sandbox agent closed the connection", errno);
      throw Error(Code::kInternal, std::string("copy: read from the sandbox agent: ") + std::strerror(errno), errno);
    }
    if (n == 0) throw Error(Code::kUnavailable, "copy: the sandbox agent closed the connection before the copy ended");
    stage_off_ = 0;
    stage_len_ = static_cast<size_t>(n);
    return have_frame_ = take_staged();
  }
  bool read_final_frame_after_hangup() {
    try {
      for (int i = 0; i < 64 && !have_frame_; ++i) read_some();
    } catch (const Error&) {
      return false;
    }
    return have_frame_;
  }

  sys::UniqueFd fd_;
  int idle_ms_;
  std::string out_;
  size_t out_off_ = 0;
  proto::FrameReader reader_{proto::kAgentToHost};
  std::vector<char> stage_ = std::vector<char>(64u << 10);
  size_t stage_off_ = 0, stage_len_ = 0;
  bool have_frame_ = false;
};

[[noreturn]] void unexpected_reply(proto::AgentMsg type, const char* during) {
  const proto::FrameType* t = proto::kAgentToHost.find(static_cast<uint8_t>(type));
  throw_protocol_violation(std::string("unexpected '") + (t ? t->name : "?") + "' reply " + during);
}

}  // namespace

TreeCopyStats send_tree(sys::UniqueFd conn, const proto::PutTreeRequest& req, TreeSource& source,
                        const TreeLimits& limits, const TreeProgress& progress) {
  Channel ch(std::move(conn), limits.idle);
  ch.queue(proto::AgentMsg::kPutTree, req.encode());
  TreeCopyStats sent;
  uint64_t reported = 0;
  std::vector<char> buf(kChunk);
  auto early_reply = [&] {
    if (ch.type() == proto::AgentMsg::kError) throw_agent_error(ch.payload());
    unexpected_reply(ch.type(), "to a put-tree before its end");
  };
  proto::TreeEntry e;
  while (source.next(&e)) {
    ch.queue(proto::AgentMsg::kTreeEntryIn, e.encode());
    ++sent.entries;
    for (uint64_t left = e.size; left > 0;) {
      const size_t n = source.read(buf.data(), left < kChunk ? static_cast<size_t>(left) : kChunk);
      if (n == 0) throw Error(Code::kAborted, "copy: \"" + e.path + "\" shrank while being copied");
      ch.queue(proto::AgentMsg::kFileData, std::string_view(buf.data(), n));
      left -= n;
      sent.bytes += n;
      if (ch.queued() > kQueueHigh && ch.flush_to(kQueueHigh / 4)) early_reply();
      if (progress && sent.bytes - reported >= kProgressEvery) {
        reported = sent.bytes;
        progress(sent);
      }
    }
    if (ch.queued() > kQueueHigh && ch.flush_to(kQueueHigh / 4)) early_reply();
    if (progress) progress(sent);
  }
  sent.skipped = source.skipped();
  ch.queue(proto::AgentMsg::kFileEof, "");
  if (!ch.flush_to(0)) ch.read_frame();
  if (ch.type() == proto::AgentMsg::kError) throw_agent_error(ch.payload());
  if (ch.type() != proto::AgentMsg::kTreeDone) unexpected_reply(ch.type(), "to a put-tree");
  proto::TreeDone done;
  if (!proto::TreeDone::decode(ch.payload(), &done)) throw_protocol_violation("malformed tree-done reply");
  if (done.entries != sent.entries || done.bytes != sent.bytes)
    throw_protocol_violation("tree-done reports " + std::to_string(done.entries) + " entries and " +
                             std::to_string(done.bytes) + " bytes, " + std::to_string(sent.entries) + " and " +
                             std::to_string(sent.bytes) + " were sent");
  return sent;
}

TreeCopyStats receive_tree(sys::UniqueFd conn, const proto::GetTreeRequest& req, TreeSink& sink,
                           const TreeLimits& limits, const TreeProgress& progress) {
  Channel ch(std::move(conn), limits.idle);
  ch.queue(proto::AgentMsg::kGetTree, req.encode());
  if (ch.flush_to(0)) {
    // (a reply before the request was all sent: handled below like any other)
  }
  TreeCopyStats got;
  uint64_t file_left = 0, reported = 0;
  std::string file_path;
  for (;;) {
    ch.read_frame();
    const std::string_view payload = ch.payload();
    switch (ch.type()) {
      case proto::AgentMsg::kError:
        throw_agent_error(payload);
      case proto::AgentMsg::kTreeEntryOut: {
        if (file_left > 0)
          throw_protocol_violation("a tree entry while " + std::to_string(file_left) + " bytes of \"" + file_path +
                                   "\" were due");
        proto::TreeEntry e;
        if (!proto::TreeEntry::decode(payload, &e)) throw_protocol_violation("malformed tree entry");
        if ((got.entries == 0) != e.path.empty())
          throw_protocol_violation(got.entries == 0 ? "the first tree entry is not the root" : "a second root entry");
        if (got.entries >= limits.max_entries)
          throw Error(Code::kOutOfRange, "copy: more than the limit of " + std::to_string(limits.max_entries) +
                                             " entries (option max_entries)");
        if (e.size > limits.max_bytes - got.bytes)
          throw Error(Code::kOutOfRange, "copy: more than the limit of " + std::to_string(limits.max_bytes) +
                                             " bytes of file data (option max_bytes)", EFBIG);
        ++got.entries;
        sink.entry(e);
        file_left = e.size;
        file_path = e.path;
        if (progress) progress(got);
        break;
      }
      case proto::AgentMsg::kFileChunk:
        if (payload.size() > file_left) throw_protocol_violation("file data beyond its entry's size");
        sink.data(payload.data(), payload.size());
        file_left -= payload.size();
        got.bytes += payload.size();
        if (progress && got.bytes - reported >= kProgressEvery) {
          reported = got.bytes;
          progress(got);
        }
        break;
      case proto::AgentMsg::kTreeDone: {
        proto::TreeDone done;
        if (!proto::TreeDone::decode(payload, &done)) throw_protocol_violation("malformed tree-done reply");
        if (file_left > 0 || got.entries == 0 || done.entries != got.entries || done.bytes != got.bytes)
          throw_protocol_violation("tree-done does not match the entries and data sent");
        sink.finish();
        got.skipped = done.skipped + sink.skipped();
        return got;
      }
      default:
        unexpected_reply(ch.type(), "to a get-tree");
    }
  }
}

}  // namespace sandlet
