// The files a COPY or ADD takes from the build context: found, checked and hashed on the host before any
// sandbox exists. Never reads outside the context: sources are relative, `..` cannot climb out, a symlink
// on a source's way must resolve inside, and symlinks inside copied directories are copied as links only
// when their target stays inside (else refused). Walks never follow symlinks; files are opened O_NOFOLLOW.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "recipe/plan.hpp"

namespace sandlet::build {

struct ContextEntry {
  enum Type { kFile, kDir, kSymlink } type = kFile;
  std::string host;    // absolute host path (read when the step runs)
  std::string dest;    // absolute path in the image
  uint32_t mode = 0;   // permission bits (07777)
  uint64_t size = 0;
  std::string sha256;  // file contents, hex
  std::string target;  // symlink target
};

struct CopyInputs {
  std::vector<ContextEntry> entries;  // parents before children
  std::vector<std::string> dest_dirs; // directories the copy needs (made with mkdir -p)
  std::vector<std::string> dir_roots; // where a directory source's contents go (--chown applies to them)
  std::string digest;                 // over every entry's dest, type, mode, size, content and target
  // One file whose destination has no trailing '/': it goes into DEST/NAME if DEST is a directory in the
  // image (the step checks), else to DEST itself (entries[0].dest).
  bool dest_may_be_dir = false;
  std::string file_name;  // that file's name, for DEST/NAME
};

// The context root, made absolute and resolved; refuses (INVALID_ARGUMENT) one that is not a directory.
std::string open_context(const std::string& dir);
// Collects a COPY/ADD step's inputs from `root` (open_context's result). Errors name the recipe's line.
CopyInputs collect_copy(const std::string& root, const Step& step, const std::string& recipe);

// Limits: a copy larger than these is refused (the data goes through the sandbox's agent).
constexpr uint64_t kMaxCopyFileBytes = 512ull << 20;
constexpr uint64_t kMaxCopyBytes = 2ull << 30;
constexpr size_t kMaxCopyEntries = 100000;

}  // namespace sandlet::build
