// Parsing a recipe: lines, continuations, comments, directives, instructions and their flags.
#include "recipe/recipe.hpp"

#include <boost/json.hpp>

#include <algorithm>
#include <cctype>

#include "common/error.hpp"

namespace sandlet::build {
namespace {

std::string upper(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

// A line ending in a backslash (blanks after it allowed) continues on the next one.
bool continues(std::string_view& line) {
  std::string_view t = line;
  while (!t.empty() && (t.back() == ' ' || t.back() == '\t' || t.back() == '\r')) t.remove_suffix(1);
  if (t.empty() || t.back() != '\\') return false;
  line = t.substr(0, t.size() - 1);
  return true;
}

// Why an instruction outside the subset is refused (empty: not a Dockerfile instruction at all).
std::string unsupported_reason(const std::string& kw) {
  if (kw == "EXPOSE") return "an environment has no ports; a sandbox publishes them through its network policy";
  if (kw == "VOLUME") return "a sandbox's files are its layers and its writable layer";
  if (kw == "HEALTHCHECK") return "sandboxes have no health checks";
  if (kw == "ONBUILD") return "there are no build triggers";
  if (kw == "STOPSIGNAL") return "an environment has no stop signal";
  if (kw == "SHELL") return "RUN's shell form always runs /bin/sh -c; use the exec form for another shell";
  if (kw == "MAINTAINER") return "deprecated; use LABEL";
  return "";
}

// Splits leading `--flag[=value]` words off `rest`.
std::vector<std::pair<std::string, std::string>> take_flags(std::string_view& rest) {
  std::vector<std::pair<std::string, std::string>> flags;
  while (rest.substr(0, 2) == "--") {
    size_t end = 0;
    while (end < rest.size() && rest[end] != ' ' && rest[end] != '\t') ++end;
    std::string word(rest.substr(2, end - 2));
    size_t eq = word.find('=');
    flags.emplace_back(word.substr(0, eq), eq == std::string::npos ? "" : word.substr(eq + 1));
    rest = trim(rest.substr(end));
  }
  return flags;
}

// A JSON array of strings, or nullopt when `s` is not one (then the shell / whitespace form applies).
bool json_strings(std::string_view s, std::vector<std::string>& out) {
  if (s.empty() || s.front() != '[') return false;
  boost::system::error_code ec;
  boost::json::value v = boost::json::parse(s, ec);
  if (ec || !v.is_array()) return false;
  out.clear();
  for (const auto& e : v.as_array()) {
    if (!e.is_string()) return false;
    out.emplace_back(e.as_string());
  }
  return true;
}

bool is_url(const std::string& s) {
  return s.find("://") != std::string::npos || s.rfind("git@", 0) == 0;
}

bool archive_name(const std::string& s) {
  static const char* const kSuffixes[] = {".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tbz2", ".tar.xz", ".txz",
                                          ".tar.zst", ".tzst", ".gz", ".bz2", ".xz", ".zst"};
  std::string low = s;
  std::transform(low.begin(), low.end(), low.begin(), [](unsigned char c) { return std::tolower(c); });
  for (const char* suf : kSuffixes) {
    std::string_view f(suf);
    if (low.size() > f.size() && low.compare(low.size() - f.size(), f.size(), f) == 0) return true;
  }
  return false;
}

class Parser {
 public:
  explicit Parser(const std::string& name) : name_(name) {}

  void instruction(size_t line, std::string_view joined, Recipe& out) {
    joined = trim(joined);
    size_t sp = 0;
    while (sp < joined.size() && joined[sp] != ' ' && joined[sp] != '\t') ++sp;
    Instruction in;
    in.line = line;
    in.keyword = upper(joined.substr(0, sp));
    in.text = std::string(joined);
    std::string_view rest = trim(joined.substr(sp));
    const std::string& kw = in.keyword;

    if (kw == "CMD" || kw == "ENTRYPOINT") {
      if (!seen_from_) refuse(name_, line, kw + " before FROM (only ARG may come before FROM)");
      in.kind = Kind::kIgnored;
      out.notes.push_back(where(line) + kw + " ignored: an environment has no default command (sandboxes run what exec asks)");
      push(in, out);
      return;
    }
    if (kw == "ARG") in.kind = Kind::kArg;
    else if (kw == "FROM") in.kind = Kind::kFrom;
    else if (kw == "RUN") in.kind = Kind::kRun;
    else if (kw == "COPY") in.kind = Kind::kCopy;
    else if (kw == "ADD") in.kind = Kind::kAdd;
    else if (kw == "ENV") in.kind = Kind::kEnv;
    else if (kw == "WORKDIR") in.kind = Kind::kWorkdir;
    else if (kw == "USER") in.kind = Kind::kUser;
    else if (kw == "LABEL") in.kind = Kind::kLabel;
    else {
      std::string why = unsupported_reason(kw);
      if (why.empty()) refuse(name_, line, "unknown instruction '" + std::string(joined.substr(0, sp)) + "'");
      refuse(name_, line, kw + " is not supported (" + why + ")");
    }

    auto flags = take_flags(rest);
    for (const auto& [flag, value] : flags) accept_flag(in, flag, value);
    if (!in.secrets.empty()) check_secret_mounts(in.secrets, where(line) + "RUN --mount");
    in.rest = std::string(rest);
    if (rest.empty()) refuse(name_, line, kw + " needs arguments");

    switch (in.kind) {
      case Kind::kFrom: from(in); break;
      case Kind::kRun:
        in.exec_form = json_strings(rest, in.argv);
        if (in.exec_form && in.argv.empty()) refuse(name_, line, "RUN [] has no command");
        if (!in.exec_form && heredoc(rest)) refuse(name_, line, "RUN with a here-document (<<WORD) is not supported");
        break;
      case Kind::kCopy:
      case Kind::kAdd: copy(in); break;
      case Kind::kUser:
      case Kind::kWorkdir:
        if (lex_words(rest, nullptr, name_, line).size() != 1) refuse(name_, line, kw + " takes exactly one value");
        break;
      default: break;
    }
    if (in.kind != Kind::kArg && in.kind != Kind::kFrom && !seen_from_)
      refuse(name_, line, kw + " before FROM (only ARG may come before FROM)");
    push(in, out);
  }

  void finish(size_t last_line) const {
    if (!seen_from_) refuse(name_, last_line, "no FROM instruction (a recipe starts FROM a layer or environment)");
  }

  std::string where(size_t line) const { return name_ + ":" + std::to_string(line) + ": "; }

 private:
  void push(Instruction& in, Recipe& out) { out.instructions.push_back(std::move(in)); }

  void accept_flag(Instruction& in, const std::string& flag, const std::string& value) {
    const std::string& kw = in.keyword;
    if ((in.kind == Kind::kCopy || in.kind == Kind::kAdd) && flag == "chown" && !value.empty()) {
      in.chown = value;
      return;
    }
    if ((in.kind == Kind::kCopy || in.kind == Kind::kAdd) && flag == "chmod" && !value.empty()) {
      if (value.size() > 4 || value.find_first_not_of("01234567") != std::string::npos)
        refuse(name_, in.line, kw + " --chmod=" + value + ": only an octal mode is supported");
      in.chmod = value;
      return;
    }
    if (in.kind == Kind::kRun && flag == "network") {
      run_network(in, value);
      return;
    }
    if (in.kind == Kind::kRun && flag == "mount") {
      in.secrets.push_back(parse_secret_mount(value, where(in.line) + "RUN --mount=" + value));
      return;
    }
    std::string why;
    if (flag == "from") why = "multi-stage builds: copy from the context only";
    else if (flag == "platform") why = "a build runs on this host's platform";
    else if (flag == "mount") why = "only RUN takes --mount (type=secret)";
    else if (flag == "network") why = "only RUN takes --network";
    else if (flag == "security") why = "build steps run with the sandbox's own isolation";
    else why = "unknown flag";
    refuse(name_, in.line, kw + " --" + flag + " is not supported (" + why + ")");
  }

  // BuildKit's RUN --network: "default" is the build's policy (itself "none" unless the builder gave one),
  // "none" takes it away for this step. "host" would bypass the sandbox's own network namespace.
  void run_network(Instruction& in, const std::string& value) {
    if (!in.network.empty()) refuse(name_, in.line, "RUN --network given twice");
    if (value == "none" || value == "default") {
      in.network = value;
      return;
    }
    if (value == "host")
      refuse(name_, in.line, "RUN --network=host is not supported (a step never shares the host's network; give the "
                             "build a policy with --allow or --network and use RUN --network=default)");
    refuse(name_, in.line, "RUN --network=" + value + ": unknown value (none or default)");
  }

  void from(Instruction& in) {
    if (seen_from_) refuse(name_, in.line, "a second FROM is not supported (multi-stage builds)");
    seen_from_ = true;
    auto w = lex_words(in.rest, nullptr, name_, in.line);
    if (w.size() == 3 && upper(w[1]) == "AS") refuse(name_, in.line, "FROM ... AS is not supported (multi-stage builds)");
    if (w.size() != 1) refuse(name_, in.line, "FROM takes one layer or environment reference");
    if (w[0] == "scratch")
      refuse(name_, in.line, "FROM scratch is not supported (every step runs in a sandbox, which needs a root filesystem)");
  }

  void copy(Instruction& in) {
    in.json_form = json_strings(in.rest, in.words);
    if (!in.json_form) in.words = lex_words(in.rest, nullptr, name_, in.line);
    if (in.words.size() < 2) refuse(name_, in.line, in.keyword + " needs at least one source and a destination");
    if (heredoc(in.rest)) refuse(name_, in.line, in.keyword + " with a here-document (<<WORD) is not supported");
    if (in.kind != Kind::kAdd) return;
    for (size_t i = 0; i + 1 < in.words.size(); ++i) {
      const std::string& src = in.words[i];
      if (is_url(src))
        refuse(name_, in.line, "ADD of a URL is not supported (" + src + "): a build reads files of its context only");
      if (archive_name(src))
        refuse(name_, in.line, "ADD would unpack the archive " + src +
                                   ": archive extraction is not supported (COPY it and unpack it in a RUN)");
    }
  }

  // `<<WORD` / `<<-WORD` / `<<"WORD"` at the start of a word.
  static bool heredoc(std::string_view s) {
    for (size_t i = 0; (i = s.find("<<", i)) != std::string_view::npos; i += 2) {
      if (i > 0 && s[i - 1] != ' ' && s[i - 1] != '\t') continue;
      size_t j = i + 2;
      if (j < s.size() && s[j] == '-') ++j;
      if (j < s.size() && (s[j] == '"' || s[j] == '\'')) ++j;
      if (j < s.size() && (std::isalpha(static_cast<unsigned char>(s[j])) || s[j] == '_')) return true;
    }
    return false;
  }

  const std::string& name_;
  bool seen_from_ = false;
};

}  // namespace

void refuse(const std::string& recipe, size_t line, const std::string& why) {
  throw Error(Code::kInvalidArgument, recipe + ":" + std::to_string(line) + ": " + why);
}

Recipe parse_recipe(std::string_view text, const std::string& name) {
  Recipe out;
  out.name = name;
  if (text.find('\0') != std::string_view::npos) refuse(name, 1, "the recipe is not text (it holds a NUL byte)");
  Parser p(name);
  std::string joined;
  size_t start = 0;       // line of the instruction being joined (0: none)
  bool directives = true;  // parser directives only before anything else
  size_t line_no = 0;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t nl = text.find('\n', pos);
    std::string_view line = text.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
    pos = nl == std::string_view::npos ? text.size() + 1 : nl + 1;
    ++line_no;
    std::string_view t = trim(line);
    if (!t.empty() && t.front() == '#') {
      if (directives && start == 0) {
        std::string_view d = trim(t.substr(1));
        size_t eq = d.find('=');
        std::string key = eq == std::string_view::npos ? "" : upper(trim(d.substr(0, eq)));
        std::string value = eq == std::string_view::npos ? "" : std::string(trim(d.substr(eq + 1)));
        if (key == "ESCAPE" && value != "\\")
          refuse(name, line_no, "parser directive escape=" + value + " is not supported (the escape character is \\)");
        if (key.empty() || (key != "ESCAPE" && key != "SYNTAX" && key != "CHECK")) directives = false;
      }
      continue;  // comments are dropped, also inside a continued instruction
    }
    if (t.empty()) continue;
    directives = false;
    if (start == 0) start = line_no;
    bool more = continues(line);
    joined.append(line);
    if (more && pos <= text.size()) continue;
    p.instruction(start, joined, out);
    joined.clear();
    start = 0;
  }
  p.finish(std::max<size_t>(1, line_no));
  return out;
}

}  // namespace sandlet::build
