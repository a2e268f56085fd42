// A backend does what its capabilities say (sandlet_backend_info_t.capabilities), and what it does not
// support is UNIMPLEMENTED naming it: pause/resume, one-shot runs, the warm pool.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <thread>

#include "conformance/conformance.hpp"

using namespace conformance;

namespace {

uint32_t capabilities(sandlet::Runtime& rt) {
  for (const auto& b : rt.backends())
    if (b.name == backend()) return b.capabilities;
  FAIL("backend " << backend() << " is not listed");
  return 0;
}

void check_unimplemented(const std::function<void()>& call) {
  auto e = error_of(call);
  CHECK(e.code() == SANDLET_UNIMPLEMENTED);
  CHECK(contains(e.what(), backend()));
}

// A number member of the runtime's stats JSON ({"warm_pool": {"hits": N, ...}}); -1 when absent.
long long pool_counter(sandlet::Runtime& rt, const std::string& key) {
  const std::string json = rt.stats_json();
  const size_t at = json.find("\"" + key + "\":");
  return at == std::string::npos ? -1 : std::atoll(json.c_str() + at + key.size() + 3);
}

}  // namespace

TEST_CASE("pause freezes every process until the next call resumes it, or is UNIMPLEMENTED", "[conformance][capabilities]") {
  Fixture f;
  auto sb = f.create();
  if (!(capabilities(f.rt()) & SANDLET_CAP_PAUSE)) {
    check_unimplemented([&] { sb.pause(); });
    check_unimplemented([&] { sb.resume(); });
    f.check_no_leaks();
    return;
  }
  sandlet::ExecOptions ticker({"sh", "-c", "(while :; do echo x >> /tmp/ticks; sleep 0.02; done) >/dev/null 2>&1 &"});
  ticker.keep_background = true;
  sb.exec(ticker);
  auto ticks = [&] {
    const std::string t = sb.read_file("/tmp/ticks");
    return static_cast<long>(std::count(t.begin(), t.end(), 'x'));
  };
  REQUIRE(wait_until([&] { return sb.exec({"test", "-s", "/tmp/ticks"}).exit_code == 0; }, 10));
  const long before = ticks();
  sb.pause();
  CHECK(contains(sb.info_json(), "\"state\":\"paused\""));
  std::this_thread::sleep_for(std::chrono::milliseconds(400));  // ~20 ticks if it were running
  const long first = ticks();  // this call resumes it
  CHECK(first - before <= 3);
  CHECK(wait_until([&] { return ticks() > first + 3; }, 5));  // and it runs on
  CHECK(contains(sb.info_json(), "\"state\":\"running\""));
  sb.pause();
  sb.resume();
  CHECK(contains(sb.info_json(), "\"state\":\"running\""));
  sb.destroy();
  f.check_no_leaks();
}

// Every backend runs one-shot commands; SANDLET_CAP_ONE_SHOT only says the sandbox starts the command
// itself (no agent round trip), which is faster, not different.
TEST_CASE("a one-shot run uses the caller's descriptors and leaves nothing, on every backend", "[conformance][capabilities]") {
  Fixture f;
  sandlet::RunOptions o({"sh", "-c", "echo out; echo err >&2; exit 5"});
  int out[2], err[2];
  REQUIRE(::pipe2(out, O_CLOEXEC) == 0);
  REQUIRE(::pipe2(err, O_CLOEXEC) == 0);
  o.stdout_fd = out[1];
  o.stderr_fd = err[1];
  auto r = f.rt().run(Fixture::spec(), o);
  CHECK(r.exit_code == 5);
  CHECK(r.stdout_data.empty());  // the output went to the descriptors
  ::close(out[1]);
  ::close(err[1]);
  out[1] = err[1] = -1;
  char buf[64];
  CHECK(::read(out[0], buf, sizeof buf) == 4);
  CHECK(std::string(buf, 4) == "out\n");
  CHECK(::read(err[0], buf, sizeof buf) == 4);
  CHECK(f.rt().list().empty());
  for (int fd : {out[0], out[1], err[0], err[1]})
    if (fd >= 0) ::close(fd);
  f.check_no_leaks();
}

TEST_CASE("a backend that prepares ahead serves repeated creates from the warm pool, counted", "[conformance][capabilities][warm]") {
  Fixture f;
  CHECK(pool_counter(f.rt(), "hits") == 0);
  const bool ahead = capabilities(f.rt()) & SANDLET_CAP_PREPARE_AHEAD;
  for (int i = 0; i < 4; ++i) {
    auto sb = f.create(Fixture::spec().hostname("h" + std::to_string(i)));
    CHECK(out(sb, "hostname") == "h" + std::to_string(i) + "\n");  // a pooled sandbox still gets its spec
    sb.destroy();
    // The pool starts at the second create and fills on a thread of its own: wait for it.
    if (ahead && i >= 1) CHECK(wait_until([&] { return pool_counter(f.rt(), "ready") >= 1; }, 10));
  }
  if (ahead) {
    CHECK(pool_counter(f.rt(), "hits") >= 2);  // the third and fourth found a prepared sandbox
    CHECK(pool_counter(f.rt(), "hits") + pool_counter(f.rt(), "misses") == 4);
    CHECK(contains(f.rt().stats_json(), "\"backend\":\"" + backend() + "\""));
  } else {
    CHECK(pool_counter(f.rt(), "hits") == 0);
  }
  f.check_no_leaks();
}
