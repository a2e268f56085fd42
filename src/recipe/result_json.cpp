// BuildResult as JSON (the document sandlet_build returns; fields listed in sandlet.h).
#include <boost/json.hpp>

#include "recipe/builder.hpp"

namespace sandlet::build {

std::string BuildResult::to_json() const {
  namespace json = boost::json;
  json::object o;
  o["recipe"] = recipe;
  o["environment"] = environment;
  json::array ls;
  for (const auto& l : layers) ls.emplace_back(l);
  o["layers"] = std::move(ls);
  o["top"] = layers.empty() ? std::string() : layers.back();
  json::object env;
  for (const auto& [k, v] : state.env) env[k] = v;
  o["env"] = std::move(env);
  o["workdir"] = state.workdir;
  o["user"] = state.user;
  json::object lb;
  for (const auto& [k, v] : labels) lb[k] = v;
  o["labels"] = std::move(lb);
  json::array st;
  for (size_t i = 0; i < steps.size(); ++i) {
    json::object s;
    s["step"] = i + 1;
    s["line"] = steps[i].line;
    s["instruction"] = steps[i].instruction;
    s["cached"] = steps[i].cached;
    s["layer"] = steps[i].layer;
    st.push_back(std::move(s));
  }
  o["steps"] = std::move(st);
  o["cached_steps"] = cached_steps;
  o["sandboxes"] = sandboxes;
  json::array notes_a, unused;
  for (const auto& n : notes) notes_a.emplace_back(n);
  for (const auto& u : unused_build_args) unused.emplace_back(u);
  o["notes"] = std::move(notes_a);
  o["unused_build_args"] = std::move(unused);
  return json::serialize(o);
}

}  // namespace sandlet::build
