#include "runtime/store_url_choice.hpp"

#include <cstdlib>

#include "common/error.hpp"

namespace sandlet {

std::string resolve_store_url(const RuntimeOptions& options, const std::string& given) {
  if (!given.empty()) return given;
  if (!options.store.empty()) return options.store;
  // Read at each call, not at open: a long-lived runtime follows the caller's environment as a CLI does.
  if (const char* env = std::getenv("SANDLET_STORE"); env != nullptr && *env != '\0') return env;
  throw Error(Code::kInvalidArgument, "no store: pass one or set SANDLET_STORE");
}

}  // namespace sandlet
