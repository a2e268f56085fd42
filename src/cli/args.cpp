#include "args.hpp"

namespace sandlet::cli {

const std::string* ParsedArgs::last(std::string_view name) const {
  auto it = values_.find(std::string(name));
  return it == values_.end() || it->second.empty() ? nullptr : &it->second.back();
}

const std::vector<std::string>& ParsedArgs::all(std::string_view name) const {
  static const std::vector<std::string> kEmpty;
  auto it = values_.find(std::string(name));
  return it == values_.end() ? kEmpty : it->second;
}

namespace {

const OptionDef* find_long(const std::vector<OptionDef>& defs, std::string_view name) {
  for (const auto& d : defs)
    if (d.name == name) return &d;
  return nullptr;
}

const OptionDef* find_short(const std::vector<OptionDef>& defs, char c) {
  for (const auto& d : defs)
    if (d.short_name != 0 && d.short_name == c) return &d;
  return nullptr;
}

}  // namespace

ParsedArgs parse_args(const std::vector<OptionDef>& defs, const std::vector<std::string>& args, OperandMode mode) {
  ParsedArgs out;
  size_t i = 0;
  auto take_value = [&](const std::string& shown) -> std::string {
    if (i + 1 >= args.size()) throw UsageError("option '" + shown + "' requires a value");
    return args[++i];
  };
  for (; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--") {
      out.operands.insert(out.operands.end(), args.begin() + static_cast<long>(i) + 1, args.end());
      break;
    }
    if (a.size() > 2 && a[0] == '-' && a[1] == '-') {
      const size_t eq = a.find('=');
      const std::string name = a.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
      const OptionDef* d = find_long(defs, name);
      if (d == nullptr) throw UsageError("unknown option '--" + name + "'");
      if (!d->takes_value) {
        if (eq != std::string::npos) throw UsageError("option '--" + name + "' takes no value");
        out.values_[name].emplace_back();
      } else if (eq != std::string::npos) {
        out.values_[name].push_back(a.substr(eq + 1));
      } else {
        out.values_[name].push_back(take_value("--" + name));
      }
      continue;
    }
    if (a.size() > 1 && a[0] == '-') {
      // Short options; flags may be bundled ("-ih"); a value may be attached ("-eK=V") or follow.
      for (size_t j = 1; j < a.size(); ++j) {
        const OptionDef* d = find_short(defs, a[j]);
        if (d == nullptr) throw UsageError(std::string("unknown option '-") + a[j] + "'");
        const std::string name(d->name);
        if (!d->takes_value) {
          out.values_[name].emplace_back();
          continue;
        }
        if (j + 1 < a.size())
          out.values_[name].push_back(a.substr(j + 1));
        else
          out.values_[name].push_back(take_value(std::string("-") + a[j]));
        break;
      }
      continue;
    }
    // An operand ("-" alone counts as one: stdin/stdout for cp).
    if (mode == OperandMode::kStopAtFirst) {
      out.operands.insert(out.operands.end(), args.begin() + static_cast<long>(i), args.end());
      break;
    }
    out.operands.push_back(a);
  }
  return out;
}

}  // namespace sandlet::cli
