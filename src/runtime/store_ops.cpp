// Push, pull and the loader's status (sandlet_store.h).
#include "common/error.hpp"
#include "runtime/runtime.hpp"

namespace sandlet {

std::string Runtime::layer_push(const std::string& ref, const std::string& store) {
  throw Error(Code::kUnimplemented, "layer push: not built yet");
}

std::string Runtime::layer_pull(const std::string& ref, const std::string& store, bool lazy) {
  throw Error(Code::kUnimplemented, "layer pull: not built yet");
}

std::string Runtime::loader_status() { throw Error(Code::kUnimplemented, "loader status: not built yet"); }

}  // namespace sandlet
