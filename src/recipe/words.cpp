// Word splitting and variable substitution of recipe instructions (the rules in recipe.hpp).
#include <cctype>

#include "recipe/recipe.hpp"
#include "common/error.hpp"

namespace sandlet::build {
namespace {

bool blank(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
bool name_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

class Lexer {
 public:
  Lexer(std::string_view s, const Vars* vars, const std::string& recipe, size_t line)
      : s_(s), vars_(vars), recipe_(recipe), line_(line) {}

  std::vector<std::string> words(bool split) {
    std::vector<std::string> out;
    std::string cur;
    bool in_word = false;
    while (i_ < s_.size()) {
      char c = s_[i_];
      if (split && blank(c)) {
        if (in_word) out.push_back(std::move(cur));
        cur.clear();
        in_word = false;
        ++i_;
        continue;
      }
      in_word = true;
      if (c == '\'') {
        size_t end = s_.find('\'', i_ + 1);
        if (end == std::string_view::npos) refuse(recipe_, line_, "unterminated single quote");
        cur.append(s_.substr(i_ + 1, end - i_ - 1));
        i_ = end + 1;
      } else if (c == '"') {
        ++i_;
        double_quoted(cur);
      } else if (c == '\\') {
        if (i_ + 1 < s_.size()) cur += s_[i_ + 1];
        i_ += 2;
      } else if (c == '$' && vars_) {
        cur += dollar();
      } else {
        cur += c;
        ++i_;
      }
    }
    if (in_word) out.push_back(std::move(cur));
    return out;
  }

 private:
  void double_quoted(std::string& cur) {
    while (true) {
      if (i_ >= s_.size()) refuse(recipe_, line_, "unterminated double quote");
      char c = s_[i_];
      if (c == '"') {
        ++i_;
        return;
      }
      if (c == '\\' && i_ + 1 < s_.size() && (s_[i_ + 1] == '"' || s_[i_ + 1] == '\\' || s_[i_ + 1] == '$')) {
        cur += s_[i_ + 1];
        i_ += 2;
      } else if (c == '$' && vars_) {
        cur += dollar();
      } else {
        cur += c;
        ++i_;
      }
    }
  }

  std::string lookup(const std::string& name, bool* set) const {
    auto it = vars_->find(name);
    *set = it != vars_->end();
    return *set ? it->second : std::string();
  }

  // At a '$': $NAME, ${NAME}, ${NAME:-word}, ${NAME:+word}; a lone '$' stays.
  std::string dollar() {
    ++i_;
    if (i_ < s_.size() && name_start(s_[i_])) {
      size_t b = i_;
      while (i_ < s_.size() && name_char(s_[i_])) ++i_;
      bool set;
      return lookup(std::string(s_.substr(b, i_ - b)), &set);
    }
    if (i_ >= s_.size() || s_[i_] != '{') return "$";
    size_t close = s_.find('}', i_);
    if (close == std::string_view::npos) refuse(recipe_, line_, "unterminated ${...} in '" + std::string(s_) + "'");
    std::string_view body = s_.substr(i_ + 1, close - i_ - 1);
    i_ = close + 1;
    size_t n = 0;
    while (n < body.size() && name_char(body[n])) ++n;
    if (n == 0 || !name_start(body[0])) refuse(recipe_, line_, "bad substitution '${" + std::string(body) + "}'");
    bool set;
    std::string value = lookup(std::string(body.substr(0, n)), &set);
    std::string_view op = body.substr(n);
    if (op.empty()) return value;
    if (op.size() >= 2 && op[0] == ':' && (op[1] == '-' || op[1] == '+')) {
      // The word is itself substituted (not split).
      auto words = Lexer(op.substr(2), vars_, recipe_, line_).words(false);
      std::string word = words.empty() ? std::string() : words[0];
      bool non_empty = set && !value.empty();
      if (op[1] == '-') return non_empty ? value : word;
      return non_empty ? word : std::string();
    }
    refuse(recipe_, line_, "unsupported substitution '${" + std::string(body) + "}' (supported: ${NAME}, ${NAME:-word}, ${NAME:+word})");
  }

  std::string_view s_;
  const Vars* vars_;
  const std::string& recipe_;
  size_t line_;
  size_t i_ = 0;
};

}  // namespace

std::vector<std::string> lex_words(std::string_view s, const Vars* vars, const std::string& recipe, size_t line) {
  return Lexer(s, vars, recipe, line).words(true);
}

std::string expand_text(std::string_view s, const Vars& vars, const std::string& recipe, size_t line) {
  auto w = Lexer(s, &vars, recipe, line).words(false);
  return w.empty() ? std::string() : w[0];
}

std::vector<Pair> parse_pairs(const Instruction& in, const Vars& vars, const std::string& recipe) {
  std::vector<Pair> out;
  std::string_view rest = in.rest;
  // Legacy form: ENV KEY value... (first word without '=').
  std::vector<std::string> raw = lex_words(rest, nullptr, recipe, in.line);
  if (raw.empty()) refuse(recipe, in.line, in.keyword + " needs at least one " + (in.kind == Kind::kArg ? "NAME" : "KEY=VALUE"));
  if (in.kind != Kind::kArg && raw[0].find('=') == std::string::npos) {
    size_t b = 0;
    while (b < rest.size() && blank(rest[b])) ++b;
    size_t e = b;
    while (e < rest.size() && !blank(rest[e])) ++e;
    size_t v = e;
    while (v < rest.size() && blank(rest[v])) ++v;
    if (v >= rest.size()) refuse(recipe, in.line, in.keyword + " " + raw[0] + ": expected KEY=VALUE or KEY VALUE");
    out.push_back({std::string(rest.substr(b, e - b)), expand_text(rest.substr(v), vars, recipe, in.line), true});
    return out;
  }
  // Each word split at its first unquoted '=' (quotes are removed by the lexer, so split the expanded word:
  // a key cannot contain '=' or quotes anyway).
  for (const std::string& w : lex_words(rest, &vars, recipe, in.line)) {
    size_t eq = w.find('=');
    if (eq == std::string::npos) {
      if (in.kind != Kind::kArg) refuse(recipe, in.line, in.keyword + ": expected KEY=VALUE, got '" + w + "'");
      out.push_back({w, "", false});
    } else {
      out.push_back({w.substr(0, eq), w.substr(eq + 1), true});
    }
    if (out.back().key.empty()) refuse(recipe, in.line, in.keyword + ": empty name in '" + w + "'");
  }
  return out;
}

}  // namespace sandlet::build
