// Which store a push or pull talks to: the caller's, else the runtime's option, else $SANDLET_STORE.
// Kept apart from the store client so that "no store at all" is refused the same way whichever client
// (directory, HTTP, S3) would have served the URL; the URL's syntax is the client's to check.
#pragma once
#include <string>

#include "runtime/runtime.hpp"

namespace sandlet {

// `given` "" = not given. Returns a non-empty URL; throws INVALID_ARGUMENT when none of the three is set.
std::string resolve_store_url(const RuntimeOptions& options, const std::string& given);

}  // namespace sandlet
