// One blocking TCP connection to a store, plain or TLS (OpenSSL libssl: the peer's certificate is checked
// against a CA bundle or the system's, and against the host name or IP address). Every wait (connect,
// each read, each write) is bounded by the timeout. Errors are sandlet::Error: kUnavailable for
// connection failures and timeouts (retryable; errno ENOENT: the host name does not exist),
// kFailedPrecondition for a rejected certificate.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "sys/fd.hpp"

namespace sandlet::store {

struct Endpoint {
  std::string host;
  uint16_t port = 0;
  bool tls = false;
  std::string ca_file;  // "" = the system's default CA store
  double timeout_s = 30;
};

class Connection final {
 public:
  Connection() = default;
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  void open(const Endpoint& endpoint);
  bool is_open() const { return fd_.get() >= 0; }
  void close();
  void write_all(const char* data, size_t n);
  size_t read_some(char* buf, size_t n);  // 0 when the peer closed

 private:
  void connect_tcp(const Endpoint& e);
  void start_tls(const Endpoint& e);
  std::string where() const { return host_ + ":" + std::to_string(port_); }

  sys::UniqueFd fd_;
  void* ssl_ctx_ = nullptr;  // SSL_CTX, kept across reconnects (its CA store is loaded once)
  std::string ssl_ctx_ca_;
  void* ssl_ = nullptr;  // SSL
  std::string host_;
  uint16_t port_ = 0;
  double timeout_s_ = 30;
};

}  // namespace sandlet::store
