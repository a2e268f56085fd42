#include "guest/vm/stream_mux.hpp"

#include <errno.h>
#include <sys/socket.h>
#include <unistd.h>

namespace sandlet::guest {

namespace vc = proto::vmchan;

namespace {
// Stop reading local sockets while this much waits for the channel (the channel is the slow part).
constexpr size_t kChannelBacklog = 1u << 20;
}  // namespace

StreamMux::StreamMux(int channel_fd, bool host_side, OpenLocal open_local, void* ctx)
    : chan_(channel_fd), host_(host_side), open_local_(open_local), ctx_(ctx) {}

StreamMux::~StreamMux() {
  for (Stream* s : streams_) {
    if (s->fd >= 0) close(s->fd);
    delete s;
  }
}

StreamMux::Stream* StreamMux::find(uint32_t id) {
  for (Stream* s : streams_)
    if (s->id == id && s->fd >= 0) return s;
  return nullptr;
}

void StreamMux::send_frame(uint32_t stream, uint8_t kind, const void* payload, uint32_t len) {
  char* p = chan_out_.reserve_tail(vc::kHeaderSize + len);
  vc::put_header(p, {stream, kind, len});
  if (len) __builtin_memcpy(p + vc::kHeaderSize, payload, len);
  chan_out_.commit(vc::kHeaderSize + len);
}

void StreamMux::hello() {
  char v[4];
  vc::put_u32(v, vc::kVersion);
  send_frame(0, vc::kHello, v, 4);
}

void StreamMux::open(int local, uint8_t port) {
  Stream* s = new Stream;
  s->id = next_id_++;
  if (next_id_ == 0) next_id_ = 1;
  s->fd = local;
  streams_.push_back(s);
  send_frame(s->id, vc::kOpen, &port, 1);
}

// Marks the stream dead (removed after the round); closing the socket is the cancel for whoever is on it.
void StreamMux::drop(Stream* s, bool tell_peer) {
  if (s->fd < 0) return;
  if (tell_peer && !s->remote_closed) send_frame(s->id, vc::kClose, nullptr, 0);
  close(s->fd);
  s->fd = -1;
}

void StreamMux::reap_dead() {
  size_t out = 0;
  for (Stream* s : streams_) {
    if (s->fd < 0) delete s;
    else streams_[out++] = s;
  }
  streams_.resize(out);
}

void StreamMux::handle(const vc::Header& h, const char* payload) {
  if (h.kind == vc::kHello) {
    if (host_) return;  // only the host says hello
    for (Stream* s : streams_) drop(s, false);
    return;
  }
  if (h.kind == vc::kOpen) {
    // Only the host opens streams; an id in use is a broken peer: refuse the new one.
    if (host_ || find(h.stream)) {
      if (!host_) send_frame(h.stream, vc::kClose, nullptr, 0);
      return;
    }
    int fd = open_local_ ? open_local_(ctx_, static_cast<uint8_t>(payload[0])) : -1;
    if (fd < 0) {
      send_frame(h.stream, vc::kClose, nullptr, 0);
      return;
    }
    Stream* s = new Stream;
    s->id = h.stream;
    s->fd = fd;
    streams_.push_back(s);
    return;
  }
  Stream* s = find(h.stream);
  if (!s) return;  // a stream already gone here: its late frames mean nothing
  switch (h.kind) {
    case vc::kData:
      // Beyond the credit we granted: the peer breaks the protocol; end the stream.
      if (s->remote_eof || s->remote_closed || s->received_unacked + h.len > vc::kWindow) {
        drop(s, true);
        return;
      }
      s->received_unacked += h.len;
      s->to_local.append(payload, h.len);
      write_local(s);
      break;
    case vc::kEof:
      s->remote_eof = true;
      write_local(s);
      break;
    case vc::kClose:
      s->remote_closed = true;
      s->remote_eof = true;
      write_local(s);
      break;
    case vc::kCredit: {
      uint32_t more = vc::get_u32(payload);
      if (more > vc::kWindow - s->send_credit) {  // more than it could owe us: broken peer
        drop(s, true);
        return;
      }
      s->send_credit += more;
      break;
    }
    default: break;
  }
}

void StreamMux::read_channel() {
  for (;;) {
    char* p = chan_in_.reserve_tail(vc::kHeaderSize + vc::kMaxPayload);
    ssize_t n = read(chan_, p, vc::kHeaderSize + vc::kMaxPayload);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno != EAGAIN) channel_failed_ = true;
      break;
    }
    if (n == 0) {
      if (host_) channel_failed_ = true;  // QEMU went away
      else channel_hup_ = true;           // no host on the port (yet): the guest waits
      break;
    }
    chan_in_.commit(static_cast<size_t>(n));
    while (chan_in_.size() >= vc::kHeaderSize) {
      vc::Header h = vc::parse_header(chan_in_.data());
      if (!vc::header_ok(h)) {
        // The byte stream cannot be resynchronised: on the host this ends the VM's channel (the
        // sandbox is then unreachable, which is the guest's own doing); the guest trusts its host.
        channel_failed_ = true;
        return;
      }
      if (chan_in_.size() < vc::kHeaderSize + h.len) break;
      handle(h, chan_in_.data() + vc::kHeaderSize);
      chan_in_.consume(vc::kHeaderSize + h.len);
    }
    if (static_cast<size_t>(n) < vc::kHeaderSize + vc::kMaxPayload) break;
  }
}

