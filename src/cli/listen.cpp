#include "listen.hpp"

#include <csignal>

#include "cli.hpp"

namespace sandlet::cli {

namespace asio = boost::asio;
using asio::ip::tcp;

tcp::endpoint parse_listen(const std::string& spec) {
  std::string host = "127.0.0.1", port = spec;
  const size_t colon = spec.rfind(':');
  if (colon != std::string::npos) {
    host = spec.substr(0, colon);
    port = spec.substr(colon + 1);
    if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
    if (host.empty()) host = "127.0.0.1";
  }
  if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos ||
      std::stoul(port) > 65535)
    throw UsageError("--listen: bad port in '" + spec + "' (ADDR:PORT, PORT 0-65535)");
  boost::system::error_code ec;
  auto addr = asio::ip::make_address(host, ec);
  if (ec) throw UsageError("--listen: bad address '" + host + "' (a numeric IPv4 or IPv6 address)");
  return {addr, static_cast<unsigned short>(std::stoul(port))};
}

Listener::Listener(asio::io_context& io, const tcp::endpoint& where, const char* command, int backlog)
    : acceptor_(io), signals_(io, SIGINT, SIGTERM) {
  boost::system::error_code ec;
  acceptor_.open(where.protocol(), ec);
  if (!ec) acceptor_.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) acceptor_.bind(where, ec);
  if (!ec) acceptor_.listen(backlog, ec);
  if (ec)
    throw Error(SANDLET_UNAVAILABLE, std::string(command) + ": cannot listen on " + where.address().to_string() + ":" +
                                         std::to_string(where.port()) + ": " + ec.message());
  signals_.async_wait([this, &io](boost::system::error_code, int) {
    boost::system::error_code ignored;
    acceptor_.close(ignored);
    io.stop();
  });
}

std::string Listener::bound() const {
  const tcp::endpoint b = acceptor_.local_endpoint();
  const std::string host = b.address().is_v6() ? "[" + b.address().to_string() + "]" : b.address().to_string();
  return host + ":" + std::to_string(b.port());
}

}  // namespace sandlet::cli
