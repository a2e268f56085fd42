#include "lazy/pending_table.hpp"

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <utility>

#include "common/error.hpp"

namespace sandlet::lazy {

struct PendingTable::Header {
  uint64_t magic;
  uint32_t version;
  uint32_t capacity;
  uint32_t fd_limit;
  uint32_t reserved;
};

struct PendingTable::Slot {
  int32_t fd_plus_one;  // 0: free (a new memfd reads as zeros: nothing to initialise)
  uint32_t first, last;
  char sha[64];
  uint32_t reserved;
};

namespace {
constexpr uint64_t kMagic = 0x53414e444c455450ull;  // "SANDLETP"
constexpr uint32_t kVersion = 1;
}  // namespace

PendingTable::PendingTable(PendingTable&& o) noexcept
    : fd_(std::move(o.fd_)), map_(std::exchange(o.map_, nullptr)), size_(std::exchange(o.size_, 0)),
      free_(std::move(o.free_)) {}

PendingTable& PendingTable::operator=(PendingTable&& o) noexcept {
  if (this != &o) {
    if (map_) ::munmap(map_, size_);
    fd_ = std::move(o.fd_);
    map_ = std::exchange(o.map_, nullptr);
    size_ = std::exchange(o.size_, 0);
    free_ = std::move(o.free_);
  }
  return *this;
}

PendingTable::~PendingTable() {
  if (map_) ::munmap(map_, size_);
}

PendingTable::Header* PendingTable::header() const { return static_cast<Header*>(map_); }
PendingTable::Slot* PendingTable::slots() const {
  return reinterpret_cast<Slot*>(static_cast<char*>(map_) + sizeof(Header));
}
uint32_t PendingTable::fd_limit() const { return map_ ? header()->fd_limit : 0; }

PendingTable PendingTable::create(uint32_t capacity, uint32_t fd_limit) {
  PendingTable t;
  t.fd_.reset(::memfd_create("sandlet-pending", MFD_CLOEXEC));
  if (!t.fd_) throw_errno("memfd_create(pending reads)");
  t.size_ = sizeof(Header) + size_t{capacity} * sizeof(Slot);
  if (::ftruncate(t.fd_.get(), static_cast<off_t>(t.size_)) != 0) throw_errno("size the pending-read table");
  t.map_ = ::mmap(nullptr, t.size_, PROT_READ | PROT_WRITE, MAP_SHARED, t.fd_.get(), 0);
  if (t.map_ == MAP_FAILED) {
    t.map_ = nullptr;
    throw_errno("map the pending-read table");
  }
  Header* h = t.header();
  h->magic = kMagic;
  h->version = kVersion;
  h->capacity = capacity;
  h->fd_limit = fd_limit;
  t.free_.reserve(capacity);
  for (uint32_t i = capacity; i-- > 0;) t.free_.push_back(static_cast<int>(i));
  return t;
}

PendingTable PendingTable::adopt(sys::UniqueFd fd) {
  PendingTable t;
  struct stat st;
  if (!fd || ::fstat(fd.get(), &st) != 0 || static_cast<size_t>(st.st_size) < sizeof(Header))
    throw Error(Code::kInvalidArgument, "the pending-read table is missing or too small");
  t.fd_ = std::move(fd);
  t.size_ = static_cast<size_t>(st.st_size);
  t.map_ = ::mmap(nullptr, t.size_, PROT_READ | PROT_WRITE, MAP_SHARED, t.fd_.get(), 0);
  if (t.map_ == MAP_FAILED) {
    t.map_ = nullptr;
    throw_errno("map the pending-read table");
  }
  const Header* h = t.header();
  if (h->magic != kMagic || h->version != kVersion ||
      sizeof(Header) + size_t{h->capacity} * sizeof(Slot) != t.size_)
    throw Error(Code::kInvalidArgument, "the pending-read table is not one this loader wrote");
  for (uint32_t i = h->capacity; i-- > 0;)
    if (t.slots()[i].fd_plus_one <= 0) t.free_.push_back(static_cast<int>(i));
  return t;
}

int PendingTable::put(int event_fd, const std::string& sha, uint32_t first, uint32_t last) {
  if (!map_ || free_.empty() || sha.size() != 64 || event_fd < 0) return -1;
  int slot = free_.back();
  free_.pop_back();
  Slot& s = slots()[slot];
  s.first = first;
  s.last = last;
  std::memcpy(s.sha, sha.data(), 64);
  // The number last: a successor reads a slot as taken only once the rest is there.
  __atomic_store_n(&s.fd_plus_one, event_fd + 1, __ATOMIC_RELEASE);
  return slot;
}

void PendingTable::clear(int slot) {
  if (!map_ || slot < 0 || static_cast<uint32_t>(slot) >= header()->capacity) return;
  __atomic_store_n(&slots()[slot].fd_plus_one, 0, __ATOMIC_RELEASE);
  free_.push_back(slot);
}

std::vector<PendingTable::Entry> PendingTable::entries() const {
  std::vector<Entry> out;
  if (!map_) return out;
  for (uint32_t i = 0; i < header()->capacity; ++i) {
    const Slot& s = slots()[i];
    int fd_plus_one = __atomic_load_n(&s.fd_plus_one, __ATOMIC_ACQUIRE);
    if (fd_plus_one <= 0) continue;
    out.push_back({fd_plus_one - 1, std::string(s.sha, 64), s.first, s.last, static_cast<int>(i)});
  }
  return out;
}

}  // namespace sandlet::lazy
