// Image references as `docker pull` and skopeo read them: [docker://][REGISTRY/]REPOSITORY[:TAG][@sha256:HEX].
// Pure parsing, no I/O.
#pragma once
#include <string>

namespace sandlet::registry {

// The registry unqualified names belong to (Docker's default: "library/" is added to one-component names).
inline constexpr const char* kDefaultRegistry = "docker.io";

struct ImageRef {
  std::string registry;    // "docker.io", "ghcr.io", "127.0.0.1:5000", "localhost"
  std::string repository;  // "library/debian", "org/python-3-13"
  std::string tag;         // "" when only a digest is given
  std::string digest;      // "sha256:<64 hex>" or ""

  // "registry/repository:tag", "registry/repository@sha256:..." (a digest wins over a tag) — the name a pulled
  // image's environment gets.
  std::string canonical() const;
  // The manifest to ask for: the digest when given, else the tag.
  const std::string& reference() const { return digest.empty() ? tag : digest; }
};

// True for "docker://..." — a reference that always means a registry image.
bool has_docker_scheme(const std::string& text);

// Parses a reference (with or without "docker://"). A first component with '.' or ':' or "localhost" is a
// registry; otherwise the default registry, and "library/" before a one-component name there. No tag and no
// digest means ":latest". Throws Error(kInvalidArgument) naming `field` and what is wrong.
ImageRef parse_image_ref(const std::string& text, const std::string& field = "image");

// True when `text` parses as a reference (the same rules, without throwing).
bool looks_like_image_ref(const std::string& text);

}  // namespace sandlet::registry
