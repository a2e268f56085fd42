#include "integration/harness.hpp"

TEST_CASE("exec returns exit code, split output, env, cwd, stdin", "[exec]") {
  Harness h;
  auto sb = h.rt().create(Harness::spec().env("GREETING", "hi"));
  auto r = sb.exec({"sh", "-c", "echo out; echo err >&2; exit 3"});
  CHECK(r.exit_code == 3);
  CHECK(r.signal == 0);
  CHECK(r.stdout_data == "out\n");
  CHECK(r.stderr_data == "err\n");
  CHECK(r.duration_ns > 0);

  sandlet::ExecOptions o({"sh", "-c", "echo $GREETING $EXTRA; pwd; cat"});
  o.env = {"EXTRA=there"};
  o.cwd = "/tmp";
  o.stdin_data = "from stdin";
  r = sb.exec(o);
  CHECK(r.exit_code == 0);
  CHECK(r.stdout_data == "hi there\n/tmp\nfrom stdin");
  h.check_no_leaks();
}

TEST_CASE("a missing command is a NOT_FOUND error", "[exec]") {
  Harness h;
  auto sb = h.rt().create(Harness::spec());
  try {
    sb.exec({"/no/such/program"});
    FAIL("expected an error");
  } catch (const sandlet::Error& e) {
    CHECK(e.code() == SANDLET_NOT_FOUND);
    CHECK(std::string(e.what()).find("/no/such/program") != std::string::npos);
  }
  // The sandbox is still usable.
  CHECK(sb.exec({"true"}).exit_code == 0);
  h.check_no_leaks();
}

TEST_CASE("a timeout kills every descendant, not only the shell", "[exec][timeout]") {
  Harness h;
  auto sb = h.rt().create(Harness::spec());
  sandlet::ExecOptions o({"sh", "-c", "sh -c 'setsid sleep 300 & sleep 300' & sleep 300"});
  o.timeout_s = 0.5;
  auto r = sb.exec(o);
  CHECK(r.timed_out);
  CHECK(r.exit_code == -1);
  CHECK(r.signal == 9);
  // Not one sleep survives, not even the one that escaped into its own session.
  CHECK(wait_until([&] { return count_procs(sb, "sleep") == 0; }, 5));
  h.check_no_leaks();
}

TEST_CASE("output beyond the cap is dropped and flagged", "[exec][output]") {
  Harness h;
  auto sb = h.rt().create(Harness::spec());
  sandlet::ExecOptions o({"sh", "-c", "head -c 3000000 /dev/zero; echo done >&2"});
  o.output_limit = 1 << 20;
  auto r = sb.exec(o);
  CHECK(r.exit_code == 0);
  CHECK(r.stdout_data.size() == (1u << 20));
  CHECK(r.stdout_truncated);
  CHECK_FALSE(r.stderr_truncated);
  CHECK(r.stderr_data == "done\n");

  sandlet::ExecOptions k({"yes"});
  k.output_limit = 1 << 20;
  k.kill_on_output_limit = true;
  k.timeout_s = 30;
  r = sb.exec(k);
  CHECK(r.stdout_truncated);
  CHECK_FALSE(r.timed_out);
  CHECK(r.signal == 9);
  h.check_no_leaks();
}

TEST_CASE("streaming exec delivers output as it comes", "[exec][stream]") {
  Harness h;
  auto sb = h.rt().create(Harness::spec());
  std::vector<std::pair<std::string, std::chrono::steady_clock::time_point>> chunks;
  std::mutex m;
  sandlet::ExecOptions o({"sh", "-c", "echo a; sleep 0.5; echo b"});
  o.on_output = [&](int stream, std::string_view data) {
    std::lock_guard lock(m);
    chunks.emplace_back(std::string(data), std::chrono::steady_clock::now());
  };
  auto r = sb.exec(o);
  CHECK(r.exit_code == 0);
  CHECK(r.stdout_data.empty());
  REQUIRE(chunks.size() == 2);
  CHECK(chunks[0].first == "a\n");
  CHECK(chunks[1].first == "b\n");
  CHECK(chunks[1].second - chunks[0].second > std::chrono::milliseconds(300));
  h.check_no_leaks();
}

