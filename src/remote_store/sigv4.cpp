#include "remote_store/sigv4.hpp"

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <algorithm>
#include <ctime>

#include "common/error.hpp"
#include "image/sha256.hpp"

namespace sandlet::store {

namespace {

std::string lowercase(std::string s) {
  for (char& c : s)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return s;
}

// Trims and collapses runs of spaces, as SigV4 requires of header values.
std::string canonical_value(const std::string& v) {
  std::string out;
  bool space = false;
  for (char c : v) {
    if (c == ' ' || c == '\t') {
      space = !out.empty();
      continue;
    }
    if (space) out += ' ';
    space = false;
    out += c;
  }
  return out;
}

std::string hmac(const std::string& key, const std::string& data) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (!HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
            reinterpret_cast<const unsigned char*>(data.data()), data.size(), out, &len))
    throw Error(Code::kInternal, "HMAC-SHA256 failed in libcrypto");
  return std::string(reinterpret_cast<char*>(out), len);
}

std::string hex(const std::string& bytes) {
  static const char digits[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out += digits[c >> 4];
    out += digits[c & 15];
  }
  return out;
}

std::vector<std::pair<std::string, std::string>> sorted_headers(const HeaderList& headers) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& [n, v] : headers) out.emplace_back(lowercase(n), canonical_value(v));
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

std::string hex_sha256(std::string_view data) { return image::to_hex(image::sha256(data)); }

std::string canonical_query(const std::vector<std::pair<std::string, std::string>>& query) {
  std::vector<std::pair<std::string, std::string>> enc;
  for (const auto& [n, v] : query) enc.emplace_back(percent_encode_component(n), percent_encode_component(v));
  std::sort(enc.begin(), enc.end());
  std::string out;
  for (const auto& [n, v] : enc) out += (out.empty() ? "" : "&") + n + "=" + v;
  return out;
}

std::string signed_header_list(const HeaderList& headers) {
  std::string out;
  for (const auto& [n, v] : sorted_headers(headers)) out += (out.empty() ? "" : ";") + n;
  return out;
}

std::string canonical_request(const SigV4Request& r) {
  std::string out = r.method + "\n" + r.canonical_uri + "\n" + canonical_query(r.query) + "\n";
  for (const auto& [n, v] : sorted_headers(r.headers)) out += n + ":" + v + "\n";
  out += "\n" + signed_header_list(r.headers) + "\n" + r.payload_hash;
  return out;
}

std::string credential_scope(const std::string& amz_date, const SigV4Credentials& c) {
  return amz_date.substr(0, 8) + "/" + c.region + "/" + c.service + "/aws4_request";
}

std::string string_to_sign(const std::string& amz_date, const std::string& scope,
                           const std::string& canonical) {
  return "AWS4-HMAC-SHA256\n" + amz_date + "\n" + scope + "\n" + hex_sha256(canonical);
}

std::string sigv4_signature(const SigV4Credentials& c, const std::string& amz_date, const std::string& sts) {
  const std::string k_date = hmac("AWS4" + c.secret_key, amz_date.substr(0, 8));
  const std::string k_region = hmac(k_date, c.region);
  const std::string k_service = hmac(k_region, c.service);
  const std::string k_signing = hmac(k_service, "aws4_request");
  return hex(hmac(k_signing, sts));
}

HeaderList sign_request(SigV4Request r, const SigV4Credentials& c) {
  if (r.amz_date.size() != 16) throw Error(Code::kInvalidArgument, "SigV4: amz_date must be YYYYMMDDTHHMMSSZ");
  HeaderList added = {{"x-amz-date", r.amz_date}, {"x-amz-content-sha256", r.payload_hash}};
  if (!c.session_token.empty()) added.emplace_back("x-amz-security-token", c.session_token);
  r.headers.insert(r.headers.end(), added.begin(), added.end());
  const std::string scope = credential_scope(r.amz_date, c);
  const std::string signature = sigv4_signature(c, r.amz_date, string_to_sign(r.amz_date, scope, canonical_request(r)));
  HeaderList out;
  for (const auto& h : r.headers)
    if (lowercase(h.first) != "host") out.push_back(h);
  out.emplace_back("Authorization", "AWS4-HMAC-SHA256 Credential=" + c.access_key + "/" + scope +
                                        ", SignedHeaders=" + signed_header_list(r.headers) +
                                        ", Signature=" + signature);
  return out;
}

std::string amz_date_now() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[20];
  std::strftime(buf, sizeof buf, "%Y%m%dT%H%M%SZ", &tm);
  return buf;
}

}  // namespace sandlet::store
