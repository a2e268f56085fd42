// A forged agent at the other end of a real socketpair drives the host's tree copies
// (runtime/agent/tree_transfer.cpp) into a host directory (the strict applier): entries that could climb out,
// data out of order or beyond sizes, more than the caps, silence, counts that lie. Each copy fails with a
// clear error and nothing lands outside the destination; an early error on a put stops the host sending.
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <thread>

#include "proto/agent_protocol.hpp"
#include "runtime/agent/tree_endpoints.hpp"
#include "runtime/agent/tree_transfer.hpp"
#include "forged_agent.hpp"
#include "unit_helpers.hpp"

namespace proto = sandlet::proto;
using sandlet::Code;
using namespace std::chrono_literals;

namespace {

proto::TreeEntry make(proto::TreeKind kind, const std::string& path, uint64_t size = 0, const std::string& link = "") {
  proto::TreeEntry e;
  e.kind = kind;
  e.path = path;
  e.mode = kind == proto::TreeKind::kDir ? 0755 : 0644;
  e.size = size;
  e.link = link;
  return e;
}
std::string entry(const proto::TreeEntry& e) { return proto::frame(proto::AgentMsg::kTreeEntryOut, e.encode()); }
std::string chunk(const std::string& d) { return proto::frame(proto::AgentMsg::kFileChunk, d); }
std::string done(uint64_t entries, uint64_t bytes) {
  proto::TreeDone d;
  d.entries = entries;
  d.bytes = bytes;
  return proto::frame(proto::AgentMsg::kTreeDone, d.encode());
}

// A get-tree into `dest` answered by `replies`; returns the error (kOk when the copy succeeded).
sandlet::Error receive(const std::string& dest, const std::string& replies, sandlet::TreeLimits limits = {}) {
  ForgedAgent peer([&](int fd, ForgedAgent& p) {
    char buf[4096];
    (void)!::read(fd, buf, sizeof buf);  // the request
    p.put(fd, replies);
    ::shutdown(fd, SHUT_WR);
    char more[64];
    while (::read(fd, more, sizeof more) > 0) {
    }
  });
  proto::GetTreeRequest req;
  req.path = "/x";
  try {
    auto sink = sandlet::host_dir_sink(dest, {});
    sandlet::receive_tree(std::move(peer.host), req, *sink, limits, nullptr);
  } catch (const sandlet::Error& e) {
    return e;
  }
  return sandlet::Error(Code::kOk, "");
}

}  // namespace