TEST_CASE("many execs in flight from one thread", "[exec][async]") {
  Harness h;
  std::vector<sandlet::Sandbox> boxes;
  for (int i = 0; i < 4; ++i) boxes.push_back(h.rt().create(Harness::spec()));
  std::atomic<int> ok{0}, done{0};
  const int n = 40;
  for (int i = 0; i < n; ++i) {
    sandlet::ExecOptions o({"sh", "-c", "sleep 0.2; echo " + std::to_string(i)});
    boxes[i % boxes.size()].exec_async(o, [&, i](const sandlet::Error* err, sandlet::ExecResult r) {
      if (!err && r.stdout_data == std::to_string(i) + "\n") ++ok;
      ++done;
    });
  }
  CHECK(wait_until([&] { return done == n; }, 30));
  CHECK(ok == n);
  boxes.clear();
  h.check_no_leaks();
}

TEST_CASE("files round-trip and errors are precise", "[files]") {
  Harness h;
  auto sb = h.rt().create(Harness::spec());
  std::string data(300000, 'x');
  data += std::string("\0binary\xff", 8);
  sb.write_file("/work/deep/dir/f.bin", data, 0600);
  CHECK(sb.read_file("/work/deep/dir/f.bin") == data);
  CHECK(run_out(sb, "stat -c %a /work/deep/dir/f.bin") == "600\n");
  try {
    sb.read_file("/nope");
    FAIL("expected NOT_FOUND");
  } catch (const sandlet::Error& e) {
    CHECK(e.code() == SANDLET_NOT_FOUND);
  }
  try {
    sb.read_file("/work/deep/dir/f.bin", 1000);
    FAIL("expected OUT_OF_RANGE");
  } catch (const sandlet::Error& e) {
    CHECK(e.code() == SANDLET_OUT_OF_RANGE);
  }
  h.check_no_leaks();
}

TEST_CASE("keep_background: a server started with & outlives its command; default kills it", "[exec][background]") {
  Harness h;
  auto sb = h.rt().create(Harness::spec());
  // Default: the background sleep dies with the command.
  auto r = sb.exec({"sh", "-c", "sleep 300 & echo started"});
  CHECK(r.stdout_data == "started\n");
  CHECK(wait_until([&] { return count_procs(sb, "sleep") == 0; }, 5));
  // keep_background: the command returns at once, its child stays, and a later exec can talk to it.
  sandlet::ExecOptions o({"sh", "-c", "(while true; do echo tick > /tmp/beat; sleep 0.1; done) & echo started"});
  o.keep_background = true;
  o.timeout_s = 1;
  r = sb.exec(o);
  CHECK(r.exit_code == 0);
  CHECK_FALSE(r.timed_out);
  CHECK(r.stdout_data == "started\n");
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // past the command's timeout
  CHECK(run_out(sb, "rm /tmp/beat; sleep 0.5; cat /tmp/beat") == "tick\n");
  h.check_no_leaks();
}

TEST_CASE("a running exec can be signalled and cancelled; cancel kills its whole tree", "[exec][cancel]") {
  Harness h;
  auto sb = h.rt().create(Harness::spec());
  // A trapped signal reaches the command.
  std::atomic<bool> done{false};
  std::string out;
  auto ctl = sb.exec_start(sandlet::ExecOptions({"sh", "-c", "trap 'echo got-usr1; exit 5' USR1; while true; do sleep 0.05; done"}),
                           [&](const sandlet::Error* err, sandlet::ExecResult r) {
                             if (!err) out = r.stdout_data + std::to_string(r.exit_code);
                             done = true;
                           });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  ctl.signal(SIGUSR1);
  REQUIRE(wait_until([&] { return done.load(); }, 10));
  CHECK(out == "got-usr1\n5");

  // Cancel: the callback reports CANCELLED and no process of the exec survives.
  std::atomic<int> code{-1};
  auto ctl2 = sb.exec_start(sandlet::ExecOptions({"sh", "-c", "sleep 300 & sleep 300"}),
                            [&](const sandlet::Error* err, sandlet::ExecResult) { code = err ? err->code() : 0; });
  CHECK(wait_until([&] { return count_procs(sb, "sleep") == 2; }, 5));
  ctl2.cancel();
  REQUIRE(wait_until([&] { return code.load() != -1; }, 10));
  CHECK(code == SANDLET_CANCELLED);
  CHECK(count_procs(sb, "sleep") == 0);  // CANCELLED is reported once they are dead, not before
  h.check_no_leaks();
}
