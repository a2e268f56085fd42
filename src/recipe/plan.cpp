// Substitution and state tracking over a parsed recipe (plan.hpp).
#include "recipe/plan.hpp"

#include <filesystem>
#include <set>

#include "common/error.hpp"
#include "spec/spec.hpp"

namespace sandlet::build {
namespace {

// Runs a spec setter on a scratch spec so that a value is checked exactly as a sandbox's would be; its
// error is reported at the recipe's line.
template <class F>
void check_as_spec(const std::string& recipe, size_t line, const std::string& what, F&& set) {
  try {
    Spec scratch;
    set(scratch);
  } catch (const Error& e) {
    refuse(recipe, line, what + ": " + e.what());
  }
}

// Values of ARGs declared before FROM (the "global" scope), and which build args any ARG consumed.
struct Scopes {
  Vars global;                 // set ones only
  std::set<std::string> global_declared;
  std::set<std::string> used;  // build args some ARG declares
};

void declare(const Pair& p, const Vars& build_args, const Vars* fallback, Vars& into, Scopes& s) {
  s.used.insert(p.key);
  if (auto it = build_args.find(p.key); it != build_args.end()) {
    into[p.key] = it->second;
  } else if (p.has_value) {
    into[p.key] = p.value;
  } else if (fallback && fallback->count(p.key)) {
    into[p.key] = fallback->at(p.key);
  } else {
    into.erase(p.key);  // declared, unset: expands to ""
  }
}

Scopes global_scope(const Recipe& r, const Vars& build_args) {
  Scopes s;
  for (const auto& in : r.instructions) {
    if (in.kind == Kind::kFrom) break;
    for (const Pair& p : parse_pairs(in, s.global, r.name)) {
      s.global_declared.insert(p.key);
      declare(p, build_args, nullptr, s.global, s);
    }
  }
  return s;
}

std::string join_workdir(const std::string& current, const std::string& value) {
  std::filesystem::path p = value.empty() || value[0] != '/' ? std::filesystem::path(current) / value : std::filesystem::path(value);
  std::string out = p.lexically_normal().string();
  while (out.size() > 1 && out.back() == '/') out.pop_back();
  return out;
}

}  // namespace

std::string from_reference(const Recipe& recipe, const Vars& build_args) {
  Scopes s = global_scope(recipe, build_args);
  for (const auto& in : recipe.instructions) {
    if (in.kind != Kind::kFrom) continue;
    auto w = lex_words(in.rest, &s.global, recipe.name, in.line);
    if (w.size() != 1 || w[0].empty()) refuse(recipe.name, in.line, "FROM " + in.rest + " expands to no reference");
    return w[0];
  }
  refuse(recipe.name, 1, "no FROM instruction");
}

Plan plan_recipe(const Recipe& recipe, const Vars& build_args, const State& base) {
  const std::string& name = recipe.name;
  Scopes scopes = global_scope(recipe, build_args);
  Plan plan;
  State state = base;
  if (state.workdir.empty()) state.workdir = "/";
  Vars args;  // ARGs declared after FROM (set ones)
  bool after_from = false;
  auto vars = [&] {
    Vars v = args;
    for (const auto& [k, val] : state.env) v[k] = val;  // ENV wins over ARG
    return v;
  };

  for (const Instruction& in : recipe.instructions) {
    Step st;
    st.kind = in.kind;
    st.line = in.line;
    st.text = in.text;
    switch (in.kind) {
      case Kind::kArg:
        if (after_from) {
          for (const Pair& p : parse_pairs(in, vars(), name)) {
            check_as_spec(name, in.line, "ARG " + p.key, [&](Spec& s) { spec_set_env(s, p.key, p.value); });
            declare(p, build_args, &scopes.global, args, scopes);
          }
        }
        break;
      case Kind::kFrom: {
        after_from = true;
        plan.from = from_reference(recipe, build_args);
        plan.from_line = in.line;
        break;
      }
      case Kind::kRun: {
        if (in.exec_form) {
          st.argv = in.argv;
        } else {
          st.argv = {"/bin/sh", "-c", in.rest};
        }
        st.secrets = in.secrets;
        st.no_network = in.network == "none";
        for (const auto& [k, v] : args)
          if (!state.env.count(k)) st.arg_env.push_back(k + "=" + v);
        break;
      }
      case Kind::kCopy:
      case Kind::kAdd: {
        Vars v = vars();
        // The whitespace form is lexed again with the variables (quotes and escapes apply once); JSON-form
        // words are substituted one by one and keep their blanks.
        std::vector<std::string> words;
        if (in.json_form) {
          for (const std::string& w : in.words) words.push_back(expand_text(w, v, name, in.line));
        } else {
          words = lex_words(in.rest, &v, name, in.line);
        }
        if (words.size() < 2) refuse(name, in.line, in.keyword + " needs at least one source and a destination");
        for (const std::string& w : words)
          if (w.empty()) refuse(name, in.line, in.keyword + ": an argument expands to nothing");
        st.dest = words.back();
        words.pop_back();
        st.sources = std::move(words);
        bool dir_dest = st.dest.back() == '/';
        st.dest = join_workdir(state.workdir, st.dest);
        if (dir_dest && st.dest != "/") st.dest += "/";
        if (st.sources.size() > 1 && st.dest.back() != '/')
          refuse(name, in.line, in.keyword + " with several sources needs a destination ending in '/'");
        if (!in.chown.empty()) {
          auto w = lex_words(in.chown, &v, name, in.line);
          st.chown = w.empty() ? "" : w[0];
          if (st.chown.empty() || st.chown.find_first_of(" \t'\"") != std::string::npos)
            refuse(name, in.line, in.keyword + " --chown=" + in.chown + ": expected USER[:GROUP]");
        }
        st.chmod = in.chmod;
        break;
      }
      case Kind::kEnv:
        for (const Pair& p : parse_pairs(in, vars(), name)) {
          check_as_spec(name, in.line, "ENV " + p.key, [&](Spec& s) { spec_set_env(s, p.key, p.value); });
          state.env[p.key] = p.value;
        }
        break;
      case Kind::kLabel:
        for (const Pair& p : parse_pairs(in, vars(), name)) plan.labels[p.key] = p.value;
        break;
      case Kind::kWorkdir: {
        Vars v = vars();
        auto w = lex_words(in.rest, &v, name, in.line);
        if (w.size() != 1 || w[0].empty()) refuse(name, in.line, "WORKDIR " + in.rest + " expands to no path");
        std::string dir = join_workdir(state.workdir, w[0]);
        check_as_spec(name, in.line, "WORKDIR " + dir, [&](Spec& s) { spec_set_workdir(s, dir); });
        state.workdir = dir;
        break;
      }
      case Kind::kUser: {
        Vars v = vars();
        auto w = lex_words(in.rest, &v, name, in.line);
        std::string user = w.size() == 1 ? w[0] : "";
        check_as_spec(name, in.line, "USER " + in.rest, [&](Spec& s) { spec_set_user(s, user); });
        state.user = user;
        break;
      }
      case Kind::kIgnored: break;
    }
    st.state = state;
    plan.steps.push_back(std::move(st));
  }
  for (const auto& [k, v] : build_args)
    if (!scopes.used.count(k)) plan.unused_build_args.push_back(k);
  return plan;
}

}  // namespace sandlet::build
