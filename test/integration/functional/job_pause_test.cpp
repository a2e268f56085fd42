// Pause and resume of many sandboxes by label (sandlet_jobs.h), through the public C ABI.
#include "sandlet/sandlet_jobs.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <filesystem>

#include "integration/harness.hpp"

namespace {

boost::json::object pause_by(sandlet::Runtime& rt, const std::string& selector, bool pause) {
  char* out = nullptr;
  sandlet::detail::check(pause ? sandlet_runtime_pause(rt.get(), selector.c_str(), &out)
                               : sandlet_runtime_resume(rt.get(), selector.c_str(), &out));
  std::string text(out);
  sandlet_free(out);
  return boost::json::parse(text).as_object();
}

uint64_t n(const boost::json::object& o, const char* key) { return o.at(key).to_number<uint64_t>(); }

std::string state_of(sandlet::Sandbox& sb) {
  auto o = boost::json::parse(sb.info_json()).as_object();
  return boost::json::value_to<std::string>(o.at("state"));
}

// A file and a background sleeper in the sandbox, checked after a resume.
void plant(sandlet::Sandbox& sb) {
  sb.write_file("/tmp/kept", "kept\n");
  sandlet::ExecOptions bg({"sh", "-c", "sleep 1000 >/dev/null 2>&1 &"});
  bg.keep_background = true;
  sb.exec(bg);
}

bool kept(sandlet::Sandbox& sb) {
  return sb.read_file("/tmp/kept") == "kept\n" && run_out(sb, "ps -o comm | grep -qx sleep && echo yes") == "yes\n";
}

}  // namespace

TEST_CASE("pause/resume by label: every matching sandbox, files and processes kept", "[job-pause]") {
  Harness h;
  constexpr size_t kJob = 500, kOther = 2;
  std::vector<sandlet::Sandbox> job, other;
  for (size_t i = 0; i < kJob; ++i) job.push_back(h.rt().create(Harness::spec().label("job", "j1").label("team", "a")));
  for (size_t i = 0; i < kOther; ++i) other.push_back(h.rt().create(Harness::spec().label("job", "j2").label("team", "a")));
  for (auto& sb : job) plant(sb);

  auto p = pause_by(h.rt(), "job=j1,team=a", true);
  CHECK(n(p, "matched") == kJob);
  CHECK(n(p, "paused") == kJob);
  CHECK(n(p, "already") == 0);
  CHECK(p.at("failed").as_array().empty());
  for (auto& sb : other) CHECK(state_of(sb) == "running");
  // Seen as paused by another runtime on the root.
  {
    sandlet::RuntimeOptions o;
    o.disable_warm_pool = true;
    auto rt2 = sandlet::Runtime::open(h.root(), o);
    size_t paused = 0;
    for (const auto& l : rt2.list("job=j1")) paused += l.state == "paused";
    CHECK(paused == kJob);
    auto again = pause_by(rt2, "job=j1", true);
    CHECK(n(again, "already") == kJob);
  }
  auto r = pause_by(h.rt(), "job=j1", false);
  CHECK(n(r, "resumed") == kJob);
  CHECK(r.at("failed").as_array().empty());
  for (auto& sb : job) {
    CHECK(state_of(sb) == "running");
    CHECK(kept(sb));
  }
  for (auto& sb : job) sb.destroy();
  for (auto& sb : other) sb.destroy();
  h.check_no_leaks();
}

TEST_CASE("100 pause/resume cycles of one sandbox keep its files and processes", "[job-pause]") {
  Harness h;
  auto sb = h.rt().create(Harness::spec().label("job", "cyc"));
  plant(sb);
  for (int i = 0; i < 100; ++i) {
    auto p = pause_by(h.rt(), "job=cyc", true);
    REQUIRE(n(p, "paused") == 1);
    auto r = pause_by(h.rt(), "job=cyc", false);
    REQUIRE(n(r, "resumed") == 1);
  }
  CHECK(kept(sb));
  sb.destroy();
  h.check_no_leaks();
}

