//! A small safe wrapper over sandlet's C ABI (include/sandlet/sandlet.h), with no third-party crates.
//!
//! Every handle is an RAII type whose `Drop` calls the header's null-safe release function; every error
//! the library hands back is copied into an owned [`Error`] and freed at once; buffers the library
//! allocates (file contents) are copied and released with `sandlet_free`.
//!
//! Lifetimes follow the header's rules: a [`Sandbox`] borrows the [`Runtime`] it came from, so it is
//! closed before the runtime is. A [`Spec`] is a plain value (used from one thread at a time); runtimes and
//! sandboxes may be shared between threads.

pub mod ffi;

use std::ffi::{CStr, CString, OsStr};
use std::fmt;
use std::marker::PhantomData;
use std::os::raw::{c_char, c_void};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::ptr;

// ---------------------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------------------

/// An error reported by the library (or, for strings with a NUL byte, by this wrapper before calling it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    /// The `sandlet_code_t` value, e.g. [`ffi::SANDLET_NOT_FOUND`].
    pub code: ffi::sandlet_code_t,
    /// The code's name from `sandlet_code_name`, e.g. "NOT_FOUND".
    pub name: String,
    /// What went wrong; names the field for INVALID_ARGUMENT.
    pub message: String,
    /// The errno behind it, 0 when none applies.
    pub errno: i32,
}

impl Error {
    /// Takes ownership of a non-null `sandlet_error_t *`, copies it out and frees it.
    ///
    /// # Safety
    /// `err` must be a live error returned by the library and not used again afterwards.
    pub unsafe fn from_raw(err: *mut ffi::sandlet_error_t) -> Error {
        let code = ffi::sandlet_error_code(err);
        let e = Error {
            code,
            name: code_name(code),
            message: owned_string(ffi::sandlet_error_message(err)),
            errno: ffi::sandlet_error_errno(err),
        };
        ffi::sandlet_error_delete(err);
        e
    }

    fn invalid_argument(message: String) -> Error {
        Error {
            code: ffi::SANDLET_INVALID_ARGUMENT,
            name: code_name(ffi::SANDLET_INVALID_ARGUMENT),
            message,
            errno: 0,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} [{}]", self.message, self.name)?;
        if self.errno != 0 {
            write!(f, " (errno {})", self.errno)?;
        }
        Ok(())
    }
}

impl std::error::Error for Error {}

/// Turns the return value of a fallible call into a `Result`, freeing the error if there is one.
fn check(err: *mut ffi::sandlet_error_t) -> Result<(), Error> {
    if err.is_null() {
        Ok(())
    } else {
        // SAFETY: a non-null return of a fallible call is an error the caller owns.
        Err(unsafe { Error::from_raw(err) })
    }
}

/// The name of a code ("NOT_FOUND"); the library's string is static.
pub fn code_name(code: ffi::sandlet_code_t) -> String {
    unsafe { owned_string(ffi::sandlet_code_name(code)) }
}

/// Copies a C string the library owns; null becomes "".
unsafe fn owned_string(s: *const c_char) -> String {
    if s.is_null() {
        String::new()
    } else {
        CStr::from_ptr(s).to_string_lossy().into_owned()
    }
}

/// A C copy of `s` for one call; a NUL byte inside is reported as INVALID_ARGUMENT naming `what`.
fn c_string<S: AsRef<OsStr> + ?Sized>(what: &str, s: &S) -> Result<CString, Error> {
    CString::new(s.as_ref().as_bytes())
        .map_err(|_| Error::invalid_argument(format!("{}: contains a NUL byte", what)))
}

// ---------------------------------------------------------------------------------------------------
// Versions
// ---------------------------------------------------------------------------------------------------

/// The library's version, e.g. "0.1.0".
pub fn version() -> String {
    unsafe { owned_string(ffi::sandlet_version_string()) }
}

/// The ABI version of the loaded library; compare with [`ffi::SANDLET_ABI_VERSION`].
pub fn abi_version() -> u32 {
    unsafe { ffi::sandlet_abi_version() }
}

