// `sandlet metrics`: the platform metrics as Prometheus text, printed once or served over HTTP
// (`--listen ADDR:PORT`, GET /metrics): node-wide — the per-state and per-label counts from the root's
// records, the counters and histograms summed over every live runtime on the root (each publishes its own,
// up to a second behind; see docs/METRICS.md).
#include <unistd.h>

#include <boost/asio/buffer.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/streambuf.hpp>
#include <boost/asio/write.hpp>
#include <chrono>
#include <istream>
#include <memory>

#include "cli.hpp"
#include "listen.hpp"
#include "sandlet/sandlet_metrics.h"

namespace sandlet::cli {

namespace {

constexpr std::string_view kMetricsUsage =
    "Usage: sandlet metrics [--json] [--listen ADDR:PORT]\n"
    "\n"
    "Print the platform metrics in Prometheus text format 0.0.4 (--json: as JSON), node-wide: sandbox\n"
    "counts by state and label from the root's records, counters and histograms summed over every live\n"
    "runtime on the root (each publishes its own at most once a second).\n"
    "\n"
    "  --listen ADDR:PORT  serve GET /metrics over HTTP until SIGINT or SIGTERM (ADDR defaults to\n"
    "                      127.0.0.1; PORT 0 picks a free one; the address served is printed first)\n"
    "  --json              print JSON instead of text (not with --listen)\n";

constexpr size_t kMaxRequestBytes = 8192;  // a GET from a scraper is a few hundred bytes
constexpr auto kRequestTimeout = std::chrono::seconds(10);

namespace asio = boost::asio;
using asio::ip::tcp;

std::string metrics_text(Runtime& rt) {
  char* out = nullptr;
  detail::check(sandlet_runtime_metrics_node_text(rt.get(), &out));
  return detail::take_string(out);
}

std::string metrics_json(Runtime& rt) {
  char* out = nullptr;
  detail::check(sandlet_runtime_metrics_node_json(rt.get(), &out));
  return detail::take_string(out);
}

std::string http_response(int status, const char* reason, const std::string& content_type, const std::string& body) {
  return "HTTP/1.1 " + std::to_string(status) + " " + reason + "\r\nContent-Type: " + content_type +
         "\r\nContent-Length: " + std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
}

// One connection: one request (bounded in size and time), one answer, close.
class Connection final : public std::enable_shared_from_this<Connection> {
 public:
  Connection(tcp::socket socket, Runtime& rt)
      : socket_(std::move(socket)), timer_(socket_.get_executor()), buf_(kMaxRequestBytes), rt_(rt) {}

  void start() {
    auto self = shared_from_this();
    timer_.expires_after(kRequestTimeout);
    timer_.async_wait([self](boost::system::error_code ec) {
      if (!ec) self->socket_.close(ec);
    });
    asio::async_read_until(socket_, buf_, "\r\n\r\n", [self](boost::system::error_code ec, size_t) { self->on_request(ec); });
  }

 private:
  void on_request(boost::system::error_code ec) {
    if (ec == asio::error::not_found) return answer(http_response(431, "Request Header Fields Too Large", "text/plain", "request too large\n"));
    if (ec) return;
    std::istream in(&buf_);
    std::string line;
    std::getline(in, line);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const size_t sp1 = line.find(' '), sp2 = line.rfind(' ');
    if (sp1 == std::string::npos || sp2 == sp1 || line.compare(sp2 + 1, 5, "HTTP/") != 0)
      return answer(http_response(400, "Bad Request", "text/plain", "bad request line\n"));
    const std::string method = line.substr(0, sp1);
    std::string target = line.substr(sp1 + 1, sp2 - sp1 - 1);
    if (size_t q = target.find('?'); q != std::string::npos) target.resize(q);
    if (method != "GET" || target != "/metrics") return answer(http_response(404, "Not Found", "text/plain", "not found\n"));
    std::string reply;
    try {
      reply = http_response(200, "OK", "text/plain; version=0.0.4; charset=utf-8", metrics_text(rt_));
    } catch (const std::exception& e) {
      reply = http_response(500, "Internal Server Error", "text/plain", std::string(e.what()) + "\n");
    }
    answer(std::move(reply));
  }

  void answer(std::string reply) {
    auto self = shared_from_this();
    reply_ = std::move(reply);
    asio::async_write(socket_, asio::buffer(reply_), [self](boost::system::error_code ec, size_t) {
      boost::system::error_code ignored;
      if (ec) return self->finish();
      // Half-close, then drop what the client still sends until it closes (or the timer fires): closing
      // with unread bytes would reset the connection and the client could lose the answer.
      self->socket_.shutdown(tcp::socket::shutdown_send, ignored);
      self->drain();
    });
  }

  void drain() {
    auto self = shared_from_this();
    socket_.async_read_some(asio::buffer(sink_), [self](boost::system::error_code ec, size_t) {
      if (ec) return self->finish();
      self->drain();
    });
  }

  void finish() {
    boost::system::error_code ignored;
    socket_.close(ignored);
    timer_.cancel();
  }

  tcp::socket socket_;
  asio::steady_timer timer_;
  asio::streambuf buf_;
  std::string reply_;
  char sink_[4096];
  Runtime& rt_;
};

void accept_next(tcp::acceptor& acceptor, Runtime& rt) {
  acceptor.async_accept([&acceptor, &rt](boost::system::error_code ec, tcp::socket socket) {
    if (!acceptor.is_open()) return;
    if (!ec) std::make_shared<Connection>(std::move(socket), rt)->start();
    accept_next(acceptor, rt);
  });
}

int serve(Runtime& rt, const tcp::endpoint& where) {
  asio::io_context io;
  Listener listener(io, where, "metrics", 64);
  write_all(STDOUT_FILENO, "listening on http://" + listener.bound() + "/metrics\n");
  accept_next(listener.acceptor(), rt);
  io.run();
  return 0;
}

}  // namespace

int cmd_metrics(CommandContext& ctx, const std::vector<std::string>& args) {
  ParsedArgs a;
  if (!parse_command(ctx, {{"listen", 0, true}, {"json", 0, false}}, args, OperandMode::kPermute, kMetricsUsage, &a))
    return 0;
  if (!a.operands.empty()) throw UsageError("unexpected argument '" + a.operands[0] + "'");
  if (a.has("listen") && a.has("json")) throw UsageError("--json and --listen do not go together");
  std::optional<tcp::endpoint> where;
  if (const std::string* l = a.last("listen")) where = parse_listen(*l);
  Runtime rt = open_runtime(ctx.global, /*sweep=*/false);
  if (where) return serve(rt, *where);
  write_all(STDOUT_FILENO, a.has("json") ? metrics_json(rt) + "\n" : metrics_text(rt));
  return 0;
}

}  // namespace sandlet::cli
