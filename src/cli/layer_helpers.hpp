// What the store's command groups share (layer_env.cpp: layer and env; store.cpp: layer push/pull and
// loader): usage texts of a group's commands, sub-command dispatch, and the formatting of digests, sizes
// and the library's JSON documents.
#pragma once
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "cli.hpp"
#include "json.hpp"

namespace sandlet::cli {

// "Usage: sandlet <group> <synopsis>", the text, then the options and the --root/--help lines.
std::string group_usage(std::string_view group, std::string_view synopsis, std::string_view text,
                        std::string_view options);

using SubFn = int (*)(CommandContext&, const std::vector<std::string>&);
struct Sub {
  std::string_view name;
  SubFn fn;
};
// `sandlet <group> [--root DIR] SUB ARGS...`: no SUB prints `usage` to stderr (exit 2), --help to stdout.
int dispatch_sub(CommandContext& ctx, const std::vector<std::string>& args, std::string_view usage,
                 std::initializer_list<Sub> subs);

// A JSON document the library returned (freed here), parsed; null for NULL.
json::bj::value take_json(char* raw);
// The same for the C++ wrapper's strings.
json::bj::value parse_result(const std::string& text);

std::string human_size(double bytes);       // "1.5 MiB"
std::string short_digest(const std::string& digest);  // "sha256:0123456789ab..." -> "0123456789ab"
std::string full_digest(const std::string& digest);   // the hex alone -> "sha256:<hex>"
void require_no_operands(const ParsedArgs& a);

// `sandlet layer push` and `sandlet layer pull` (store.cpp).
int layer_push(CommandContext& ctx, const std::vector<std::string>& args);
int layer_pull(CommandContext& ctx, const std::vector<std::string>& args);

}  // namespace sandlet::cli
