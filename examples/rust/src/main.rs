//! sandlet quickstart, in Rust: the scenario of examples/quickstart.c through the C ABI, with no crates.
//! Creates a sandbox from one layer directory, puts a script in it, runs it and one more command, reads a
//! file the script wrote, shows how an error is reported, destroys the sandbox, closes the runtime.
//!
//!   sandlet-quickstart [STATE_ROOT [LAYER_DIR]]
//!
//! STATE_ROOT defaults to $SANDLET_ROOT, else /var/lib/sandlet ("" or "-" also mean the default).
//! LAYER_DIR defaults to $SANDLET_EXAMPLE_ROOTFS: a root filesystem directory with /bin/sh (busybox will do).
//! Needs root. Exits 0 on success, 1 on failure (printing the step, the error's message and code name),
//! 2 on bad usage.

use sandlet::{Error, ExecOptions, Runtime, Spec};
use std::ffi::OsString;
use std::path::PathBuf;
use std::process;

const SCRIPT: &str = "echo \"hello from $(hostname), running as uid $(id -u)\"\n\
                      echo 'written inside the sandbox' > /work/answer.txt\n\
                      exit 0\n";

/// A failed step: what was being done, and the library's error.
struct Failure {
    what: String,
    err: Error,
}

/// Attaches the step's description to an error, for `?`.
trait Step<T> {
    fn step(self, what: &str) -> Result<T, Failure>;
}

impl<T> Step<T> for Result<T, Error> {
    fn step(self, what: &str) -> Result<T, Failure> {
        self.map_err(|err| Failure {
            what: what.to_string(),
            err,
        })
    }
}

/// Prints `bytes` after `label`, ending with exactly one newline (like the C example's "%.*s").
fn print_text(label: &str, bytes: &[u8]) {
    let text = String::from_utf8_lossy(bytes);
    if text.ends_with('\n') {
        print!("{}: {}", label, text);
    } else {
        println!("{}: {}", label, text);
    }
}

/// The scenario. Returns the process exit code; every handle is released (in reverse order: sandbox
/// handle, spec, runtime) before it returns, also on the error paths.
fn run(root: Option<PathBuf>, layer: OsString) -> Result<i32, Failure> {
    // 0. The library loaded at run time must speak the ABI these declarations were written for.
    let abi = sandlet::abi_version();
    if abi != sandlet::ffi::SANDLET_ABI_VERSION {
        eprintln!(
            "quickstart: libsandlet has ABI version {}, this program was written for {}",
            abi,
            sandlet::ffi::SANDLET_ABI_VERSION
        );
        return Ok(1);
    }

    // 1. The runtime: one per process; it owns the state directory and an event-loop thread.
    let rt = Runtime::open(root.as_deref()).step("open runtime")?;
    println!(
        "runtime at {}, sandlet {} (ABI {})",
        rt.root(),
        sandlet::version(),
        abi
    );

    // 2. The spec: one read-only layer, a label, a memory limit. Setters validate and name the field.
    let mut spec = Spec::new().step("new spec")?;
    spec.add_layer(&layer)
        .step("add layer")?
        .set_label("example", "quickstart-rust")
        .step("set label")?
        .set_memory(256 << 20)
        .step("set memory")?;

    // 3. Create it (owned by default: it dies with this runtime or this process).
    let sb = rt.create(&spec).step("create sandbox")?;
    println!("created sandbox {}", sb.id());

    // 4. Put a script in it; missing parent directories are created.
    sb.write_file("/work/hello.sh", SCRIPT.as_bytes(), 0o755)
        .step("write /work/hello.sh")?;

    // 5. Run it and wait; output is collected (up to 16 MiB per stream by default).
    let opts = ExecOptions {
        timeout_s: 30.0,
        ..ExecOptions::default()
    };
    let hello = sb
        .exec_with(&["sh", "/work/hello.sh"], &opts)
        .step("exec sh /work/hello.sh")?;
    print_text("stdout", &hello.stdout);
    println!(
        "exit code: {} (signal {}, timed out: {})",
        hello.exit_code, hello.signal, hello.timed_out as i32
    );

    // 6. One more command, this time with stdin.
    let opts = ExecOptions {
        stdin: b"fed through stdin\n",
        timeout_s: 30.0,
        ..ExecOptions::default()
    };
    let upper = sb.exec_with(&["tr", "a-z", "A-Z"], &opts).step("exec tr")?;
    print_text("tr a-z A-Z", &upper.stdout);

    // 7. Read back the file the script wrote.
    let answer = sb
        .read_file("/work/answer.txt", 0)
        .step("read /work/answer.txt")?;
    print_text("/work/answer.txt", &answer);

    // 8. How errors come back: a command that cannot be started is an error (NOT_FOUND), not a result.
    match sb.exec(&["no-such-command"]) {
        Err(e) => println!(
            "expected error: exec no-such-command: {} [{}]",
            e.message, e.name
        ),
        Ok(r) => {
            eprintln!(
                "quickstart: exec no-such-command unexpectedly ran (exit code {})",
                r.exit_code
            );
            return Ok(1);
        }
    }

    // 9. Destroy it explicitly (dropping the last handle of an owned sandbox would too). The handle stays
    //    valid until dropped; calls on it now fail with FAILED_PRECONDITION.
    sb.destroy().step("destroy")?;
    println!("destroyed");
    match sb.exec(&["true"]) {
        Err(e) => println!(
            "expected error: exec after destroy: {} [{}]",
            e.message, e.name
        ),
        Ok(_) => {
            eprintln!("quickstart: exec after destroy unexpectedly succeeded");
            return Ok(1);
        }
    }

    // 10. Release the handles; closing the runtime destroys any owned sandbox still alive.
    drop(sb);
    drop(spec);
    drop(rt);
    println!("runtime closed");
    Ok(if hello.success() { 0 } else { 1 })
}

fn main() {
    let mut args = std::env::args_os();
    let prog = args
        .next()
        .map(|a| a.to_string_lossy().into_owned())
        .unwrap_or_default();
    let root = args
        .next()
        .filter(|r| !r.is_empty() && r != "-")
        .map(PathBuf::from);
    let layer = args
        .next()
        .or_else(|| std::env::var_os("SANDLET_EXAMPLE_ROOTFS"))
        .filter(|l| !l.is_empty());
    let layer = match layer {
        Some(l) => l,
        None => {
            eprintln!(
                "usage: {} [STATE_ROOT [LAYER_DIR]]  (or set SANDLET_EXAMPLE_ROOTFS)",
                prog
            );
            process::exit(2);
        }
    };
    // process::exit skips destructors, so it is called only after run() has released everything.
    let code = match run(root, layer) {
        Ok(code) => code,
        Err(f) => {
            eprintln!("quickstart: {}: {}", f.what, f.err);
            1
        }
    };
    process::exit(code);
}
