// libFuzzer target: a layer's metadata image as a remote store could send it, through the reader a lazily
// loading node runs before mounting (image/erofs_reader.cpp), then the digest walk over the tree it returns.
// Anything but a clean tree or Error(kDataLoss) is a finding. Seeds: images of small layers (corpus/erofs-image).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "common/error.hpp"
#include "image/erofs_reader.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string image(reinterpret_cast<const char*>(data), size);
  try {
    std::vector<std::string> tags;
    sandlet::image::FsTree tree = sandlet::image::read_erofs_tree(image, &tags);
    if (tree.blobs.size() != tags.size()) std::abort();
    (void)tree.content_digest(64 * 1024);
  } catch (const sandlet::Error& e) {
    if (e.code() != sandlet::Code::kDataLoss) std::abort();
  }
  return 0;
}
