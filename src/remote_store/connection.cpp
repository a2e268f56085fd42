#include "remote_store/connection.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>

#include <cerrno>
#include <cmath>
#include <cstring>

#include "common/error.hpp"
#include "sys/sigpipe_block.hpp"

namespace sandlet::store {

namespace {

SSL_CTX* as_ctx(void* p) { return static_cast<SSL_CTX*>(p); }
SSL* as_ssl(void* p) { return static_cast<SSL*>(p); }

[[noreturn]] void unavailable(const std::string& what, int e = 0) {
  if (e) throw Error(Code::kUnavailable, what + ": " + std::strerror(e) + " (errno " + std::to_string(e) + ")", e);
  throw Error(Code::kUnavailable, what);
}

std::string ssl_errors() {
  std::string out;
  while (unsigned long e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    out += (out.empty() ? "" : "; ") + std::string(buf);
  }
  return out.empty() ? "no OpenSSL error queued" : out;
}

// libssl writes with write(2), which raises SIGPIPE on a reset connection: sys::SigpipeBlock around it.
using sys::SigpipeBlock;

timeval to_timeval(double s) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(s);
  tv.tv_usec = static_cast<suseconds_t>((s - std::floor(s)) * 1e6);
  if (tv.tv_sec == 0 && tv.tv_usec == 0) tv.tv_usec = 1000;
  return tv;
}

}  // namespace

Connection::~Connection() {
  close();
  if (ssl_ctx_) SSL_CTX_free(as_ctx(ssl_ctx_));
}

void Connection::close() {
  if (ssl_) {
    SSL_free(as_ssl(ssl_));  // no close_notify: the socket may be broken, and nothing depends on it
    ssl_ = nullptr;
  }
  fd_.reset();
}

void Connection::open(const Endpoint& e) {
  close();
  host_ = e.host;
  port_ = e.port;
  timeout_s_ = e.timeout_s;
  connect_tcp(e);
  if (e.tls) {
    try {
      start_tls(e);
    } catch (...) {
      close();
      throw;
    }
  }
}

void Connection::connect_tcp(const Endpoint& e) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* res = nullptr;
  const std::string port = std::to_string(e.port);
  if (int rc = getaddrinfo(e.host.c_str(), port.c_str(), &hints, &res); rc != 0) {
    // A name that does not exist (errno ENOENT) stays so on a retry; a resolver that failed for now
    // (EAI_AGAIN) may not.
    throw Error(Code::kUnavailable, "cannot resolve " + where() + ": " + gai_strerror(rc),
                rc == EAI_NONAME || rc == EAI_NODATA ? ENOENT : 0);
  }
  int last_errno = 0;
  for (addrinfo* ai = res; ai; ai = ai->ai_next) {
    sys::UniqueFd fd(::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol));
    if (!fd) {
      last_errno = errno;
      continue;
    }
    if (::connect(fd.get(), ai->ai_addr, ai->ai_addrlen) != 0) {
      if (errno != EINPROGRESS) {
        last_errno = errno;
        continue;
      }
      pollfd p{fd.get(), POLLOUT, 0};
      const int rc = ::poll(&p, 1, static_cast<int>(e.timeout_s * 1000));
      if (rc == 0) {
        last_errno = ETIMEDOUT;
        continue;
      }
      int err = 0;
      socklen_t len = sizeof err;
      if (rc < 0 || ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0) {
        last_errno = rc < 0 ? errno : err;
        continue;
      }
    }
    // Blocking from here on, each wait bounded by the socket timeouts.
    const int flags = ::fcntl(fd.get(), F_GETFL);
    ::fcntl(fd.get(), F_SETFL, flags & ~O_NONBLOCK);
    const timeval tv = to_timeval(e.timeout_s);
    ::setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    ::setsockopt(fd.get(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    const int one = 1;
    ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    fd_ = std::move(fd);
    freeaddrinfo(res);
    return;
  }
  freeaddrinfo(res);
  unavailable("cannot connect to " + where(), last_errno ? last_errno : ECONNREFUSED);
}

