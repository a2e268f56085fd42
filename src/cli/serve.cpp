// `sandlet serve --sandbox-fusion`: the SandboxFusion HTTP API (POST /run_code, /run_jupyter, GET /v1/ping) over this
// process's runtime (fusion.cpp does the work). One thread per connection with blocking I/O and socket
// timeouts: a request holds its thread while its sandbox runs, and the sandboxes, not the server, bound
// the real work. Connections beyond --max-connections are refused with 503.
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <set>
#include <thread>

#include "cli.hpp"
#include "fusion.hpp"
#include "listen.hpp"

namespace sandlet::cli {

namespace {

constexpr std::string_view kServeUsage =
    "Usage: sandlet serve --sandbox-fusion [--listen ADDR:PORT] --language LANG=ENV... [OPTIONS]\n"
    "\n"
    "Serve SandboxFusion's code-execution API (POST /run_code, POST /run_jupyter, GET /v1/ping) until SIGINT\n"
    "or SIGTERM, for verl, SkyRL and ROLL code rewards (SANDBOX_FUSION_URL=http://ADDR:PORT/run_code).\n"
    "Interpreted code runs in a FnCall pool per language, compiled code in a sandbox per request, notebook\n"
    "cells in one python3 process of a sandbox per request; no sandbox has a network.\n"
    "\n"
    "  --listen ADDR:PORT     default 127.0.0.1:8080; PORT 0 picks a free one (the address is printed first)\n"
    "  --language LANG=ENV    serve LANG (python, bash, cpp) from ENV: an environment name, layer:NAME (a\n"
    "                         store layer) or /a/root/filesystem with its toolchain; repeatable\n"
    "  --memory SIZE          default memory limit of a sandbox (default 1G; a request's memory_limit_MB wins)\n"
    "  --no-pool              a fresh sandbox for every request (for comparison)\n"
    "  --max-connections N    connections served at once (default 256; more get 503)\n";

constexpr size_t kMaxHeader = 16 * 1024;
constexpr size_t kMaxBody = 64u << 20;
constexpr int kIdleTimeoutS = 30;

namespace asio = boost::asio;
using asio::ip::tcp;

struct Reply {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
};

const char* reason(int status) {
  switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 411: return "Length Required";
    case 413: return "Payload Too Large";
    case 503: return "Service Unavailable";
    default: return "Internal Server Error";
  }
}

Reply error_reply(int status, const std::string& message) {
  json::bj::object o;
  o["error"] = message;
  return {status, "application/json", json::serialize(o)};
}

bool send_reply(int fd, const Reply& r, bool keep_alive) {
  const std::string head = "HTTP/1.1 " + std::to_string(r.status) + " " + reason(r.status) + "\r\nContent-Type: " +
                           r.content_type + "\r\nContent-Length: " + std::to_string(r.body.size()) +
                           "\r\nConnection: " + (keep_alive ? "keep-alive" : "close") + "\r\n\r\n";
  return write_all(fd, head + r.body);  // one write: a second small one would wait for the client's delayed ACK
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

class Server {
 public:
  Server(fusion::Service svc, int max_connections) : svc_(std::move(svc)), max_(max_connections) {}

  // Serves one accepted connection on a thread of its own.
  void adopt(int fd) {
    timeval tv{kIdleTimeoutS, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    bool full;
    {
      std::lock_guard<std::mutex> lock(mu_);
      full = static_cast<int>(open_.size()) >= max_;
      if (!full) open_.insert(fd);
    }
    if (full) {
      send_reply(fd, error_reply(503, "too many connections"), false);
      ::close(fd);
      return;
    }
    std::thread([this, fd] {
      serve_connection(fd);
      std::lock_guard<std::mutex> l(mu_);
      open_.erase(fd);
      ::close(fd);  // (under the lock: stop() never shuts down a descriptor number already reused)
      idle_.notify_all();
    }).detach();
  }

  // Stops reading from every connection (a request being answered still gets its answer) and waits for
  // them to end; returns how many are still running after `limit`.
  size_t stop(std::chrono::seconds limit) {
    std::unique_lock<std::mutex> lock(mu_);
    for (int fd : open_) ::shutdown(fd, SHUT_RD);
    idle_.wait_for(lock, limit, [this] { return open_.empty(); });
    return open_.size();
  }

 private:
  void serve_connection(int fd) {
    const int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    std::string buf;
    for (;;) {
      size_t end;
      while ((end = buf.find("\r\n\r\n")) == std::string::npos) {
        if (buf.size() > kMaxHeader) return void(send_reply(fd, error_reply(400, "request header too large"), false));
        char chunk[8192];
        const ssize_t n = ::recv(fd, chunk, sizeof chunk, 0);
        if (n <= 0) return;
        buf.append(chunk, static_cast<size_t>(n));
      }
      std::string method, target;
      size_t length = 0;
      bool keep_alive = true, bad = false, chunked = false;
      size_t pos = 0, line_no = 0;
      while (pos < end) {
        size_t eol = buf.find("\r\n", pos);
        std::string line = buf.substr(pos, eol - pos);
        pos = eol + 2;
        if (line_no++ == 0) {
          const size_t a = line.find(' '), b = line.rfind(' ');
          if (a == std::string::npos || a == b || line.compare(b + 1, 7, "HTTP/1.") != 0) bad = true;
          else method = line.substr(0, a), target = line.substr(a + 1, b - a - 1);
          continue;
        }
        const size_t colon = line.find(':');
        if (colon == std::string::npos) { bad = true; continue; }
        const std::string name = lower(line.substr(0, colon));
        std::string value = line.substr(colon + 1);
        value.erase(0, value.find_first_not_of(" \t"));
        if (name == "content-length") {
          if (value.empty() || value.size() > 12 || value.find_first_not_of("0123456789") != std::string::npos) bad = true;
          else length = std::stoull(value);
        } else if (name == "connection") {
          keep_alive = lower(value).find("close") == std::string::npos;
        } else if (name == "transfer-encoding") {
          chunked = lower(value).find("chunked") != std::string::npos;
        }
      }
      if (bad) return void(send_reply(fd, error_reply(400, "malformed request"), false));
      if (chunked) return void(send_reply(fd, error_reply(411, "chunked bodies are not supported: send Content-Length"), false));
      if (length > kMaxBody) return void(send_reply(fd, error_reply(413, "a body is at most 64 MiB"), false));
      buf.erase(0, end + 4);
      while (buf.size() < length) {
        char chunk[65536];
        const ssize_t n = ::recv(fd, chunk, sizeof chunk, 0);
        if (n <= 0) return;
        buf.append(chunk, static_cast<size_t>(n));
      }
      const std::string body = buf.substr(0, length);
      buf.erase(0, length);
      if (size_t q = target.find('?'); q != std::string::npos) target.resize(q);
      if (!send_reply(fd, handle(method, target, body), keep_alive) || !keep_alive) return;
    }
  }

  Reply handle(const std::string& method, const std::string& path, const std::string& body) {
    if (path == "/v1/ping" || path == "/ping") return {200, "text/plain; charset=utf-8", "pong"};
    if (path != "/run_code" && path != "/run_jupyter")
      return error_reply(404, "no endpoint " + path + " (served: POST /run_code, POST /run_jupyter, GET /v1/ping; "
                                                      "SandboxFusion's dataset endpoints are not: sandlet serves code "
                                                      "execution only)");
    if (method != "POST") return error_reply(405, path + " takes POST");
    json::bj::value doc;
    try {
      doc = json::parse(body);
    } catch (const std::exception& e) {
      return error_reply(400, std::string("the body is not JSON: ") + e.what());
    }
    try {
      const json::bj::value answer = path == "/run_jupyter" ? fusion::run_jupyter(svc_, doc) : fusion::run_code(svc_, doc);
      return {200, "application/json", json::serialize(answer)};
    } catch (const fusion::RequestError& e) {
      return error_reply(400, e.what());
    } catch (const std::exception& e) {
      return error_reply(500, e.what());
    }
  }

  fusion::Service svc_;
  const int max_;
  std::mutex mu_;
  std::condition_variable idle_;
  std::set<int> open_;  // the connections being served
};

void accept_next(tcp::acceptor& acceptor, Server& server) {
  acceptor.async_accept([&acceptor, &server](boost::system::error_code ec, tcp::socket socket) {
    if (!acceptor.is_open()) return;
    if (!ec) server.adopt(socket.release());
    accept_next(acceptor, server);
  });
}

// A language's sandboxes: layer:NAME is a store layer, /a/dir a directory layer, anything else an
// environment; every one without network and with the default memory limit.
std::string spec_for(const std::string& source, const std::string& memory) {
  json::bj::object spec;
  if (source.rfind("layer:", 0) == 0) {
    spec["layers"] = json::bj::array{json::bj::value(source.substr(6))};
  } else if (!source.empty() && source[0] == '/') {
    spec["layers"] = json::bj::array{json::bj::value(source)};
  } else {
    spec["environment"] = source;
  }
  spec["network"] = "none";
  if (!memory.empty()) json::object_at(spec, "limits")["memory"] = json::number_or_string(memory);
  Spec::from_json(json::serialize(spec));  // validated now: a bad --language or --memory is a usage error
  return json::serialize(spec);
}

}  // namespace

int cmd_serve(CommandContext& ctx, const std::vector<std::string>& args) {
  ParsedArgs a;
  if (!parse_command(ctx,
                     {{"sandbox-fusion", 0, false}, {"listen", 0, true}, {"language", 0, true}, {"memory", 0, true},
                      {"no-pool", 0, false}, {"max-connections", 0, true}},
                     args, OperandMode::kPermute, kServeUsage, &a))
    return 0;
  if (!a.operands.empty()) throw UsageError("unexpected argument '" + a.operands[0] + "'");
  if (!a.has("sandbox-fusion")) throw UsageError("say which API to serve: --sandbox-fusion");
  const tcp::endpoint where = parse_listen(a.last("listen") ? *a.last("listen") : "127.0.0.1:8080");
  int max_connections = 256;
  if (const std::string* m = a.last("max-connections")) {
    if (m->empty() || m->size() > 6 || m->find_first_not_of("0123456789") != std::string::npos || std::stoi(*m) < 1)
      throw UsageError("--max-connections: a positive number");
    max_connections = std::stoi(*m);
  }
  Runtime rt = open_runtime(ctx.global, /*sweep=*/true);
  fusion::Service svc;
  svc.rt = &rt;
  svc.pooled = !a.has("no-pool");
  const std::string memory = a.last("memory") ? *a.last("memory") : "1G";
  for (const std::string& item : a.all("language")) {
    const size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == item.size())
      throw UsageError("--language '" + item + "': expected LANG=ENV");
    const std::string lang = item.substr(0, eq);
    if (!fusion::known_language(lang)) throw UsageError("--language: '" + lang + "' is not supported (python, bash, cpp)");
    try {
      svc.specs[lang] = spec_for(item.substr(eq + 1), memory);
    } catch (const Error& e) {
      throw UsageError("--language " + item + ": " + e.what());
    }
  }
  if (svc.specs.empty()) throw UsageError("give at least one --language LANG=ENV");

  asio::io_context io;
  Listener listener(io, where, "serve", 128);
  Server server(std::move(svc), max_connections);
  write_all(STDOUT_FILENO, "listening on " + listener.bound() + "\n");
  accept_next(listener.acceptor(), server);
  io.run();
  if (const size_t left = server.stop(std::chrono::seconds(60)); left != 0) {
    // Their threads still use the runtime: end the process now; their sandboxes are owned by it, so the
    // library's owner check removes them.
    print_error("serve: " + std::to_string(left) + " request(s) still running 60 s after the signal; exiting");
    std::_Exit(kExitRuntimeError);
  }
  rt.close();
  return 0;
}

}  // namespace sandlet::cli
