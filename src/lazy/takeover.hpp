// What a killed holder's successor is given, by the fetcher that outlived it: the fanotify group (its marks
// and the events the dead holder had read live on in it), the loader's lock, the table of waiting reads,
// and every cache file's unwatched descriptor with its store. Sent as descriptors plus a JSON description
// in a memfd (`sandlet-loader holder --adopt FD`).
#pragma once
#include <string>
#include <vector>

#include "lazy/loader_settings.hpp"
#include "sys/fd.hpp"

namespace sandlet::lazy {

struct Handover {
  struct Blob {
    std::string sha;
    int fd = -1;  // the cache file, opened before it was marked
    std::string url, access_key, secret_key, session_token;
  };
  std::string root;
  LoaderSettings settings;
  int group = -1, lock = -1, table = -1;
  std::vector<Blob> blobs;
};

// Starts `self_exe holder --adopt` with the handover's descriptors (not closed here) and waits for its first
// process (the one that detaches the server). Throws on failure.
void start_successor(const std::string& self_exe, const Handover& h);
// Reads the description passed as --adopt (closing that memfd); the descriptors it names are the caller's.
Handover read_handover(sys::UniqueFd description);

}  // namespace sandlet::lazy