void StreamMux::read_local(Stream* s) {
  while (s->fd >= 0 && !s->local_eof && s->send_credit > 0 && chan_out_.size() < kChannelBacklog) {
    uint32_t want = s->send_credit < vc::kMaxPayload ? s->send_credit : vc::kMaxPayload;
    char* p = chan_out_.reserve_tail(vc::kHeaderSize + want);
    ssize_t n = read(s->fd, p + vc::kHeaderSize, want);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno != EAGAIN) drop(s, true);
      return;
    }
    if (n == 0) {
      s->local_eof = true;
      send_frame(s->id, vc::kEof, nullptr, 0);
      return;
    }
    vc::put_header(p, {s->id, vc::kData, static_cast<uint32_t>(n)});
    chan_out_.commit(vc::kHeaderSize + static_cast<size_t>(n));
    s->send_credit -= static_cast<uint32_t>(n);
  }
}

void StreamMux::write_local(Stream* s) {
  while (s->fd >= 0 && !s->to_local.empty()) {
    ssize_t n = write(s->fd, s->to_local.data(), s->to_local.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno != EAGAIN) drop(s, true);
      return;
    }
    s->to_local.consume(static_cast<size_t>(n));
    s->grant += static_cast<uint32_t>(n);
    s->received_unacked -= static_cast<uint32_t>(n);
  }
  if (s->fd < 0) return;
  s->to_local.trim(vc::kMaxPayload);
  if (s->grant && (s->grant >= vc::kWindow / 4 || s->to_local.empty()) && !s->remote_closed) {
    char v[4];
    vc::put_u32(v, s->grant);
    send_frame(s->id, vc::kCredit, v, 4);
    s->grant = 0;
  }
  if (s->to_local.empty() && s->remote_eof && !s->shut_wr) {
    shutdown(s->fd, SHUT_WR);
    s->shut_wr = true;
  }
  // Done both ways: the peer closed, or both sides said EOF and everything was delivered.
  if (s->to_local.empty() && (s->remote_closed || (s->remote_eof && s->local_eof))) drop(s, !s->remote_closed);
}

void StreamMux::write_channel() {
  while (!chan_out_.empty()) {
    ssize_t n = write(chan_, chan_out_.data(), chan_out_.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno != EAGAIN) channel_failed_ = true;
      return;
    }
    chan_out_.consume(static_cast<size_t>(n));
  }
  chan_out_.trim(4 * vc::kMaxPayload);
}

bool StreamMux::poll_once(std::vector<pollfd>& fds, size_t extra, int timeout_ms) {
  if (channel_failed_) return false;
  fds.resize(extra);
  // A guest whose port has no host sees the port hang up in a loop: it then polls everything else only
  // and looks at the port again after a short sleep.
  const bool watch_chan = !channel_hup_;
  channel_hup_ = false;
  fds.push_back({chan_, static_cast<short>(POLLIN | (chan_out_.empty() ? 0 : POLLOUT)), 0});
  if (!watch_chan) fds.back().fd = -1;
  const size_t first = fds.size();
  for (Stream* s : streams_) {
    short ev = 0;
    if (!s->local_eof && s->send_credit > 0 && chan_out_.size() < kChannelBacklog) ev |= POLLIN;
    if (!s->to_local.empty() && !s->hup) ev |= POLLOUT;
    // A hung-up socket reports POLLHUP whatever is asked: leave it out while nothing is to be done on it.
    fds.push_back({(s->hup && !ev) ? -1 : s->fd, ev, 0});
  }
  if (!watch_chan && (timeout_ms < 0 || timeout_ms > 50)) timeout_ms = 50;
  int n = poll(fds.data(), fds.size(), timeout_ms);
  if (n < 0) return errno == EINTR;
  const pollfd& c = fds[extra];
  if (c.revents & POLLIN) read_channel();
  else if (c.revents & (POLLHUP | POLLERR)) {
    if (host_) channel_failed_ = true;
    else channel_hup_ = true;
  }
  // Streams opened while reading the channel are not in this round's set.
  const size_t polled = fds.size() - first;
  for (size_t i = 0; i < polled && i < streams_.size(); ++i) {
    Stream* s = streams_[i];
    const short re = fds[first + i].revents;
    if (s->fd < 0 || fds[first + i].fd != s->fd) continue;
    if (re & POLLERR) {
      drop(s, true);
      continue;
    }
    if (re & POLLHUP) s->hup = true;
    if ((re & POLLOUT) && !s->hup) write_local(s);
    if (re & POLLIN) read_local(s);
  }
  // Hung up and read to its end: the local side is gone (a cancel when it went early; what the peer
  // still sends could not be delivered anyway).
  // (On the host a hang-up is the client's cancel at once, read or not: a guest that withholds credit
  // cannot keep a closed client's stream, or its descriptor, alive.)
  for (Stream* s : streams_)
    if (s->fd >= 0 && s->hup && (s->local_eof || host_)) drop(s, true);
  // Streams that got credit may have data to send at once.
  for (Stream* s : streams_)
    if (s->fd >= 0 && !s->local_eof && s->send_credit > 0) read_local(s);
  if (!chan_out_.empty() && !(c.revents & POLLHUP)) write_channel();
  reap_dead();
  return !channel_failed_;
}

}  // namespace sandlet::guest