TEST_CASE("a sandbox paused by one runtime resumes transparently on exec from another", "[job-pause]") {
  Harness h;
  auto sb = h.rt().create(Harness::spec().label("job", "x"));
  plant(sb);
  {
    sandlet::RuntimeOptions o;
    o.disable_warm_pool = true;
    auto rt2 = sandlet::Runtime::open(h.root(), o);
    CHECK(n(pause_by(rt2, "job=x", true), "paused") == 1);
  }
  CHECK(state_of(sb) == "paused");
  // This handle never paused it: its exec finds the record paused and resumes it first.
  CHECK(run_out(sb, "echo hi") == "hi\n");
  CHECK(state_of(sb) == "running");
  CHECK(kept(sb));
  sb.destroy();
  h.check_no_leaks();
}

TEST_CASE("pause by label: bad selectors are refused, unknown ids reported", "[job-pause]") {
  Harness h;
  char* out = nullptr;
  sandlet_error_t* e = sandlet_runtime_pause(h.rt().get(), "novalue", &out);
  REQUIRE(e != nullptr);
  CHECK(sandlet_error_code(e) == SANDLET_INVALID_ARGUMENT);
  sandlet_error_delete(e);
  e = sandlet_runtime_pause(h.rt().get(), "", &out);
  REQUIRE(e != nullptr);
  sandlet_error_delete(e);
  const char* ids[] = {"00000000deadbeef"};
  sandlet::detail::check(sandlet_runtime_pause_ids(h.rt().get(), ids, 1, &out));
  auto o = boost::json::parse(out).as_object();
  sandlet_free(out);
  CHECK(o.at("failed").as_array().size() == 1);
}

TEST_CASE("a job pause gives the page cache its sandboxes filled back to the host", "[job-pause][reclaim]") {
  // A 32 MiB file on the host's disk, out of the page cache, read inside: its cache is the sandbox's.
  // /var/tmp is usually on disk where /tmp is not; a minimal root (the VM suites') may have only /tmp.
  std::string dir = std::filesystem::exists("/var/tmp") ? "/var/tmp/sandlet-reclaim-XXXXXX" : "/tmp/sandlet-reclaim-XXXXXX";
  REQUIRE(::mkdtemp(dir.data()) != nullptr);
  struct statfs fs {};
  REQUIRE(::statfs(dir.c_str(), &fs) == 0);
  if (fs.f_type == TMPFS_MAGIC || fs.f_type == RAMFS_MAGIC) {
    std::filesystem::remove_all(dir);
    WARN("SANDLET-SKIP: " << dir << " is in memory here: a file's pages there are not page cache to give back");
    return;
  }
  constexpr size_t kBytes = 32u << 20;
  {
    const int fd = ::open((dir + "/big").c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    REQUIRE(fd >= 0);
    std::string chunk(1 << 20, 'x');
    for (size_t i = 0; i < kBytes / chunk.size(); ++i) REQUIRE(::write(fd, chunk.data(), chunk.size()) == ssize_t(chunk.size()));
    REQUIRE(::fdatasync(fd) == 0);
    REQUIRE(::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) == 0);
    ::close(fd);
  }
  {
    Harness h;
    auto sb = h.rt().create(Harness::spec().memory(256u << 20).mount(dir, "/data").label("job", "cache"));
    plant(sb);
    CHECK(run_out(sb, "cat /data/big | wc -c") == std::to_string(kBytes) + "\n");
    auto p = pause_by(h.rt(), "job=cache", true);
    REQUIRE(n(p, "paused") == 1);
    // Most of the file's cache: other processes of the host may have touched some of its pages first.
    CHECK(n(p, "reclaimed_bytes") >= kBytes / 2);
    auto r = pause_by(h.rt(), "job=cache", false);
    REQUIRE(n(r, "resumed") == 1);
    CHECK(kept(sb));
    CHECK(run_out(sb, "cat /data/big | wc -c") == std::to_string(kBytes) + "\n");  // read again from disk
    sb.destroy();
    h.check_no_leaks();
  }
  std::filesystem::remove_all(dir);
}
