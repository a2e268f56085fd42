// Environments on a remote store. `envs/<name>.json` holds the version pushed last — its layers by digest,
// env, workdir, user — and the layers go and come as `LayerStore::push`/`pull` send them (a lazy pull of an
// environment pulls each of its layers lazily). Pulling creates that version locally (a new version number
// unless the newest local one is the same).
#pragma once
#include <string>

#include "image/layer_store.hpp"
#include "remote_store/blob_store.hpp"

namespace sandlet::image {

struct EnvTransfer {
  std::string name;
  EnvVersion version;  // pushed, or as created here by the pull
};

// Pushes environment `ref` (NAME or NAME@VERSION): every layer with what it needs, then the record (last:
// a reader never finds a record whose layers are not there). Counts go into `r`.
EnvTransfer push_environment(LayerStore& layers, const std::string& ref, store::BlobStore& to, PushResult& r);
// Whether the store holds an environment record of that name.
bool remote_environment_exists(store::BlobStore& from, const std::string& name);
// Pulls environment `name`: its record (checked as hostile input), each layer, then the local version.
EnvTransfer pull_environment(LayerStore& layers, const std::string& name, store::BlobStore& from,
                             const std::string& store_url, bool lazy, PullResult& r);

}  // namespace sandlet::image
