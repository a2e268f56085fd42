//! Hand-written declarations for the part of include/sandlet/sandlet.h this example uses.
//!
//! Kept in step with the header by hand: when the header changes, so must this file. Conventions of the
//! ABI (see the header's top comment): a fallible call returns `*mut sandlet_error_t`, null on success,
//! otherwise owned by the caller (release with `sandlet_error_delete`); every handle has one null-safe
//! release function; strings passed in are copied; returned strings belong to the object they came from.
#![allow(non_camel_case_types)]
#![allow(dead_code)]

use std::os::raw::{c_char, c_double, c_int, c_void};

/// The ABI version this file was written against (`SANDLET_ABI_VERSION`).
pub const SANDLET_ABI_VERSION: u32 = 1;

// Opaque handles: only ever used behind pointers. The private zero-sized field means Rust code outside this
// module cannot construct, size or move one.
#[repr(C)]
pub struct sandlet_error_t {
    _p: [u8; 0],
}
#[repr(C)]
pub struct sandlet_runtime_t {
    _p: [u8; 0],
}
#[repr(C)]
pub struct sandlet_spec_t {
    _p: [u8; 0],
}
#[repr(C)]
pub struct sandlet_sandbox_t {
    _p: [u8; 0],
}
#[repr(C)]
pub struct sandlet_exec_result_t {
    _p: [u8; 0],
}

/// `enum sandlet_code` (an `int`-sized C enum). Kept as a plain integer rather than a Rust enum: a value
/// this file does not know (from a newer library) must not be undefined behaviour.
pub type sandlet_code_t = c_int;
pub const SANDLET_OK: sandlet_code_t = 0;
pub const SANDLET_CANCELLED: sandlet_code_t = 1;
pub const SANDLET_UNKNOWN: sandlet_code_t = 2;
pub const SANDLET_INVALID_ARGUMENT: sandlet_code_t = 3;
pub const SANDLET_DEADLINE_EXCEEDED: sandlet_code_t = 4;
pub const SANDLET_NOT_FOUND: sandlet_code_t = 5;
pub const SANDLET_ALREADY_EXISTS: sandlet_code_t = 6;
pub const SANDLET_PERMISSION_DENIED: sandlet_code_t = 7;
pub const SANDLET_RESOURCE_EXHAUSTED: sandlet_code_t = 8;
pub const SANDLET_FAILED_PRECONDITION: sandlet_code_t = 9;
pub const SANDLET_ABORTED: sandlet_code_t = 10;
pub const SANDLET_OUT_OF_RANGE: sandlet_code_t = 11;
pub const SANDLET_UNIMPLEMENTED: sandlet_code_t = 12;
pub const SANDLET_INTERNAL: sandlet_code_t = 13;
pub const SANDLET_UNAVAILABLE: sandlet_code_t = 14;
pub const SANDLET_DATA_LOSS: sandlet_code_t = 15;

/// `struct sandlet_runtime_options` (20 bytes). Null options mean the defaults, which this example uses.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct sandlet_runtime_options_t {
    pub size: u32,
    pub worker_threads: u32,
    pub skip_gc_on_open: c_int,
    pub disable_warm_pool: c_int,
    pub create_soon: c_int,
}

impl Default for sandlet_runtime_options_t {
    /// The equivalent of `SANDLET_RUNTIME_OPTIONS_INIT`.
    fn default() -> Self {
        sandlet_runtime_options_t {
            size: std::mem::size_of::<sandlet_runtime_options_t>() as u32,
            worker_threads: 0,
            skip_gc_on_open: 0,
            disable_warm_pool: 0,
            create_soon: 0,
        }
    }
}

/// `sandlet_output_cb`. Declared for the layout of `sandlet_exec_options_t`; this example leaves it unset.
pub type sandlet_output_cb = Option<
    unsafe extern "C" fn(user_data: *mut c_void, stream: c_int, data: *const c_void, len: usize),
>;