// ---------------------------------------------------------------------------------------------------
// Runtime
// ---------------------------------------------------------------------------------------------------

/// `sandlet_runtime_t`: the state directory, an event-loop thread and a worker pool. Dropping it closes it,
/// which destroys every `owned` sandbox it created.
pub struct Runtime {
    raw: *mut ffi::sandlet_runtime_t,
}

// The header: "a runtime, and the sandboxes opened from it, may be used from any thread concurrently".
unsafe impl Send for Runtime {}
unsafe impl Sync for Runtime {}

impl Runtime {
    /// Opens (creating if needed) the runtime rooted at `root`; `None` means $SANDLET_ROOT, else
    /// /var/lib/sandlet.
    pub fn open(root: Option<&Path>) -> Result<Runtime, Error> {
        let root = match root {
            Some(r) => Some(c_string("root", r)?),
            None => None,
        };
        let root_ptr = root.as_ref().map_or(ptr::null(), |r| r.as_ptr());
        let mut raw = ptr::null_mut();
        check(unsafe { ffi::sandlet_runtime_open(root_ptr, ptr::null(), &mut raw) })?;
        Ok(Runtime { raw })
    }

    /// The state directory in use.
    pub fn root(&self) -> String {
        unsafe { owned_string(ffi::sandlet_runtime_root(self.raw)) }
    }

    /// Creates a sandbox (blocking). On failure nothing is left behind.
    pub fn create(&self, spec: &Spec) -> Result<Sandbox<'_>, Error> {
        let mut raw = ptr::null_mut();
        check(unsafe { ffi::sandlet_sandbox_create(self.raw, spec.raw, &mut raw) })?;
        Ok(Sandbox {
            raw,
            _runtime: PhantomData,
        })
    }

    /// The raw handle, for calls this wrapper does not cover. Still owned by `self`.
    pub fn as_ptr(&self) -> *mut ffi::sandlet_runtime_t {
        self.raw
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        unsafe { ffi::sandlet_runtime_close(self.raw) }
    }
}

// ---------------------------------------------------------------------------------------------------
// Spec
// ---------------------------------------------------------------------------------------------------

/// `sandlet_spec_t`: what a sandbox looks like. Setters validate and name the field in their error; they
/// return `&mut Self` so that calls chain with `?`.
pub struct Spec {
    raw: *mut ffi::sandlet_spec_t,
}

// A plain value: may move between threads, but is not for concurrent use (no Sync).
unsafe impl Send for Spec {}

impl Spec {
    pub fn new() -> Result<Spec, Error> {
        let mut raw = ptr::null_mut();
        check(unsafe { ffi::sandlet_spec_new(&mut raw) })?;
        Ok(Spec { raw })
    }

    /// Adds a read-only layer on top of those already added: an absolute host directory, or a layer of the
    /// runtime's store by digest or name.
    pub fn add_layer<S: AsRef<OsStr> + ?Sized>(&mut self, layer: &S) -> Result<&mut Self, Error> {
        let layer = c_string("layer", layer)?;
        check(unsafe { ffi::sandlet_spec_add_layer(self.raw, layer.as_ptr()) })?;
        Ok(self)
    }

    pub fn set_env(&mut self, key: &str, value: &str) -> Result<&mut Self, Error> {
        let (k, v) = (c_string("env key", key)?, c_string("env value", value)?);
        check(unsafe { ffi::sandlet_spec_set_env(self.raw, k.as_ptr(), v.as_ptr()) })?;
        Ok(self)
    }

    pub fn set_label(&mut self, key: &str, value: &str) -> Result<&mut Self, Error> {
        let (k, v) = (c_string("label key", key)?, c_string("label value", value)?);
        check(unsafe { ffi::sandlet_spec_set_label(self.raw, k.as_ptr(), v.as_ptr()) })?;
        Ok(self)
    }

    pub fn set_memory(&mut self, bytes: u64) -> Result<&mut Self, Error> {
        check(unsafe { ffi::sandlet_spec_set_memory(self.raw, bytes) })?;
        Ok(self)
    }
}