void Connection::start_tls(const Endpoint& e) {
  if (!ssl_ctx_ || ssl_ctx_ca_ != e.ca_file) {
    if (ssl_ctx_) SSL_CTX_free(as_ctx(ssl_ctx_));
    ssl_ctx_ = nullptr;
    SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
    if (!ctx) throw Error(Code::kInternal, "SSL_CTX_new failed: " + ssl_errors());
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    // A peer closing without close_notify reads as an end of stream; the HTTP framing detects truncation.
    SSL_CTX_set_options(ctx, SSL_OP_IGNORE_UNEXPECTED_EOF);
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
    const int ok = e.ca_file.empty() ? SSL_CTX_set_default_verify_paths(ctx)
                                     : SSL_CTX_load_verify_locations(ctx, e.ca_file.c_str(), nullptr);
    if (ok != 1) {
      SSL_CTX_free(ctx);
      throw Error(Code::kFailedPrecondition, "cannot load the CA bundle '" +
                                                 (e.ca_file.empty() ? std::string("(system default)") : e.ca_file) +
                                                 "': " + ssl_errors());
    }
    ssl_ctx_ = ctx;
    ssl_ctx_ca_ = e.ca_file;
  }
  SSL* ssl = SSL_new(as_ctx(ssl_ctx_));
  if (!ssl) throw Error(Code::kInternal, "SSL_new failed: " + ssl_errors());
  ssl_ = ssl;
  SSL_set_fd(ssl, fd_.get());
  in6_addr addr6;
  in_addr addr4;
  const bool is_ip = inet_pton(AF_INET, e.host.c_str(), &addr4) == 1 || inet_pton(AF_INET6, e.host.c_str(), &addr6) == 1;
  if (is_ip) {
    X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), e.host.c_str());
  } else {
    SSL_set_tlsext_host_name(ssl, e.host.c_str());
    SSL_set_hostflags(ssl, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
    SSL_set1_host(ssl, e.host.c_str());
  }
  ERR_clear_error();
  SigpipeBlock no_sigpipe;
  if (SSL_connect(ssl) != 1) {
    const long verify = SSL_get_verify_result(ssl);
    if (verify != X509_V_OK)
      throw Error(Code::kFailedPrecondition, "TLS certificate of " + where() + " rejected: " +
                                                 X509_verify_cert_error_string(verify));
    const int saved = errno;
    unavailable("TLS handshake with " + where() + " failed: " + ssl_errors(),
                saved == EAGAIN ? ETIMEDOUT : 0);
  }
}

void Connection::write_all(const char* data, size_t n) {
  if (!is_open()) unavailable("write to " + where() + ": not connected");
  while (n > 0) {
    ssize_t w;
    if (ssl_) {
      SigpipeBlock no_sigpipe;
      ERR_clear_error();
      const int rc = SSL_write(as_ssl(ssl_), data, static_cast<int>(std::min<size_t>(n, 1 << 30)));
      if (rc <= 0) {
        const int e = errno;
        close();
        unavailable("TLS write to " + where() + " failed", e == EAGAIN ? ETIMEDOUT : (e ? e : EPIPE));
      }
      w = rc;
    } else {
      w = ::send(fd_.get(), data, n, MSG_NOSIGNAL);
      if (w < 0) {
        if (errno == EINTR) continue;
        const int e = errno == EAGAIN ? ETIMEDOUT : errno;
        close();
        unavailable("write to " + where() + " failed", e);
      }
    }
    data += w;
    n -= static_cast<size_t>(w);
  }
}

size_t Connection::read_some(char* buf, size_t n) {
  if (!is_open()) unavailable("read from " + where() + ": not connected");
  if (ssl_) {
    ERR_clear_error();
    const int rc = SSL_read(as_ssl(ssl_), buf, static_cast<int>(std::min<size_t>(n, 1 << 30)));
    if (rc > 0) return static_cast<size_t>(rc);
    const int err = SSL_get_error(as_ssl(ssl_), rc);
    if (err == SSL_ERROR_ZERO_RETURN) return 0;
    const int e = errno;
    // A peer that closes without close_notify ends the stream too; truncation is the parser's to judge.
    if (err == SSL_ERROR_SYSCALL && e == 0) return 0;
    close();
    unavailable("TLS read from " + where() + " failed (" + ssl_errors() + ")",
                e == EAGAIN ? ETIMEDOUT : e);
  }
  for (;;) {
    const ssize_t r = ::recv(fd_.get(), buf, n, 0);
    if (r >= 0) return static_cast<size_t>(r);
    if (errno == EINTR) continue;
    const int e = errno == EAGAIN ? ETIMEDOUT : errno;
    close();
    unavailable("read from " + where() + " failed", e);
  }
}

}  // namespace sandlet::store
