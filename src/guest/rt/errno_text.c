/* strerror() for sandlet-init's own C runtime: the usual Linux descriptions of the errors an init can
   meet; others read "Unknown error N". */
#include <errno.h>
#include <string.h>

typedef struct {
  int code;
  const char *text;
} ErrnoText;

static const ErrnoText kTexts[] = {
    {EPERM, "Operation not permitted"},
    {ENOENT, "No such file or directory"},
    {ESRCH, "No such process"},
    {EINTR, "Interrupted system call"},
    {EIO, "Input/output error"},
    {ENXIO, "No such device or address"},
    {E2BIG, "Argument list too long"},
    {ENOEXEC, "Exec format error"},
    {EBADF, "Bad file descriptor"},
    {ECHILD, "No child processes"},
    {EAGAIN, "Resource temporarily unavailable"},
    {ENOMEM, "Cannot allocate memory"},
    {EACCES, "Permission denied"},
    {EFAULT, "Bad address"},
    {EBUSY, "Device or resource busy"},
    {EEXIST, "File exists"},
    {EXDEV, "Invalid cross-device link"},
    {ENODEV, "No such device"},
    {ENOTDIR, "Not a directory"},
    {EISDIR, "Is a directory"},
    {EINVAL, "Invalid argument"},
    {ENFILE, "Too many open files in system"},
    {EMFILE, "Too many open files"},
    {ENOTTY, "Inappropriate ioctl for device"},
    {ETXTBSY, "Text file busy"},
    {EFBIG, "File too large"},
    {ENOSPC, "No space left on device"},
    {ESPIPE, "Illegal seek"},
    {EROFS, "Read-only file system"},
    {EMLINK, "Too many links"},
    {EPIPE, "Broken pipe"},
    {ERANGE, "Numerical result out of range"},
    {EDEADLK, "Resource deadlock avoided"},
    {ENAMETOOLONG, "File name too long"},
    {ENOSYS, "Function not implemented"},
    {ENOTEMPTY, "Directory not empty"},
    {ELOOP, "Too many levels of symbolic links"},
    {ENODATA, "No data available"},
    {EOVERFLOW, "Value too large for defined data type"},
    {ENOTSOCK, "Socket operation on non-socket"},
    {EOPNOTSUPP, "Operation not supported"},
    {EADDRINUSE, "Address already in use"},
    {ECONNRESET, "Connection reset by peer"},
    {ENOBUFS, "No buffer space available"},
    {ENOTCONN, "Transport endpoint is not connected"},
    {ETIMEDOUT, "Connection timed out"},
    {ECONNREFUSED, "Connection refused"},
    {EDQUOT, "Disk quota exceeded"},
    {ECANCELED, "Operation canceled"},
};

char *strerror(int e) {
  for (size_t i = 0; i < sizeof kTexts / sizeof kTexts[0]; i++)
    if (kTexts[i].code == e) return (char *)kTexts[i].text;
  static char unknown[32];
  const char *prefix = e < 0 ? "Unknown error -" : "Unknown error ";
  size_t len = 0;
  while (prefix[len]) {
    unknown[len] = prefix[len];
    len++;
  }
  char digits[12];
  int n = 0;
  unsigned v = e < 0 ? 0u - (unsigned)e : (unsigned)e;
  do digits[n++] = (char)('0' + v % 10);
  while ((v /= 10) != 0);
  while (n > 0) unknown[len++] = digits[--n];
  unknown[len] = '\0';
  return unknown;
}