/// `struct sandlet_exec_options`, field by field (same order, same C types). On LP64 (x86_64, aarch64)
/// it is 96 bytes: size@0 (then 4 bytes of padding), argv@8, env@16, cwd@24, user@32, stdin_data@40,
/// stdin_len@48, timeout_s@56, output_limit@64, kill_on_output_limit@72, keep_background@76,
/// on_output@80, output_user_data@88. `size` must be set to `size_of::<sandlet_exec_options_t>()`:
/// `Default` does that, like SANDLET_EXEC_OPTIONS_INIT. (A library newer than this declaration gives
/// the fields it added their defaults; see the header's conventions.)
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct sandlet_exec_options_t {
    pub size: u32,
    pub argv: *const *const c_char,
    pub env: *const *const c_char,
    pub cwd: *const c_char,
    pub user: *const c_char,
    pub stdin_data: *const c_void,
    pub stdin_len: usize,
    pub timeout_s: c_double,
    pub output_limit: u64,
    pub kill_on_output_limit: c_int,
    pub keep_background: c_int,
    pub on_output: sandlet_output_cb,
    pub output_user_data: *mut c_void,
}

impl Default for sandlet_exec_options_t {
    /// The equivalent of `SANDLET_EXEC_OPTIONS_INIT`: `size` set, everything else zero / null.
    fn default() -> Self {
        sandlet_exec_options_t {
            size: std::mem::size_of::<sandlet_exec_options_t>() as u32,
            argv: std::ptr::null(),
            env: std::ptr::null(),
            cwd: std::ptr::null(),
            user: std::ptr::null(),
            stdin_data: std::ptr::null(),
            stdin_len: 0,
            timeout_s: 0.0,
            output_limit: 0,
            kill_on_output_limit: 0,
            keep_background: 0,
            on_output: None,
            output_user_data: std::ptr::null_mut(),
        }
    }
}

// The header's layout on 64-bit Linux, checked at compile time (const panics are stable since 1.57).
#[cfg(target_pointer_width = "64")]
const _: () = assert!(std::mem::size_of::<sandlet_exec_options_t>() == 96);
#[cfg(target_pointer_width = "64")]
const _: () = assert!(std::mem::align_of::<sandlet_exec_options_t>() == 8);
const _: () = assert!(std::mem::size_of::<sandlet_runtime_options_t>() == 20);

