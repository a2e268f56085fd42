// The host's ends of a tree copy: a host directory (read with the tree walker, written with the tree
// applier in strict mode: nothing a sandbox sends is written outside the destination or through a link,
// and no set-user/group-ID bit lands on the host), and a tar stream (read with any of tar's dialects,
// plain, gzip or zstd; written as POSIX pax, what `tar` and `docker cp` read).
#pragma once
#include <memory>
#include <string>

#include "runtime/agent/tree_transfer.hpp"

namespace sandlet {

struct HostTreeOptions {
  bool follow_root = false;  // source: a symlink named as the source is followed (else copied as a link)
  bool keep_owners = false;  // sink: the entries' owners (else the files belong to this process's user)
  bool outside_links = false;  // sink: make symlinks that point outside the destination (else left out)
};

std::unique_ptr<TreeSource> host_dir_source(const std::string& path, const HostTreeOptions& options);
std::unique_ptr<TreeSink> host_dir_sink(const std::string& path, const HostTreeOptions& options);
// `fd` stays the caller's. The archive's entries are relative to the tree's root ("./" or "" is the root;
// entries whose parents the archive lacks get them as 0755 directories); device nodes and sockets are
// skipped.
std::unique_ptr<TreeSource> tar_source(int fd, std::string name_for_errors);
// Entries are named under `top` ("dir", "dir/a", ...), as `docker cp ID:/path/dir -` names them.
std::unique_ptr<TreeSink> tar_sink(int fd, std::string name_for_errors, std::string top);

}  // namespace sandlet