TEST_CASE("tree transfer: what a forged agent sends cannot leave the destination or break the host", "[tree][hostile]") {
  unit::TempDir t("tree-hostile");
  const std::string dest = t.path + "/dest";
  using K = proto::TreeKind;

  SECTION("a well-formed tree arrives whole") {
    const sandlet::Error e = receive(dest, entry(make(K::kDir, "")) + entry(make(K::kFile, "f", 5)) + chunk("hel") +
                                               chunk("lo") + done(2, 5));
    INFO(e.what());
    CHECK(e.code() == Code::kOk);
    CHECK(sandlet::sys::read_file(dest + "/f") == "hello");
  }
  SECTION("paths that climb out are a protocol violation") {
    proto::TreeEntry up = make(K::kFile, "../escaped", 1);
    const sandlet::Error e = receive(dest, entry(make(K::kDir, "")) + entry(up) + chunk("x") + done(2, 1));
    CHECK(e.code() == Code::kInternal);
    CHECK(std::string(e.what()).find("malformed tree entry") != std::string::npos);
    CHECK(::access((t.path + "/escaped").c_str(), F_OK) != 0);
  }
  SECTION("a link then a file through it: refused, nothing written outside") {
    const sandlet::Error e = receive(dest, entry(make(K::kDir, "")) + entry(make(K::kSymlink, "l", 0, t.path)) +
                                               entry(make(K::kFile, "l/escaped", 1)) + chunk("x") + done(3, 1));
    CHECK(e.code() == Code::kNotFound);  // the link that leaves the tree is not made: "l/" names nothing
    CHECK(::access((t.path + "/escaped").c_str(), F_OK) != 0);
    CHECK(::access((dest + "/l").c_str(), F_OK) != 0);
  }
  SECTION("order: a first entry that is not the root, data with no file, an entry inside a file's data") {
    CHECK(receive(dest, entry(make(K::kFile, "f"))).code() == Code::kInternal);
    CHECK(receive(dest, entry(make(K::kDir, "")) + chunk("stray")).code() == Code::kInternal);
    CHECK(receive(dest, entry(make(K::kDir, "")) + entry(make(K::kFile, "f", 10)) + chunk("abc") +
                            entry(make(K::kFile, "g")))
              .code() == Code::kInternal);
    CHECK(receive(dest, entry(make(K::kDir, "")) + entry(make(K::kFile, "f", 2)) + chunk("abc")).code() ==
          Code::kInternal);
  }
  SECTION("counts that lie, and an end before the end") {
    CHECK(receive(dest, entry(make(K::kDir, "")) + done(5, 0)).code() == Code::kInternal);
    CHECK(receive(dest, entry(make(K::kDir, ""))).code() == Code::kUnavailable);
  }
  SECTION("the caps: entries and bytes") {
    sandlet::TreeLimits few;
    few.max_entries = 3;
    std::string flood = entry(make(K::kDir, ""));
    for (int i = 0; i < 10; ++i) flood += entry(make(K::kDir, "d" + std::to_string(i)));
    const sandlet::Error e = receive(dest, flood, few);
    CHECK(e.code() == Code::kOutOfRange);
    CHECK(std::string(e.what()).find("max_entries") != std::string::npos);
    sandlet::TreeLimits small;
    small.max_bytes = 100;
    CHECK(receive(t.path + "/d2", entry(make(K::kDir, "")) + entry(make(K::kFile, "huge", 1ull << 40)), small).code() ==
          Code::kOutOfRange);
  }
  SECTION("silence: the idle limit ends the copy") {
    ForgedAgent peer([&](int fd, ForgedAgent& p) {
      p.put(fd, entry(make(K::kDir, "")));
      p.drain(fd);  // says nothing more until the host hangs up
    });
    sandlet::TreeLimits quick;
    quick.idle = 1s;
    auto sink = sandlet::host_dir_sink(dest, {});
    const auto start = std::chrono::steady_clock::now();
    const sandlet::Error e = unit::expect_error([&] {
      sandlet::receive_tree(std::move(peer.host), proto::GetTreeRequest{"/x"}, *sink, quick, nullptr);
    });
    CHECK(e.code() == Code::kDeadlineExceeded);
    CHECK(std::chrono::steady_clock::now() - start < 10s);
  }
  SECTION("an agent error is the copy's error") {
    proto::ErrorReply er{SANDLET_PERMISSION_DENIED, EACCES, "copy \"/x/secret\": Permission denied"};
    const sandlet::Error e = receive(dest, entry(make(K::kDir, "")) + proto::frame(proto::AgentMsg::kError, er.encode()));
    CHECK(e.code() == Code::kPermissionDenied);
    CHECK(e.err_no() == EACCES);
    CHECK(std::string(e.what()).find("/x/secret") != std::string::npos);
  }
}

TEST_CASE("tree transfer: an agent's early error stops a put", "[tree][hostile]") {
  unit::TempDir t("tree-put");
  std::string big(64u << 20, 'z');
  unit::write_file(t.path + "/big", big);
  ForgedAgent peer([](int fd, ForgedAgent& p) {
    char buf[65536];
    (void)!::read(fd, buf, sizeof buf);  // some of the request
    proto::ErrorReply er{SANDLET_RESOURCE_EXHAUSTED, ENOSPC, "copy to \"/dst/big\": No space left on device"};
    p.put(fd, proto::frame(proto::AgentMsg::kError, er.encode()));
    p.drain(fd);  // as the agent does: drop the rest until the host stops
  });
  proto::PutTreeRequest req;
  req.path = "/dst";
  auto source = sandlet::host_dir_source(t.path + "/big", {});
  const sandlet::Error e = unit::expect_error(
      [&] { sandlet::send_tree(std::move(peer.host), req, *source, sandlet::TreeLimits{}, nullptr); });
  INFO(e.what());
  CHECK(e.code() == Code::kResourceExhausted);
  CHECK(e.err_no() == ENOSPC);
  peer.thread.join();
  peer.thread = std::thread([] {});
  CHECK(peer.read_bytes < big.size() / 2);  // the host stopped well before the end
}
