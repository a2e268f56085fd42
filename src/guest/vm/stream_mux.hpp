// Both ends of the microVM channel (proto/vm_channel.hpp): a table of streams, each tied to a local
// socket, pumped to and from the one channel descriptor with credit flow control. The host-side
// multiplexer opens streams for connections it accepts; the guest's PID 1 gets them and hands each one's
// socket to the agent. Everything read from the channel by the host is hostile (the guest wrote it): a
// frame that breaks the rules ends that stream, never the multiplexer.
#pragma once
#include <poll.h>

#include <cstdint>
#include <vector>

#include "guest/buffer.hpp"
#include "proto/vm_channel.hpp"

namespace sandlet::guest {

class StreamMux final {
 public:
  // The guest's side of a new stream: a connected local socket for `port`, or -1 to refuse it.
  using OpenLocal = int (*)(void* ctx, uint8_t port);

  StreamMux(int channel_fd, bool host_side, OpenLocal open_local, void* ctx);
  ~StreamMux();
  StreamMux(const StreamMux&) = delete;
  StreamMux& operator=(const StreamMux&) = delete;

  // Host: a new stream for the connected socket `local` (owned from now on) to `port`.
  void open(int local, uint8_t port);
  // Host: tells the guest to drop every stream it has (sent first thing).
  void hello();

  // One round of the loop: the caller's own descriptors go first in `fds` (`extra` of them); then the
  // mux's. Returns the poll result of the caller's, or false when the channel failed for good.
  bool poll_once(std::vector<pollfd>& fds, size_t extra, int timeout_ms);
  size_t streams() const { return streams_.size(); }
  bool channel_hung_up() const { return channel_hup_; }

 private:
  struct Stream {
    uint32_t id = 0;
    int fd = -1;
    Buffer to_local;                    // arrived on the channel, not yet written to the local socket
    uint32_t send_credit = proto::vmchan::kWindow;  // bytes we may still send
    uint32_t received_unacked = 0;      // bytes received beyond what we granted back (checked)
    uint32_t grant = 0;                 // drained, not yet granted back
    bool local_eof = false;             // the local socket said EOF (kEof sent)
    bool remote_eof = false;            // kEof received: shut down the local write side once flushed
    bool remote_closed = false;         // kClose received: end once flushed
    bool shut_wr = false;
    bool hup = false;                   // the local socket hung up (its reader is gone)
  };

  Stream* find(uint32_t id);
  void send_frame(uint32_t stream, uint8_t kind, const void* payload, uint32_t len);
  void drop(Stream* s, bool tell_peer);
  void read_channel();
  void handle(const proto::vmchan::Header& h, const char* payload);
  void read_local(Stream* s);
  void write_local(Stream* s);
  void write_channel();
  void reap_dead();

  int chan_;
  const bool host_;
  OpenLocal open_local_;
  void* ctx_;
  uint32_t next_id_ = 1;
  std::vector<Stream*> streams_;
  Buffer chan_in_, chan_out_;
  bool channel_hup_ = false;
  bool channel_failed_ = false;
};

}  // namespace sandlet::guest
