// The HTTP front ends' shared listening socket (`sandlet metrics --listen`, `sandlet serve`): parsing
// ADDR:PORT, binding, closing on SIGINT/SIGTERM, and the address line printed once it accepts.
#pragma once
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/signal_set.hpp>
#include <string>

namespace sandlet::cli {

// "ADDR:PORT", "PORT" or "[v6]:PORT" (ADDR defaults to 127.0.0.1); throws UsageError naming --listen.
boost::asio::ip::tcp::endpoint parse_listen(const std::string& spec);

// A socket listening on `where` whose acceptor SIGINT/SIGTERM close (and stop `io`). Throws UNAVAILABLE
// naming `command` when it cannot listen.
class Listener {
 public:
  Listener(boost::asio::io_context& io, const boost::asio::ip::tcp::endpoint& where, const char* command,
           int backlog);
  boost::asio::ip::tcp::acceptor& acceptor() { return acceptor_; }
  // "HOST:PORT" actually bound (IPv6 in brackets): port 0 asked for any.
  std::string bound() const;

 private:
  boost::asio::ip::tcp::acceptor acceptor_;
  boost::asio::signal_set signals_;
};

}  // namespace sandlet::cli