impl Drop for Spec {
    fn drop(&mut self) {
        unsafe { ffi::sandlet_spec_delete(self.raw) }
    }
}

// ---------------------------------------------------------------------------------------------------
// Sandbox
// ---------------------------------------------------------------------------------------------------

/// `sandlet_sandbox_t`: a handle on a sandbox. Dropping it closes the handle; for an `owned` sandbox (the
/// default) closing the last handle also destroys the sandbox.
pub struct Sandbox<'rt> {
    raw: *mut ffi::sandlet_sandbox_t,
    _runtime: PhantomData<&'rt Runtime>,
}

unsafe impl Send for Sandbox<'_> {}
unsafe impl Sync for Sandbox<'_> {}

/// Options of one exec; `ExecOptions::default()` is `SANDLET_EXEC_OPTIONS_INIT`.
#[derive(Debug, Clone, Default)]
pub struct ExecOptions<'a> {
    /// "KEY=VALUE" entries added to the spec's environment.
    pub env: &'a [&'a str],
    /// None = the spec's workdir.
    pub cwd: Option<&'a str>,
    /// None = the spec's user; "uid[:gid]" or a name from the sandbox's /etc/passwd.
    pub user: Option<&'a str>,
    /// Bytes fed to stdin, then EOF.
    pub stdin: &'a [u8],
    /// 0 = no timeout; on expiry every process of the exec is killed.
    pub timeout_s: f64,
}

/// What an exec produced, copied out of the `sandlet_exec_result_t` (which is freed).
#[derive(Debug, Clone)]
pub struct Output {
    /// -1 if killed by a signal.
    pub exit_code: i32,
    /// 0 if it exited.
    pub signal: i32,
    pub timed_out: bool,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    pub stdout_truncated: bool,
    pub stderr_truncated: bool,
}

impl Output {
    /// Exited with status 0.
    pub fn success(&self) -> bool {
        self.exit_code == 0 && self.signal == 0 && !self.timed_out
    }
}

/// Frees a `sandlet_exec_result_t` however the scope is left.
struct ExecResultGuard(*mut ffi::sandlet_exec_result_t);

impl Drop for ExecResultGuard {
    fn drop(&mut self) {
        unsafe { ffi::sandlet_exec_result_delete(self.0) }
    }
}

/// Copies `len` bytes at `p` (which may be null when `len` is 0).
unsafe fn copy_bytes(p: *const c_void, len: usize) -> Vec<u8> {
    if p.is_null() || len == 0 {
        Vec::new()
    } else {
        std::slice::from_raw_parts(p as *const u8, len).to_vec()
    }
}

impl<'rt> Sandbox<'rt> {
    /// The sandbox's id.
    pub fn id(&self) -> String {
        unsafe { owned_string(ffi::sandlet_sandbox_id(self.raw)) }
    }

    /// Runs `argv` (argv[0] resolved through PATH) with default options and waits for it.
    pub fn exec(&self, argv: &[&str]) -> Result<Output, Error> {
        self.exec_with(argv, &ExecOptions::default())
    }

