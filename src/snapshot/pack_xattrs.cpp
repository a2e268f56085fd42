#include "snapshot/pack_xattrs.hpp"

#include <algorithm>
#include <cstring>

#include "common/error.hpp"

namespace sandlet::snapshot {
namespace {

uint32_t le32(const std::string& s, size_t at) {
  uint32_t v;
  std::memcpy(&v, s.data() + at, 4);
  return v;
}
void put_le32(std::string& s, size_t at, uint32_t v) { std::memcpy(s.data() + at, &v, 4); }

// POSIX ACL xattr: u32 version 2, then {u16 tag, u16 perm, u32 id} entries; USER (2) and GROUP (8) carry ids.
bool shift_acl(std::string& v, uint32_t base, uint32_t count) {
  if (v.size() < 4 || (v.size() - 4) % 8 != 0 || le32(v, 0) != 2) return false;
  for (size_t at = 4; at < v.size(); at += 8) {
    uint16_t tag;
    std::memcpy(&tag, v.data() + at, 2);
    if (tag == 2 || tag == 8) put_le32(v, at + 4, inside_id(le32(v, at + 4), base, count));
  }
  return true;
}

// security.capability: revision 2 (20 bytes) is kept; revision 3 (24 bytes, + root uid) set inside a user
// namespace names the host uid of that namespace's root: as root inside it becomes revision 2 again.
bool shift_caps(std::string& v, uint32_t base) {
  if (v.size() == 20 && (le32(v, 0) & 0xff000000u) == 0x02000000u) return true;
  if (v.size() != 24 || (le32(v, 0) & 0xff000000u) != 0x03000000u) return false;
  if (le32(v, 20) != base) return false;  // capabilities for another namespace's root: meaningless here
  put_le32(v, 0, (le32(v, 0) & 0x00ffffffu) | 0x02000000u);
  v.resize(20);
  return true;
}

}  // namespace

Xattrs pack_xattrs(const Xattrs& in, bool keep_opaque, uint32_t id_base, uint32_t id_count, const std::string& shown) {
  Xattrs out;
  for (const auto& [name, value] : in) {
    if (name.rfind("trusted.overlay.", 0) == 0) {
      if (name == "trusted.overlay.redirect" || name == "trusted.overlay.metacopy")
        throw Error(Code::kFailedPrecondition, "snapshot: " + shown + " carries " + name +
                                                   " (OverlayFS redirect_dir or metacopy is on): it cannot be packed");
      if (name == "trusted.overlay.opaque" && keep_opaque) out.emplace_back(name, value);
      continue;
    }
    if (name.rfind("user.", 0) == 0) {
      out.emplace_back(name, value);
    } else if (name == "system.posix_acl_access" || name == "system.posix_acl_default") {
      std::string v = value;
      if (shift_acl(v, id_base, id_count)) out.emplace_back(name, std::move(v));
    } else if (name == "security.capability") {
      std::string v = value;
      if (shift_caps(v, id_base)) out.emplace_back(name, std::move(v));
    }
    // Anything else (security labels of the host, trusted.* of other subsystems) is the host's, not the sandbox's.
  }
  return out;
}

}  // namespace sandlet::snapshot