extern "C" {
    // Errors.
    pub fn sandlet_error_code(err: *const sandlet_error_t) -> sandlet_code_t;
    pub fn sandlet_error_message(err: *const sandlet_error_t) -> *const c_char;
    pub fn sandlet_error_errno(err: *const sandlet_error_t) -> c_int;
    pub fn sandlet_error_delete(err: *mut sandlet_error_t);
    pub fn sandlet_code_name(code: sandlet_code_t) -> *const c_char;
    pub fn sandlet_free(ptr: *mut c_void);

    // Versions.
    pub fn sandlet_abi_version() -> u32;
    pub fn sandlet_version_string() -> *const c_char;

    // Runtime.
    pub fn sandlet_runtime_open(
        root: *const c_char,
        opts: *const sandlet_runtime_options_t,
        out: *mut *mut sandlet_runtime_t,
    ) -> *mut sandlet_error_t;
    pub fn sandlet_runtime_close(rt: *mut sandlet_runtime_t);
    pub fn sandlet_runtime_root(rt: *const sandlet_runtime_t) -> *const c_char;

    // Spec.
    pub fn sandlet_spec_new(out: *mut *mut sandlet_spec_t) -> *mut sandlet_error_t;
    pub fn sandlet_spec_delete(spec: *mut sandlet_spec_t);
    pub fn sandlet_spec_add_layer(
        spec: *mut sandlet_spec_t,
        layer: *const c_char,
    ) -> *mut sandlet_error_t;
    pub fn sandlet_spec_set_env(
        spec: *mut sandlet_spec_t,
        key: *const c_char,
        value: *const c_char,
    ) -> *mut sandlet_error_t;
    pub fn sandlet_spec_set_label(
        spec: *mut sandlet_spec_t,
        key: *const c_char,
        value: *const c_char,
    ) -> *mut sandlet_error_t;
    pub fn sandlet_spec_set_memory(spec: *mut sandlet_spec_t, bytes: u64) -> *mut sandlet_error_t;

    // Sandboxes.
    pub fn sandlet_sandbox_create(
        rt: *mut sandlet_runtime_t,
        spec: *const sandlet_spec_t,
        out: *mut *mut sandlet_sandbox_t,
    ) -> *mut sandlet_error_t;
    pub fn sandlet_sandbox_id(sb: *const sandlet_sandbox_t) -> *const c_char;
    pub fn sandlet_sandbox_destroy(sb: *mut sandlet_sandbox_t) -> *mut sandlet_error_t;
    pub fn sandlet_sandbox_close(sb: *mut sandlet_sandbox_t);

    // Exec.
    pub fn sandlet_sandbox_exec(
        sb: *mut sandlet_sandbox_t,
        opts: *const sandlet_exec_options_t,
        out: *mut *mut sandlet_exec_result_t,
    ) -> *mut sandlet_error_t;
    pub fn sandlet_exec_result_exit_code(r: *const sandlet_exec_result_t) -> c_int;
    pub fn sandlet_exec_result_signal(r: *const sandlet_exec_result_t) -> c_int;
    pub fn sandlet_exec_result_timed_out(r: *const sandlet_exec_result_t) -> c_int;
    pub fn sandlet_exec_result_stdout(
        r: *const sandlet_exec_result_t,
        len: *mut usize,
    ) -> *const c_char;
    pub fn sandlet_exec_result_stderr(
        r: *const sandlet_exec_result_t,
        len: *mut usize,
    ) -> *const c_char;
    pub fn sandlet_exec_result_stdout_truncated(r: *const sandlet_exec_result_t) -> c_int;
    pub fn sandlet_exec_result_stderr_truncated(r: *const sandlet_exec_result_t) -> c_int;
    pub fn sandlet_exec_result_delete(r: *mut sandlet_exec_result_t);

    // Files.
    pub fn sandlet_sandbox_write_file(
        sb: *mut sandlet_sandbox_t,
        path: *const c_char,
        data: *const c_void,
        len: usize,
        mode: u32,
    ) -> *mut sandlet_error_t;
    pub fn sandlet_sandbox_read_file(
        sb: *mut sandlet_sandbox_t,
        path: *const c_char,
        max_bytes: u64,
        data: *mut *mut c_void,
        len: *mut usize,
    ) -> *mut sandlet_error_t;
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::MaybeUninit;
    use std::ptr::addr_of;

    /// Field offsets as the C compiler lays out the header's struct on LP64 (checked with offsetof).
    #[test]
    #[cfg(target_pointer_width = "64")]
    fn exec_options_layout_matches_the_header() {
        let o = MaybeUninit::<sandlet_exec_options_t>::uninit();
        let base = o.as_ptr() as usize;
        // addr_of! on a field of an uninitialised struct only computes an address; nothing is read.
        let off = |p: usize| p - base;
        unsafe {
            let p = o.as_ptr();
            assert_eq!(off(addr_of!((*p).size) as usize), 0);
            assert_eq!(off(addr_of!((*p).argv) as usize), 8);
            assert_eq!(off(addr_of!((*p).env) as usize), 16);
            assert_eq!(off(addr_of!((*p).cwd) as usize), 24);
            assert_eq!(off(addr_of!((*p).user) as usize), 32);
            assert_eq!(off(addr_of!((*p).stdin_data) as usize), 40);
            assert_eq!(off(addr_of!((*p).stdin_len) as usize), 48);
            assert_eq!(off(addr_of!((*p).timeout_s) as usize), 56);
            assert_eq!(off(addr_of!((*p).output_limit) as usize), 64);
            assert_eq!(off(addr_of!((*p).kill_on_output_limit) as usize), 72);
            assert_eq!(off(addr_of!((*p).keep_background) as usize), 76);
            assert_eq!(off(addr_of!((*p).on_output) as usize), 80);
            assert_eq!(off(addr_of!((*p).output_user_data) as usize), 88);
        }
        assert_eq!(std::mem::size_of::<sandlet_exec_options_t>(), 96);
        assert_eq!(sandlet_exec_options_t::default().size, 96);
    }
}
