// A small hand-written command-line option parser (no dependency): GNU-style long options
// (--name VALUE, --name=VALUE), single-letter short options (-i, -e VALUE, -eVALUE, bundled flags -ih),
// and "--" ending the options.
#pragma once
#include <map>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace sandlet::cli {

// A usage mistake: reported as "sandlet: <command>: <message>" with a hint, exit status 2.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct OptionDef {
  std::string_view name;   // long name without the dashes, e.g. "layer"
  char short_name;         // 0 when there is none
  bool takes_value;
};

enum class OperandMode {
  kStopAtFirst,  // options end at the first operand (run/exec: what follows is the command line)
  kPermute,      // options and operands may be mixed (rm, cp, ps, gc)
};

class ParsedArgs {
 public:
  bool has(std::string_view name) const { return values_.count(std::string(name)) != 0; }
  // The last value given for an option (later flags override earlier ones), or nullptr.
  const std::string* last(std::string_view name) const;
  // Every value given for a repeatable option, in order.
  const std::vector<std::string>& all(std::string_view name) const;

  // Operands in order. In kStopAtFirst mode everything after the first operand is kept verbatim,
  // including a later "--"; a "--" that ended the options is consumed.
  std::vector<std::string> operands;

 private:
  friend ParsedArgs parse_args(const std::vector<OptionDef>&, const std::vector<std::string>&, OperandMode);
  std::map<std::string, std::vector<std::string>> values_;  // flags without a value hold one ""
};

// Throws UsageError for an unknown option or a missing value.
ParsedArgs parse_args(const std::vector<OptionDef>& defs, const std::vector<std::string>& args, OperandMode mode);

}  // namespace sandlet::cli
