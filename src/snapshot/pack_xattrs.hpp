// Which extended attributes of a writable layer's entry go into a snapshot, and how the ids some of them carry
// are shifted from the sandbox's host ids to the ids inside (POSIX ACLs, file capabilities).
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace sandlet::snapshot {

using Xattrs = std::vector<std::pair<std::string, std::string>>;  // as image::fd_xattrs reads them

// The xattrs to pack: user.*, trusted.overlay.opaque (when `keep_opaque`), ACLs and capabilities with ids
// shifted; OverlayFS's bookkeeping (origin, impure, nlink, upper, ...) dropped. Throws FAILED_PRECONDITION
// for trusted.overlay.redirect / metacopy (the layer would not mean the same elsewhere).
Xattrs pack_xattrs(const Xattrs& in, bool keep_opaque, uint32_t id_base, uint32_t id_count, const std::string& shown);

// A host id of the sandbox as the id inside (65534 when outside its range).
inline uint32_t inside_id(uint32_t host, uint32_t base, uint32_t count) {
  return host >= base && host - base < count ? host - base : 65534;
}

}  // namespace sandlet::snapshot
