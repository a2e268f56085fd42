// The spec's `mounts`: host directories mounted into the sandbox. Syntax and placement are checked here,
// when a mount is added; whether the source exists is checked by validate_spec (check_mount_sources), as
// for directory layers.
#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include "common/error.hpp"
#include "spec/spec.hpp"
#include "spec/spec_text.hpp"

namespace sandlet {
namespace {

using spec_text::check_absolute_path;
using spec_text::check_normalized_path;
using spec_text::escaped;
using spec_text::quoted;

constexpr size_t kMaxMounts = 64;  // proto::kMaxMounts: one SCM_RIGHTS message carries them all
constexpr size_t kMaxPath = 4095;

std::string field_of(size_t index, const char* part) {
  return "mounts[" + std::to_string(index) + "]" + (part[0] ? std::string(".") + part : std::string());
}

// `inner` is `outer` or lies below it.
bool within(std::string_view inner, std::string_view outer) {
  if (outer == "/") return true;
  return inner.substr(0, outer.size()) == outer && (inner.size() == outer.size() || inner[outer.size()] == '/');
}

void check_target(const Spec& s, size_t index, std::string_view target) {
  const std::string field = field_of(index, "target");
  check_normalized_path(field, target);
  if (target == "/") throw_invalid(field, "\"/\" is the sandbox's root filesystem; mount below it");
  // The init mounts its own /proc, /dev and (through /proc) /sys views there.
  for (std::string_view kernel : {"/proc", "/dev", "/sys"}) {
    if (within(target, kernel))
      throw_invalid(field, quoted(target) + " is in " + std::string(kernel) + ", which the sandbox's init provides");
  }
  for (size_t j = 0; j < s.mounts.size(); ++j) {
    const std::string& other = s.mounts[j].target;
    if (other == target) throw_invalid(field, quoted(target) + " is already the target of " + field_of(j, ""));
    // Refused rather than stacked: directories made for the inner target would be made in the outer
    // source, i.e. on the host.
    if (within(target, other) || within(other, target))
      throw_invalid(field, quoted(target) + " and " + field_of(j, "target") + " " + quoted(other) +
                               " nest (nested mounts are not supported)");
  }
}

}  // namespace

void spec_add_mount(Spec& s, std::string_view source, std::string_view target, bool readonly) {
  if (s.mounts.size() >= kMaxMounts)
    throw_invalid("mounts", "at most " + std::to_string(kMaxMounts) + " mounts are supported");
  const size_t index = s.mounts.size();
  check_normalized_path(field_of(index, "source"), source);
  check_target(s, index, target);
  s.mounts.push_back(Mount{std::string(source), std::string(target), readonly});
}

void spec_add_mount_text(Spec& s, std::string_view text) {
  const std::string field = field_of(s.mounts.size(), "");
  const auto bad = [&](const std::string& why) {
    throw_invalid(field, "expected \"SOURCE:TARGET\", \"SOURCE:TARGET:ro\" or \"SOURCE:TARGET:rw\", got " +
                             quoted(text) + why);
  };
  std::string_view rest = text;
  bool readonly = true;
  if (rest.size() > 3 && (rest.substr(rest.size() - 3) == ":ro" || rest.substr(rest.size() - 3) == ":rw")) {
    readonly = rest.substr(rest.size() - 2) == "ro";
    rest.remove_suffix(3);
  }
  const size_t colon = rest.find(':');
  if (colon == std::string_view::npos) bad("");
  if (rest.find(':', colon + 1) != std::string_view::npos)
    bad(" (a path with ':' needs the object form {\"source\", \"target\", \"readonly\"})");
  spec_add_mount(s, rest.substr(0, colon), rest.substr(colon + 1), readonly);
}

void check_mount_sources(const Spec& spec) {
  for (size_t i = 0; i < spec.mounts.size(); ++i) {
    const std::string& path = spec.mounts[i].source;
    struct stat st;
    int err = 0;
    if (::stat(path.c_str(), &st) != 0) {
      err = errno;
    } else if (!S_ISDIR(st.st_mode)) {
      err = ENOTDIR;  // only directories are mounted (a file would need a file to mount over inside)
    }
    if (err != 0) {
      throw Error(Code::kInvalidArgument, "invalid spec field '" + field_of(i, "source") + "': " +
                                              escaped(path, kMaxPath) + ": " + std::strerror(err) + " (errno " +
                                              std::to_string(err) + ")",
                  err);
    }
  }
}

}  // namespace sandlet
