// The agent's side of the trust boundary: a connection to a real sandbox's agent socket, made as the host
// makes them, sends frames that are malformed, truncated, oversized, of another version or protocol, or
// out of order. The agent answers each with an error (in its own protocol version) or, for a request it
// cannot even read, just ends that connection; whatever such a request started is killed; and it keeps
// serving every other connection meanwhile.
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <optional>

#include "integration/harness.hpp"
#include "proto/agent_protocol.hpp"
#include "proto/init_protocol.hpp"

namespace proto = sandlet::proto;

namespace {

struct Frame {
  proto::FrameHeader header;
  std::string payload;
};

class AgentConn {
 public:
  explicit AgentConn(const std::string& path) {
    fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    REQUIRE(fd_ >= 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    REQUIRE(path.size() < sizeof addr.sun_path);
    std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
    REQUIRE(::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  }
  ~AgentConn() { ::close(fd_); }
  void send(const std::string& bytes) {
    REQUIRE(::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(bytes.size()));
  }
  void shutdown_write() { ::shutdown(fd_, SHUT_WR); }
  // The next frame, or nothing at end of stream (10 s at most).
  std::optional<Frame> read_frame() {
    char head[proto::kHeaderSize];
    if (!read_exact(head, sizeof head)) return std::nullopt;
    Frame f;
    f.header = proto::parse_header(head);
    REQUIRE(f.header.len <= (1u << 20));
    f.payload.resize(f.header.len);
    REQUIRE(read_exact(f.payload.data(), f.payload.size()));
    return f;
  }

 private:
  bool read_exact(char* p, size_t n) {
    size_t got = 0;
    while (got < n) {
      pollfd w{fd_, POLLIN, 0};
      REQUIRE(::poll(&w, 1, 10000) == 1);
      ssize_t r = ::read(fd_, p + got, n - got);
      if (r == 0 && got == 0) return false;
      REQUIRE(r > 0);
      got += static_cast<size_t>(r);
    }
    return true;
  }
  int fd_ = -1;
};

std::string header(uint8_t type, uint8_t version, uint32_t len) {
  std::string h(proto::kHeaderSize, '\0');
  proto::put_header(h.data(), type, version, len);
  return h;
}

// The reply is one error frame in the agent's own version saying why, then the end of the connection.
void expect_rejected(AgentConn& c, const std::string& why) {
  auto f = c.read_frame();
  REQUIRE(f);
  CHECK(f->header.version == proto::kAgentVersion);
  REQUIRE(f->header.type == static_cast<uint8_t>(proto::AgentMsg::kError));
  proto::ErrorReply err;
  REQUIRE(proto::ErrorReply::decode(f->payload, &err));
  INFO(err.message);
  CHECK(err.code == SANDLET_INTERNAL);
  CHECK_THAT(err.message, Catch::Contains("rejected") && Catch::Contains(why));
  CHECK_FALSE(c.read_frame());
}

std::string exec_frame(const std::vector<std::string>& argv, uint32_t flags = 0) {
  proto::ExecRequest req;
  req.argv = argv;
  req.env = {"PATH=/bin:/usr/bin"};
  req.flags = flags;
  return proto::frame(proto::AgentMsg::kExec, req.encode());
}

}  // namespace

TEST_CASE("agent: malformed, oversized, wrong-version and out-of-order frames are rejected; it keeps serving",
          "[security][protocol]") {
  Harness h;
  auto sb = h.rt().create(Harness::spec());
  const std::string sock = h.root() + "/sandboxes/" + sb.id() + "/agent.sock";

  // A partial frame, then silence: held open through everything below, it blocks nobody.
  AgentConn stalled(sock);
  stalled.send(exec_frame({"true"}).substr(0, 20));

  SECTION("an unknown message type") {
    AgentConn c(sock);
    c.send(header(0x77, proto::kAgentVersion, 4) + "abcd");
    expect_rejected(c, "0x77");
  }
  SECTION("another protocol version, answered in the agent's own") {
    AgentConn c(sock);
    c.send(header(static_cast<uint8_t>(proto::AgentMsg::kPing), 1, 0));
    expect_rejected(c, "version 1, expected 2");
  }
  SECTION("a set-up frame of the init's protocol") {
    AgentConn c(sock);
    c.send(header(static_cast<uint8_t>(proto::InitMsg::kConfig), proto::kAgentVersion, 40) + std::string(40, '\0'));
    expect_rejected(c, "not a message of this protocol");
  }
  SECTION("a length over the type's maximum: refused before any payload arrives") {
    AgentConn c(sock);
    c.send(header(static_cast<uint8_t>(proto::AgentMsg::kExec), proto::kAgentVersion, proto::kMaxExecRequest + 1));
    expect_rejected(c, "over its maximum");
    AgentConn d(sock);
    d.send(header(static_cast<uint8_t>(proto::AgentMsg::kPing), proto::kAgentVersion, 0xffffffffu));
    expect_rejected(d, "over its maximum of 0");
  }
  SECTION("a length under the type's minimum, non-zero reserved bits") {
    AgentConn c(sock);
    c.send(header(static_cast<uint8_t>(proto::AgentMsg::kExec), proto::kAgentVersion, 3) + "abc");
    expect_rejected(c, "below its minimum");
    AgentConn d(sock);
    std::string bad = header(static_cast<uint8_t>(proto::AgentMsg::kPing), proto::kAgentVersion, 0);
    bad[7] = 1;
    d.send(bad);
    expect_rejected(d, "reserved");
  }
  SECTION("a malformed payload") {
    AgentConn c(sock);
    c.send(header(static_cast<uint8_t>(proto::AgentMsg::kExec), proto::kAgentVersion, 64) + std::string(64, '\xff'));
    expect_rejected(c, "malformed exec request");
    AgentConn d(sock);
    std::string exec = exec_frame({"sleep", "100"});
    // Garbage right behind a good request is parsed before the command can end: it is killed.
    d.send(exec + "trailing garbage");
    auto started = d.read_frame();
    REQUIRE(started);
    CHECK(started->header.type == static_cast<uint8_t>(proto::AgentMsg::kStarted));
    expect_rejected(d, "frame");
  }
  SECTION("frames out of order") {
    AgentConn c(sock);
    c.send(proto::frame(proto::AgentMsg::kStdin, "data"));
    expect_rejected(c, "first frame of a connection must be a request");

    // Stdin to an exec that takes none: the exec is killed and the request ends in an error.
    AgentConn d(sock);
    d.send(exec_frame({"sleep", "100"}));
    auto started = d.read_frame();
    REQUIRE(started);
    REQUIRE(started->header.type == static_cast<uint8_t>(proto::AgentMsg::kStarted));
    d.send(proto::frame(proto::AgentMsg::kStdin, "data"));
    expect_rejected(d, "stdin for an exec that takes none");
    CHECK(wait_until([&] { return count_procs(sb, "sleep") == 0; }, 5));

    // Anything after a read request (of a file long enough to be still in progress then).
    REQUIRE(sb.exec({"sh", "-c", "head -c 10000000 /dev/zero > /tmp/big"}).exit_code == 0);
    AgentConn e(sock);
    proto::ReadFileRequest rd;
    rd.path = "/tmp/big";
    e.send(proto::frame(proto::AgentMsg::kReadFile, rd.encode()) + proto::frame(proto::AgentMsg::kPing, ""));
    // Not reading for a while: the agent's output backs up, so the read is still going when it takes the
    // ping (a reader that keeps up could get the whole file first; the ping then comes after the request).
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    std::optional<Frame> last;
    size_t chunks = 0;
    while (auto f = e.read_frame()) {
      chunks += f->header.type == static_cast<uint8_t>(proto::AgentMsg::kFileChunk);
      last = std::move(f);
    }
    REQUIRE(last);
    CHECK(chunks < 10000000 / (256 << 10));
    REQUIRE(last->header.type == static_cast<uint8_t>(proto::AgentMsg::kError));
    proto::ErrorReply err;
    REQUIRE(proto::ErrorReply::decode(last->payload, &err));
    CHECK_THAT(err.message, Catch::Contains("nothing may follow a read-file request"));

    // A bad signal number during an exec.
    AgentConn s(sock);
    s.send(exec_frame({"sleep", "100"}));
    REQUIRE(s.read_frame());
    s.send(proto::frame(proto::AgentMsg::kSignal, proto::encode_u32(1000)));
    expect_rejected(s, "bad signal number");
    CHECK(wait_until([&] { return count_procs(sb, "sleep") == 0; }, 5));
  }
  SECTION("truncated requests: the connection just ends") {
    AgentConn c(sock);
    c.send(exec_frame({"echo", "never"}).substr(0, 30));
    c.shutdown_write();
    CHECK_FALSE(c.read_frame());
    AgentConn d(sock);
    d.send(std::string("\x05\x00\x00", 3));
    d.shutdown_write();
    CHECK_FALSE(d.read_frame());
  }

  // The agent still serves, while the stalled connection waits.
  auto r = sb.exec({"sh", "-c", "echo still here"});
  CHECK(r.stdout_data == "still here\n");
  sb.write_file("/tmp/x", "y", 0644);
  CHECK(sb.read_file("/tmp/x") == "y");
  h.check_no_leaks();
}
