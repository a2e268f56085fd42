// sandlet quickstart, in C++ (sandlet.hpp): create a sandbox from one layer directory, put a script in
// it, run it, read a file it wrote, destroy the sandbox.
//
//   example-quickstart-cpp [STATE_ROOT [LAYER_DIR]]
//
// STATE_ROOT defaults to $SANDLET_ROOT, else /var/lib/sandlet ("" or "-" also mean the default).
// LAYER_DIR defaults to $SANDLET_EXAMPLE_ROOTFS: a root filesystem directory with /bin/sh (busybox will do).
// Needs root.
#include <sandlet/sandlet.hpp>

#include <cstdlib>
#include <iostream>
#include <string>

namespace {

constexpr char kScript[] =
    "echo \"hello from $(hostname), running as uid $(id -u)\"\n"
    "echo 'written inside the sandbox' > /work/answer.txt\n"
    "exit 0\n";

}  // namespace

int main(int argc, char** argv) {
  const std::string root_arg = argc > 1 ? argv[1] : "";
  const char* env_layer = std::getenv("SANDLET_EXAMPLE_ROOTFS");
  const std::string layer = argc > 2 ? argv[2] : (env_layer != nullptr ? env_layer : "");
  if (layer.empty()) {
    std::cerr << "usage: " << argv[0] << " [STATE_ROOT [LAYER_DIR]]  (or set SANDLET_EXAMPLE_ROOTFS)\n";
    return 2;
  }

  try {
    // 1. The runtime: one per process; closed (owned sandboxes destroyed) when it goes out of scope.
    sandlet::Runtime rt = root_arg.empty() || root_arg == "-" ? sandlet::Runtime::open()
                                                             : sandlet::Runtime::open(root_arg);
    std::cout << "runtime at " << rt.root() << ", sandlet " << sandlet::version() << "\n";

    // 2. The spec: setters validate, name the field in their error, and chain.
    sandlet::Spec spec = sandlet::Spec().layer(layer).label("example", "quickstart").memory(256u << 20);

    // 3. Create it (owned by default: it dies with this runtime or this process).
    sandlet::Sandbox sb = rt.create(spec);
    std::cout << "created sandbox " << sb.id() << "\n";

    // 4. Put a script in it; missing parent directories are created.
    sb.write_file("/work/hello.sh", kScript, 0755);

    // 5. Run it and wait; the result is a plain copy (the C result is already freed).
    sandlet::ExecOptions opts({"sh", "/work/hello.sh"});
    opts.timeout_s = 30;
    const sandlet::ExecResult r = sb.exec(opts);
    std::cout << "stdout: " << r.stdout_data << (r.stdout_data.empty() || r.stdout_data.back() != '\n' ? "\n" : "")
              << "exit code: " << r.exit_code << " (signal " << r.signal << ", timed out: " << r.timed_out << ")\n";

    // 6. Read back the file the script wrote.
    std::cout << "/work/answer.txt: " << sb.read_file("/work/answer.txt");

    // 7. Destroy it explicitly (closing the last handle of an owned sandbox would too).
    sb.destroy();
    std::cout << "destroyed\n";
    return r.exit_code == 0 ? 0 : 1;
  } catch (const sandlet::Error& e) {
    std::cerr << "quickstart: " << e.what() << " [" << e.code_name() << "]\n";
    return 1;
  }
}
