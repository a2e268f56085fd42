#include "guest/vm/guest_net.hpp"

#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <net/route.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

namespace sandlet::guest::vm {
namespace {

// QEMU's user-mode network: the guest is 10.0.2.15/24, QEMU answers as 10.0.2.2.
constexpr uint32_t kAddress = (10u << 24) | (0u << 16) | (2u << 8) | 15u;
constexpr uint32_t kGateway = (10u << 24) | (0u << 16) | (2u << 8) | 2u;
constexpr uint32_t kNetmask = 0xffffff00u;

void set_in(struct sockaddr* sa, uint32_t host_order) {
  struct sockaddr_in in = {};
  in.sin_family = AF_INET;
  in.sin_addr.s_addr = htonl(host_order);
  std::memcpy(sa, &in, sizeof in);
}

}  // namespace

Status guest_network_up(bool expected) {
  if (access("/sys/class/net/eth0", F_OK) != 0) {
    if (!expected) return Status::Ok();
    return make_status(SANDLET_FAILED_PRECONDITION, ENODEV,
                       "network: the guest has no network interface (a kernel kit without virtio_net? make it again "
                       "with scripts/microvm/make-kernel-kit.sh)");
  }
  // Before the link comes up: an address is usable at once (no other host can claim it).
  if (int f = open("/proc/sys/net/ipv6/conf/eth0/accept_dad", O_WRONLY | O_CLOEXEC); f >= 0) {
    (void)!write(f, "0", 1);
    close(f);
  }
  const int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (s < 0) return errno_status(errno, "network: socket for eth0");
  struct ifreq ifr = {};
  std::strncpy(ifr.ifr_name, "eth0", IFNAMSIZ - 1);
  Status st;
  set_in(&ifr.ifr_addr, kAddress);
  if (ioctl(s, SIOCSIFADDR, &ifr) != 0) st = errno_status(errno, "network: address of eth0");
  set_in(&ifr.ifr_netmask, kNetmask);
  if (st.ok() && ioctl(s, SIOCSIFNETMASK, &ifr) != 0) st = errno_status(errno, "network: netmask of eth0");
  if (st.ok() && ioctl(s, SIOCGIFFLAGS, &ifr) != 0) st = errno_status(errno, "network: flags of eth0");
  ifr.ifr_flags = static_cast<short>(ifr.ifr_flags | IFF_UP);
  if (st.ok() && ioctl(s, SIOCSIFFLAGS, &ifr) != 0) st = errno_status(errno, "network: bring eth0 up");
  struct rtentry rt = {};
  set_in(&rt.rt_dst, 0);
  set_in(&rt.rt_genmask, 0);
  set_in(&rt.rt_gateway, kGateway);
  rt.rt_flags = RTF_UP | RTF_GATEWAY;
  if (st.ok() && ioctl(s, SIOCADDRT, &rt) != 0) st = errno_status(errno, "network: default route");
  close(s);
  return st;
}

}  // namespace sandlet::guest::vm
