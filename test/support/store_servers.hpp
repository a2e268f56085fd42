// Test support: real store servers on loopback, each started by the test and gone with its object.
//   NginxServer: Debian's nginx serving a temp directory, PUT through the WebDAV module, optionally HTTPS
//                with a self-signed certificate made by the openssl CLI (CN localhost, SAN 127.0.0.1).
//   S3Server:    moto's S3 server with signature checking on (test/support/s3_server.py).
// `skip_reason()` is non-empty when the server could not start because something is missing; the test
// then prints "SANDLET-SKIP: <reason>" and returns.
#pragma once
#include <string>

#include "support/child_process.hpp"

namespace test_support {

class NginxServer final {
 public:
  explicit NginxServer(bool tls = false) : dir_("nginx") {
    const std::string nginx = find_program("nginx");
    if (nginx.empty()) {
      skip_ = "nginx is not installed (Debian package nginx-light)";
      return;
    }
    const std::string d = dir_.path();
    std::filesystem::create_directories(d + "/data");
    std::filesystem::create_directories(d + "/tmp");
    if (tls && !make_certificate()) return;
    for (int attempt = 0; attempt < 5; ++attempt) {
      port_ = free_loopback_port();
      write_text(d + "/nginx.conf", config(tls));
      process_ = std::make_unique<ChildProcess>(
          std::vector<std::string>{nginx, "-p", d, "-c", d + "/nginx.conf", "-e", d + "/error.log", "-g",
                                   "daemon off; pid " + d + "/nginx.pid;"},
          d + "/stdout.log");
      if (wait_until(*process_, 10, [&] { return port_answers(port_); })) return;
      process_->stop();  // (the port may have been taken meanwhile: another one)
    }
    skip_ = "nginx did not start: " + read_text(d + "/error.log") + read_text(d + "/stdout.log");
  }
  const std::string& skip_reason() const { return skip_; }
  uint16_t port() const { return port_; }
  std::string url(const std::string& prefix = "") const {
    return std::string(tls_ ? "https" : "http") + "://" + (tls_ ? "localhost" : "127.0.0.1") + ":" +
           std::to_string(port_) + (prefix.empty() ? "" : "/" + prefix);
  }
  std::string data_dir() const { return dir_.path() + "/data"; }
  std::string ca_file() const { return dir_.path() + "/cert.pem"; }  // self-signed: its own CA
  const std::string& temp_dir() const { return dir_.path(); }

 private:
  bool make_certificate() {
    tls_ = true;
    const std::string openssl = find_program("openssl");
    if (openssl.empty()) {
      skip_ = "the openssl command is not installed";
      return false;
    }
    const std::string d = dir_.path();
    ChildProcess gen({openssl, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                      "-nodes", "-keyout", d + "/key.pem", "-out", d + "/cert.pem", "-days", "2", "-subj",
                      "/CN=localhost", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"},
                     d + "/openssl.log");
    wait_until(gen, 30, [] { return false; });
    if (gen.exit_status() != 0) {
      skip_ = "openssl req failed: " + read_text(d + "/openssl.log");
      return false;
    }
    return true;
  }

  std::string config(bool tls) const {
    const std::string d = dir_.path();
    std::string listen = "listen 127.0.0.1:" + std::to_string(port_) + (tls ? " ssl" : "") + ";\n";
    // (TLS also on 127.0.0.2, an address the certificate does not name: for the host check.)
    if (tls)
      listen += "    listen 127.0.0.2:" + std::to_string(port_) + " ssl;\n    ssl_certificate " + d +
                "/cert.pem;\n    ssl_certificate_key " + d + "/key.pem;\n";
    // One process (no master/workers): stopping it stops everything; root, as the test runs as root and
    // the temp directory is private.
    return "user root;\nmaster_process off;\nworker_processes 1;\nerror_log " + d + "/error.log;\n"
           "events { worker_connections 256; }\n"
           "http {\n"
           "  access_log " + d + "/access.log;\n"
           "  client_body_temp_path " + d + "/tmp/body;\n  proxy_temp_path " + d + "/tmp/proxy;\n"
           "  fastcgi_temp_path " + d + "/tmp/fastcgi;\n  uwsgi_temp_path " + d + "/tmp/uwsgi;\n"
           "  scgi_temp_path " + d + "/tmp/scgi;\n"
           "  client_max_body_size 0;\n  keepalive_requests 10000;\n"
           "  server {\n    " + listen +
           "    root " + d + "/data;\n"
           "    location / {\n      dav_methods PUT;\n      create_full_put_path on;\n"
           "      dav_access user:rw group:r all:r;\n    }\n  }\n}\n";
  }

  TempDir dir_;
  std::string skip_;
  bool tls_ = false;
  uint16_t port_ = 0;
  std::unique_ptr<ChildProcess> process_;
};

class S3Server final {
 public:
  explicit S3Server(const std::string& bucket = "sandlet-test") : dir_("s3") {
    const std::string python = test_python();
    if (::access(python.c_str(), X_OK) != 0) {
      skip_ = "no Python interpreter at " + python;
      return;
    }
    const std::string ready = dir_.path() + "/ready.json", log = dir_.path() + "/server.log";
    process_ = std::make_unique<ChildProcess>(
        std::vector<std::string>{python, SANDLET_TEST_SUPPORT_DIR "/s3_server.py", "--ready", ready, "--bucket",
                                 bucket, "--max-lifetime", "900"},
        log, std::vector<std::string>{"PYTHONDONTWRITEBYTECODE=1"});
    if (!wait_until(*process_, 60, [&] { return std::filesystem::exists(ready); })) {
      const bool missing = process_->exited() && process_->exit_status() == 3;
      skip_ = (missing ? "moto[server] is not installed for " + python + ": " : "the S3 server did not start: ") +
              read_text(log);
      return;
    }
    const std::string json = read_text(ready);
    port_ = static_cast<uint16_t>(json_int(json, "port"));
    access_key_ = json_string(json, "access_key");
    secret_key_ = json_string(json, "secret_key");
    bucket_ = bucket;
  }
  const std::string& skip_reason() const { return skip_; }
  uint16_t port() const { return port_; }
  const std::string& access_key() const { return access_key_; }
  const std::string& secret_key() const { return secret_key_; }
  std::string url(uint16_t port = 0, const std::string& prefix = "") const {
    return "s3://" + bucket_ + (prefix.empty() ? "" : "/" + prefix) + "?endpoint=http://127.0.0.1:" +
           std::to_string(port ? port : port_) + "&region=us-east-1";
  }

 private:
  TempDir dir_;
  std::string skip_;
  uint16_t port_ = 0;
  std::string access_key_, secret_key_, bucket_;
  std::unique_ptr<ChildProcess> process_;
};

}  // namespace test_support
