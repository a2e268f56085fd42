#include "sys/loop_device.hpp"

#include <fcntl.h>
#include <linux/loop.h>
#include <sys/ioctl.h>

#include <cstring>

#include "common/error.hpp"
#include "sys/fs_util.hpp"

namespace sandlet::sys {
namespace {

constexpr const char* kControl = "/dev/loop-control";

UniqueFd open_control() {
  UniqueFd ctl(::open(kControl, O_RDWR | O_CLOEXEC));
  if (ctl) return ctl;
  int e = errno;
  if (e == ENOENT || e == ENODEV || e == ENXIO)
    throw Error(Code::kUnimplemented,
                std::string("no loop devices on this host (") + kControl + ": " + std::strerror(e) +
                    "; is the loop module loaded?)",
                e);
  throw_errno(std::string("open ") + kControl, e);
}

}  // namespace

std::string loop_devices_unavailable() {
  try {
    open_control();
    return "";
  } catch (const Error& e) {
    return e.what();
  }
}

LoopDevice attach_loop_device(const std::string& file) {
  UniqueFd backing(::open(file.c_str(), O_RDONLY | O_CLOEXEC));
  if (!backing) throw_errno("open " + file + " for a loop device");
  UniqueFd ctl = open_control();
  bool direct_io = true;
  // Another process may take the device we were offered before we configure it (EBUSY): ask again.
  for (int attempt = 0; attempt < 64; ++attempt) {
    int n = ::ioctl(ctl.get(), LOOP_CTL_GET_FREE);
    if (n < 0) throw_errno("find a free loop device (LOOP_CTL_GET_FREE)");
    LoopDevice dev;
    dev.path = "/dev/loop" + std::to_string(n);
    dev.fd.reset(::open(dev.path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!dev.fd) {
      if (errno == ENOENT)
        throw Error(Code::kUnimplemented, "loop device " + dev.path + " has no device node (is /dev a devtmpfs?)", ENOENT);
      throw_errno("open " + dev.path);
    }
    struct loop_config config;
    std::memset(&config, 0, sizeof config);
    config.fd = static_cast<uint32_t>(backing.get());
    config.block_size = 4096;  // the layer store's EROFS block size; its images and blobs are multiples of it
    config.info.lo_flags = LO_FLAGS_READ_ONLY | LO_FLAGS_AUTOCLEAR | (direct_io ? LO_FLAGS_DIRECT_IO : 0);
    std::strncpy(reinterpret_cast<char*>(config.info.lo_file_name), file.c_str(), LO_NAME_SIZE - 1);
    if (::ioctl(dev.fd.get(), LOOP_CONFIGURE, &config) == 0) {
      struct loop_info64 info;
      dev.direct_io = ::ioctl(dev.fd.get(), LOOP_GET_STATUS64, &info) == 0 && (info.lo_flags & LO_FLAGS_DIRECT_IO);
      return dev;
    }
    int e = errno;
    if (e == EBUSY) continue;
    // Some kernels refuse direct I/O outright when the backing file cannot do it (others fall back).
    if (e == EINVAL && direct_io) {
      direct_io = false;
      continue;
    }
    throw_errno("bind " + file + " to " + dev.path + " (LOOP_CONFIGURE)", e);
  }
  throw Error(Code::kUnavailable, "no free loop device for " + file + " after 64 attempts (others took each one offered)");
}

int loop_devices_backed_by(const std::string& dir) {
  int n = 0;
  for (const auto& name : list_dir("/sys/block")) {
    if (name.rfind("loop", 0) != 0) continue;
    try {
      auto backing = read_file_if_exists("/sys/block/" + name + "/loop/backing_file", 4096);
      if (backing && backing->rfind(dir + "/", 0) == 0) ++n;
    } catch (const Error&) {
      // A device being detached right now: not bound.
    }
  }
  return n;
}

}  // namespace sandlet::sys
