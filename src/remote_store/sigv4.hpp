// AWS Signature Version 4 (header-based) for S3 requests, with HMAC-SHA256 from libcrypto. Pure functions:
// the caller supplies the time, so the canonical request and string to sign are testable.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "remote_store/http_message.hpp"

namespace sandlet::store {

inline constexpr char kUnsignedPayload[] = "UNSIGNED-PAYLOAD";

struct SigV4Credentials {
  std::string access_key, secret_key, session_token;  // session_token "" = none
  std::string region = "us-east-1";
  std::string service = "s3";
};

struct SigV4Request {
  std::string method;
  std::string canonical_uri;  // already percent-encoded, e.g. "/bucket/blobs/ab"
  std::vector<std::pair<std::string, std::string>> query;  // decoded names and values
  HeaderList headers;  // every header to sign, host included (x-amz-* are added by sign_request)
  std::string payload_hash;  // lowercase hex SHA-256 of the body, or kUnsignedPayload
  std::string amz_date;  // "YYYYMMDDTHHMMSSZ" (UTC)
};

// "a=1&b=2": names and values percent-encoded, sorted by name then value.
std::string canonical_query(const std::vector<std::pair<std::string, std::string>>& query);
// Method, URI, query, the sorted lowercase headers, the signed-header list, the payload hash.
std::string canonical_request(const SigV4Request& request);
std::string signed_header_list(const HeaderList& headers);  // "host;range;x-amz-date"
std::string credential_scope(const std::string& amz_date, const SigV4Credentials& creds);
std::string string_to_sign(const std::string& amz_date, const std::string& scope,
                           const std::string& canonical_request);
std::string sigv4_signature(const SigV4Credentials& creds, const std::string& amz_date,
                            const std::string& string_to_sign);

// Adds x-amz-date, x-amz-content-sha256 and (with a session token) x-amz-security-token to the request's
// headers, then returns them with the Authorization header: the headers to send besides Host.
HeaderList sign_request(SigV4Request request, const SigV4Credentials& creds);

// The current UTC time as "YYYYMMDDTHHMMSSZ".
std::string amz_date_now();
std::string hex_sha256(std::string_view data);

}  // namespace sandlet::store
