// The reads a holder keeps waiting, written where its successor can find them: a memfd shared by the
// holder and the fetcher. When the holder is killed its fanotify group lives on in the fetcher; the events
// it had read stay held by the kernel, answerable by their descriptor numbers alone, and this table says which
// numbers wait for which blob chunks (see docs/LAZY.md, "A holder killed").
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "sys/fd.hpp"

namespace sandlet::lazy {

class PendingTable final {
 public:
  struct Entry {
    int fd;             // the event's descriptor number in the holder that read it
    std::string sha;    // the blob's digest
    uint32_t first, last;
    int slot;
  };

  // A new table for `capacity` waits; `fd_limit` bounds the descriptor numbers its holder can get.
  static PendingTable create(uint32_t capacity, uint32_t fd_limit);
  // The table a dead holder left (throws kInvalidArgument when it is not one).
  static PendingTable adopt(sys::UniqueFd fd);

  PendingTable() = default;
  PendingTable(PendingTable&& o) noexcept;
  PendingTable& operator=(PendingTable&& o) noexcept;
  ~PendingTable();

  int fd() const { return fd_.get(); }
  uint32_t fd_limit() const;
  // A slot for one wait, or -1 when the table is full (that wait is then unknown to a successor).
  int put(int event_fd, const std::string& sha, uint32_t first, uint32_t last);
  void clear(int slot);
  std::vector<Entry> entries() const;

 private:
  struct Header;
  struct Slot;
  Header* header() const;
  Slot* slots() const;
  sys::UniqueFd fd_;
  void* map_ = nullptr;
  size_t size_ = 0;
  std::vector<int> free_;  // this process's view of the unused slots
};

}  // namespace sandlet::lazy
