// The directory store: a local (or network-mounted) directory laid out like the remote stores, keys as
// relative paths. Reads with pread; writes go to a temp file in the target's directory, are fsynced and
// renamed into place (then the directory is fsynced), so a reader sees a whole object or none.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <random>

#include "common/error.hpp"
#include "remote_store/blob_store.hpp"
#include "sys/fd.hpp"

namespace sandlet::store {

namespace {

class DirStore final : public BlobStore {
 public:
  explicit DirStore(const StoreConfig& c) : c_(c), name_(describe(c)) {}
  const StoreConfig& config() const override { return c_; }

  void check() override {
    struct stat st{};
    if (::stat(c_.dir.c_str(), &st) != 0) {
      if (errno == ENOENT) throw Error(Code::kNotFound, name_ + ": the directory does not exist", ENOENT);
      throw_errno(name_ + ": stat");
    }
    if (!S_ISDIR(st.st_mode)) throw Error(Code::kFailedPrecondition, name_ + ": not a directory", ENOTDIR);
    if (::access(c_.dir.c_str(), R_OK | X_OK) != 0) throw_errno(name_ + ": access");
  }

  std::optional<uint64_t> head(const std::string& key) override {
    validate_key(key);
    struct stat st{};
    if (::stat(path(key).c_str(), &st) != 0) {
      if (errno == ENOENT || errno == ENOTDIR) return std::nullopt;
      throw_errno(name_ + ": stat " + key);
    }
    if (!S_ISREG(st.st_mode)) throw Error(Code::kFailedPrecondition, name_ + ": " + key + " is not a file");
    return static_cast<uint64_t>(st.st_size);
  }

  std::string get(const std::string& key, size_t max_bytes) override {
    sys::UniqueFd fd = open_for_read(key);
    const uint64_t size = file_size(fd, key);
    if (size > max_bytes)
      throw Error(Code::kResourceExhausted, name_ + ": " + key + " has " + std::to_string(size) +
                                                " bytes, over the cap of " + std::to_string(max_bytes));
    std::string out(size, '\0');
    read_exactly(fd, key, 0, out.data(), out.size());
    return out;
  }

  void get_range(const std::string& key, uint64_t offset, size_t len, char* out) override {
    sys::UniqueFd fd = open_for_read(key);
    const uint64_t size = file_size(fd, key);
    if (offset > size || len > size - offset)
      throw Error(Code::kOutOfRange, name_ + ": range " + std::to_string(offset) + "+" + std::to_string(len) +
                                         " of " + key + " passes its end (" + std::to_string(size) + " bytes)");
    read_exactly(fd, key, offset, out, len);
  }

  void put(const std::string& key, const std::string& data) override {
    write_atomically(key, [&](int fd, const std::string& tmp) {
      size_t done = 0;
      while (done < data.size()) {
        const ssize_t w = ::write(fd, data.data() + done, data.size() - done);
        if (w < 0) {
          if (errno == EINTR) continue;
          throw_errno(name_ + ": write " + tmp);
        }
        done += static_cast<size_t>(w);
      }
    });
  }

  void put_file(const std::string& key, const std::string& src) override {
    sys::UniqueFd in(::open(src.c_str(), O_RDONLY | O_CLOEXEC));
    if (!in) throw_errno("put " + key + " to " + name_ + ": open " + src);
    write_atomically(key, [&](int fd, const std::string& tmp) {
      std::string buf(1 << 20, '\0');
      for (;;) {
        const ssize_t r = ::read(in.get(), buf.data(), buf.size());
        if (r < 0) {
          if (errno == EINTR) continue;
          throw_errno("put " + key + " to " + name_ + ": read " + src);
        }
        if (r == 0) break;
        for (ssize_t done = 0; done < r;) {
          const ssize_t w = ::write(fd, buf.data() + done, static_cast<size_t>(r - done));
          if (w < 0) {
            if (errno == EINTR) continue;
            throw_errno(name_ + ": write " + tmp);
          }
          done += w;
        }
      }
    });
  }

 private:
  std::string path(const std::string& key) const { return c_.dir + "/" + key; }

  sys::UniqueFd open_for_read(const std::string& key) {
    validate_key(key);
    sys::UniqueFd fd(::open(path(key).c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd) {
      if (errno == ENOENT || errno == ENOTDIR) throw Error(Code::kNotFound, name_ + ": no " + key, errno);
      throw_errno(name_ + ": open " + key);
    }
    return fd;
  }

  uint64_t file_size(const sys::UniqueFd& fd, const std::string& key) {
    struct stat st{};
    if (::fstat(fd.get(), &st) != 0) throw_errno(name_ + ": fstat " + key);
    if (!S_ISREG(st.st_mode)) throw Error(Code::kFailedPrecondition, name_ + ": " + key + " is not a file");
    return static_cast<uint64_t>(st.st_size);
  }

  void read_exactly(const sys::UniqueFd& fd, const std::string& key, uint64_t offset, char* out, size_t len) {
    size_t done = 0;
    while (done < len) {
      const ssize_t r = ::pread(fd.get(), out + done, len - done, static_cast<off_t>(offset + done));
      if (r < 0) {
        if (errno == EINTR) continue;
        throw_errno(name_ + ": read " + key);
      }
      if (r == 0)
        throw Error(Code::kOutOfRange, name_ + ": " + key + " ended at " + std::to_string(offset + done) +
                                           " while being read (it shrank)");
      done += static_cast<size_t>(r);
    }
  }

  // mkdir -p of the key's parents under the root (and of the root itself: a new store is a new directory).
  void make_parents(const std::string& key) {
    std::string dir = c_.dir;
    size_t pos = 1;
    auto make = [&](const std::string& d) {
      if (::mkdir(d.c_str(), 0755) != 0 && errno != EEXIST) throw_errno(name_ + ": mkdir " + d);
    };
    while ((pos = c_.dir.find('/', pos)) != std::string::npos) make(c_.dir.substr(0, pos++));
    make(c_.dir);
    for (size_t slash = key.find('/'); slash != std::string::npos; slash = key.find('/', slash + 1))
      make(dir + "/" + key.substr(0, slash));
  }

  template <typename Fill>
  void write_atomically(const std::string& key, Fill fill) {
    validate_key(key);
    make_parents(key);
    const std::string target = path(key);
    const std::string parent = target.substr(0, target.rfind('/'));
    thread_local std::minstd_rand rng{std::random_device{}()};
    const std::string tmp = parent + "/.tmp-" + std::to_string(::getpid()) + "-" + std::to_string(rng());
    sys::UniqueFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
    if (!fd) throw_errno(name_ + ": create " + tmp);
    try {
      fill(fd.get(), tmp);
      if (::fsync(fd.get()) != 0) throw_errno(name_ + ": fsync " + tmp);
      fd.reset();
      if (::rename(tmp.c_str(), target.c_str()) != 0) throw_errno(name_ + ": rename to " + key);
    } catch (...) {
      ::unlink(tmp.c_str());
      throw;
    }
    sys::UniqueFd dirfd(::open(parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (dirfd && ::fsync(dirfd.get()) != 0) throw_errno(name_ + ": fsync " + parent);
  }

  StoreConfig c_;
  std::string name_;
};

}  // namespace

std::unique_ptr<BlobStore> open_dir_store(const StoreConfig& config) {
  if (config.kind != StoreConfig::Kind::kDir || config.dir.empty() || config.dir.front() != '/')
    throw Error(Code::kInvalidArgument, "directory store: needs an absolute directory");
  return std::make_unique<DirStore>(config);
}

}  // namespace sandlet::store
