// C ABI: error objects, status code names, sandlet_free. Depends on nothing but sandlet.h, so that the
// out-of-memory test (test/abi) can build it into a test binary and make its allocation fail for real.
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <new>

#include "capi/error_object.hpp"

namespace {
sandlet_error g_out_of_memory{SANDLET_RESOURCE_EXHAUSTED, ENOMEM, "out of memory"};
}  // namespace

sandlet_error_t* sandlet::capi::out_of_memory_error() noexcept { return &g_out_of_memory; }
bool sandlet::capi::is_static_error(const sandlet_error_t* err) noexcept { return err == &g_out_of_memory; }

sandlet_error_t* sandlet::capi::make_error(sandlet_code_t code, std::string_view message, int err_no) noexcept {
  void* block = std::malloc(sizeof(sandlet_error) + message.size() + 1);
  if (!block) return out_of_memory_error();
  char* text = static_cast<char*>(block) + sizeof(sandlet_error);
  std::memcpy(text, message.data(), message.size());
  text[message.size()] = '\0';
  return new (block) sandlet_error{code, err_no, text};
}

extern "C" {

SANDLET_API sandlet_code_t sandlet_error_code(const sandlet_error_t* err) { return err ? err->code : SANDLET_OK; }
SANDLET_API const char* sandlet_error_message(const sandlet_error_t* err) { return err ? err->message : ""; }
SANDLET_API int sandlet_error_errno(const sandlet_error_t* err) { return err ? err->err_no : 0; }
SANDLET_API void sandlet_error_delete(sandlet_error_t* err) {
  if (!sandlet::capi::is_static_error(err)) std::free(err);  // trivially destructible: free is the delete
}
SANDLET_API void sandlet_free(void* ptr) { std::free(ptr); }

SANDLET_API const char* sandlet_code_name(sandlet_code_t code) {
  switch (code) {
    case SANDLET_OK: return "OK";
    case SANDLET_CANCELLED: return "CANCELLED";
    case SANDLET_UNKNOWN: return "UNKNOWN";
    case SANDLET_INVALID_ARGUMENT: return "INVALID_ARGUMENT";
    case SANDLET_DEADLINE_EXCEEDED: return "DEADLINE_EXCEEDED";
    case SANDLET_NOT_FOUND: return "NOT_FOUND";
    case SANDLET_ALREADY_EXISTS: return "ALREADY_EXISTS";
    case SANDLET_PERMISSION_DENIED: return "PERMISSION_DENIED";
    case SANDLET_RESOURCE_EXHAUSTED: return "RESOURCE_EXHAUSTED";
    case SANDLET_FAILED_PRECONDITION: return "FAILED_PRECONDITION";
    case SANDLET_ABORTED: return "ABORTED";
    case SANDLET_OUT_OF_RANGE: return "OUT_OF_RANGE";
    case SANDLET_UNIMPLEMENTED: return "UNIMPLEMENTED";
    case SANDLET_INTERNAL: return "INTERNAL";
    case SANDLET_UNAVAILABLE: return "UNAVAILABLE";
    case SANDLET_DATA_LOSS: return "DATA_LOSS";
  }
  return "UNKNOWN";
}

}  // extern "C"
