// Sandbox::copy_in / copy_out / put_archive / get_archive: a tree between a host directory or a tar stream
// and a sandbox path, over one agent connection (runtime/agent/tree_transfer.hpp).
#include <linux/limits.h>

#include "common/error.hpp"
#include "runtime/sandbox.hpp"
#include "runtime/agent/tree_endpoints.hpp"

namespace sandlet {
namespace {

void check_inside_path(const std::string& path, const char* field) {
  if (path.empty() || path[0] != '/')
    throw Error(Code::kInvalidArgument, std::string("invalid copy field '") + field + "': \"" + path +
                                            "\" is not an absolute path inside the sandbox");
  if (path.size() >= PATH_MAX)
    throw Error(Code::kInvalidArgument, std::string("invalid copy field '") + field + "': longer than PATH_MAX");
  if (path.find('\0') != std::string::npos)
    throw Error(Code::kInvalidArgument, std::string("invalid copy field '") + field + "': contains a NUL byte");
}

void check_host_path(const std::string& path, const char* field) {
  if (path.empty()) throw Error(Code::kInvalidArgument, std::string("invalid copy field '") + field + "': empty");
}

TreeLimits limits_for(const CopyOptions& o) {
  TreeLimits l;
  if (o.max_bytes) l.max_bytes = o.max_bytes;
  if (o.max_entries) l.max_entries = o.max_entries;
  return l;
}

// "a/b/" -> "b"; "/" -> "" (the entries of a copy of the root are named from "./").
std::string last_component(std::string p) {
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  if (p == "/") return "";
  const size_t slash = p.rfind('/');
  return slash == std::string::npos ? p : p.substr(slash + 1);
}

template <class F>
TreeCopyStats with_context(const std::string& context, F&& f) {
  try {
    return f();
  } catch (const Error& e) {
    throw Error(e.code(), context + ": " + e.what(), e.err_no());
  }
}

}  // namespace

TreeCopyStats Sandbox::put_tree(TreeSource& source, const std::string& path, const CopyOptions& options) {
  proto::PutTreeRequest req;
  req.path = path;
  req.user = options.user;
  req.flags = proto::kTreeMkdirParents | (options.keep_owners ? uint32_t{proto::kTreeKeepOwners} : 0u);
  return send_tree(connect_for_call(), req, source, limits_for(options), options.progress);
}

TreeCopyStats Sandbox::get_tree(const std::string& path, TreeSink& sink, const CopyOptions& options) {
  const TreeLimits limits = limits_for(options);
  proto::GetTreeRequest req;
  req.path = path;
  req.user = options.user;
  req.max_bytes = limits.max_bytes;
  req.flags = options.follow_root ? uint32_t{proto::kTreeFollowRoot} : 0u;
  return receive_tree(connect_for_call(), req, sink, limits, options.progress);
}

TreeCopyStats Sandbox::copy_in(const std::string& host_path, const std::string& path, const CopyOptions& options) {
  owner_checked()->check_not_on_loop("copy_in");
  check_host_path(host_path, "host_path");
  check_inside_path(path, "path");
  return with_context("copy \"" + host_path + "\" into sandbox " + id() + " at \"" + path + "\"", [&] {
    HostTreeOptions h;
    h.follow_root = options.follow_root;
    auto source = host_dir_source(host_path, h);
    return put_tree(*source, path, options);
  });
}

TreeCopyStats Sandbox::copy_out(const std::string& path, const std::string& host_path, const CopyOptions& options) {
  owner_checked()->check_not_on_loop("copy_out");
  check_inside_path(path, "path");
  check_host_path(host_path, "host_path");
  return with_context("copy \"" + path + "\" out of sandbox " + id() + " to \"" + host_path + "\"", [&] {
    HostTreeOptions h;
    h.keep_owners = options.keep_owners;
    h.outside_links = options.outside_links;
    // The destination is opened first, so a bad one fails before the agent walks anything (missing parents
    // are made, as `mkdir -p` would).
    auto sink = host_dir_sink(host_path, h);
    return get_tree(path, *sink, options);
  });
}

TreeCopyStats Sandbox::put_archive(int fd, const std::string& path, const CopyOptions& options) {
  owner_checked()->check_not_on_loop("put_archive");
  check_inside_path(path, "path");
  if (fd < 0) throw Error(Code::kInvalidArgument, "invalid copy field 'fd': " + std::to_string(fd));
  return with_context("unpack an archive into sandbox " + id() + " at \"" + path + "\"", [&] {
    auto source = tar_source(fd, "archive (fd " + std::to_string(fd) + ")");
    return put_tree(*source, path, options);
  });
}

TreeCopyStats Sandbox::get_archive(const std::string& path, int fd, const CopyOptions& options) {
  owner_checked()->check_not_on_loop("get_archive");
  check_inside_path(path, "path");
  if (fd < 0) throw Error(Code::kInvalidArgument, "invalid copy field 'fd': " + std::to_string(fd));
  return with_context("archive \"" + path + "\" of sandbox " + id(), [&] {
    auto sink = tar_sink(fd, "archive (fd " + std::to_string(fd) + ")", last_component(path));
    return get_tree(path, *sink, options);
  });
}

}  // namespace sandlet
