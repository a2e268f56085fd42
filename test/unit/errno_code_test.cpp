// The one errno -> status code table (common/errno_code.hpp), shared by the host and the in-sandbox init.
#include <catch2/catch.hpp>

#include <cerrno>

#include "common/error.hpp"

using sandlet::Code;
using sandlet::code_from_errno;

TEST_CASE("a kernel EINVAL is INTERNAL, never the user's INVALID_ARGUMENT", "[errors]") {
  CHECK(code_from_errno(EINVAL) == Code::kInternal);
  for (int e = 0; e < 4096; ++e) {
    INFO("errno " << e);
    CHECK(code_from_errno(e) != Code::kInvalidArgument);
    CHECK(code_from_errno(e) != Code::kOk);  // a failure is never success, not even without an errno
  }
}

TEST_CASE("file errors map as the table says", "[errors]") {
  CHECK(code_from_errno(ENOENT) == Code::kNotFound);
  CHECK(code_from_errno(ENOTDIR) == Code::kNotFound);
  CHECK(code_from_errno(EISDIR) == Code::kFailedPrecondition);
  CHECK(code_from_errno(EACCES) == Code::kPermissionDenied);
  CHECK(code_from_errno(EPERM) == Code::kPermissionDenied);
  CHECK(code_from_errno(EROFS) == Code::kPermissionDenied);
  CHECK(code_from_errno(EEXIST) == Code::kAlreadyExists);
  CHECK(code_from_errno(ENOSPC) == Code::kResourceExhausted);
  CHECK(code_from_errno(EDQUOT) == Code::kResourceExhausted);
  CHECK(code_from_errno(EFBIG) == Code::kOutOfRange);
  CHECK(code_from_errno(ENAMETOOLONG) == Code::kOutOfRange);
  CHECK(code_from_errno(EIO) == Code::kDataLoss);
}

TEST_CASE("process and connection errors map as the table says", "[errors]") {
  CHECK(code_from_errno(EAGAIN) == Code::kResourceExhausted);  // fork at the pids limit
  CHECK(code_from_errno(ENOMEM) == Code::kResourceExhausted);
  CHECK(code_from_errno(E2BIG) == Code::kOutOfRange);
  CHECK(code_from_errno(ENOEXEC) == Code::kFailedPrecondition);
  CHECK(code_from_errno(ESRCH) == Code::kNotFound);
  CHECK(code_from_errno(ECONNREFUSED) == Code::kUnavailable);
  CHECK(code_from_errno(ECONNRESET) == Code::kUnavailable);
  CHECK(code_from_errno(EPIPE) == Code::kUnavailable);
  CHECK(code_from_errno(ENOSYS) == Code::kUnimplemented);
  CHECK(code_from_errno(EOPNOTSUPP) == Code::kUnimplemented);
  CHECK(code_from_errno(ETIMEDOUT) == Code::kDeadlineExceeded);
  CHECK(code_from_errno(ECANCELED) == Code::kCancelled);
  CHECK(code_from_errno(EBADF) == Code::kInternal);
}

TEST_CASE("throw_errno carries the errno and the table's code", "[errors]") {
  bool thrown = false;
  try {
    sandlet::throw_errno("open \"/x\"", EISDIR);
  } catch (const sandlet::Error& e) {
    thrown = true;
    CHECK(e.code() == Code::kFailedPrecondition);
    CHECK(e.err_no() == EISDIR);
    CHECK(std::string(e.what()) == "open \"/x\": Is a directory (errno 21)");
  }
  CHECK(thrown);
}