    /// Runs `argv` and waits for it to exit and for its output to end. A command that cannot be started is
    /// an `Err` (NOT_FOUND, PERMISSION_DENIED); a command that fails is an `Ok` with its exit code.
    pub fn exec_with(&self, argv: &[&str], opts: &ExecOptions<'_>) -> Result<Output, Error> {
        // Owned C strings, then the NULL-terminated pointer arrays the header wants. Both live until the
        // call returns (the library copies what it keeps).
        let argv_c = argv
            .iter()
            .map(|a| c_string("argv", a))
            .collect::<Result<Vec<_>, _>>()?;
        let env_c = opts
            .env
            .iter()
            .map(|e| c_string("env", e))
            .collect::<Result<Vec<_>, _>>()?;
        let mut argv_p: Vec<*const c_char> = argv_c.iter().map(|s| s.as_ptr()).collect();
        argv_p.push(ptr::null());
        let mut env_p: Vec<*const c_char> = env_c.iter().map(|s| s.as_ptr()).collect();
        env_p.push(ptr::null());
        let cwd = match opts.cwd {
            Some(c) => Some(c_string("cwd", c)?),
            None => None,
        };
        let user = match opts.user {
            Some(u) => Some(c_string("user", u)?),
            None => None,
        };

        let (stdin_data, stdin_len) = if opts.stdin.is_empty() {
            (ptr::null(), 0) // NULL = empty stdin
        } else {
            (opts.stdin.as_ptr() as *const c_void, opts.stdin.len())
        };
        // `..Default::default()` sets `size` (and zeroes the rest), like SANDLET_EXEC_OPTIONS_INIT.
        let o = ffi::sandlet_exec_options_t {
            argv: argv_p.as_ptr(),
            env: if opts.env.is_empty() {
                ptr::null()
            } else {
                env_p.as_ptr()
            },
            cwd: cwd.as_ref().map_or(ptr::null(), |c| c.as_ptr()),
            user: user.as_ref().map_or(ptr::null(), |u| u.as_ptr()),
            stdin_data,
            stdin_len,
            timeout_s: opts.timeout_s,
            ..Default::default()
        };

        let mut raw = ptr::null_mut();
        check(unsafe { ffi::sandlet_sandbox_exec(self.raw, &o, &mut raw) })?;
        let r = ExecResultGuard(raw);
        unsafe {
            let (mut out_len, mut err_len) = (0usize, 0usize);
            let out = ffi::sandlet_exec_result_stdout(r.0, &mut out_len);
            let err = ffi::sandlet_exec_result_stderr(r.0, &mut err_len);
            Ok(Output {
                exit_code: ffi::sandlet_exec_result_exit_code(r.0),
                signal: ffi::sandlet_exec_result_signal(r.0),
                timed_out: ffi::sandlet_exec_result_timed_out(r.0) != 0,
                stdout: copy_bytes(out as *const c_void, out_len),
                stderr: copy_bytes(err as *const c_void, err_len),
                stdout_truncated: ffi::sandlet_exec_result_stdout_truncated(r.0) != 0,
                stderr_truncated: ffi::sandlet_exec_result_stderr_truncated(r.0) != 0,
            })
        }
    }

    /// Creates or replaces `path` inside the sandbox (missing parents are created); mode 0 = 0644.
    pub fn write_file(&self, path: &str, data: &[u8], mode: u32) -> Result<(), Error> {
        let p = c_string("path", path)?;
        check(unsafe {
            ffi::sandlet_sandbox_write_file(
                self.raw,
                p.as_ptr(),
                data.as_ptr() as *const c_void,
                data.len(),
                mode,
            )
        })
    }

    /// Reads `path` inside the sandbox; `max_bytes` 0 = 64 MiB, a larger file is OUT_OF_RANGE.
    pub fn read_file(&self, path: &str, max_bytes: u64) -> Result<Vec<u8>, Error> {
        let p = c_string("path", path)?;
        let mut data: *mut c_void = ptr::null_mut();
        let mut len = 0usize;
        check(unsafe {
            ffi::sandlet_sandbox_read_file(self.raw, p.as_ptr(), max_bytes, &mut data, &mut len)
        })?;
        unsafe {
            let bytes = copy_bytes(data, len);
            ffi::sandlet_free(data);
            Ok(bytes)
        }
    }

    /// Kills every process of the sandbox and removes it. The handle stays valid until dropped, but every
    /// call on it then fails with FAILED_PRECONDITION.
    pub fn destroy(&self) -> Result<(), Error> {
        check(unsafe { ffi::sandlet_sandbox_destroy(self.raw) })
    }

    /// The raw handle, for calls this wrapper does not cover. Still owned by `self`.
    pub fn as_ptr(&self) -> *mut ffi::sandlet_sandbox_t {
        self.raw
    }
}

impl Drop for Sandbox<'_> {
    fn drop(&mut self) {
        unsafe { ffi::sandlet_sandbox_close(self.raw) }
    }
}
