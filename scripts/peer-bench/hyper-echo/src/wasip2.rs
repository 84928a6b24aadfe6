//! What lets this plugin be built with the `wasm32-wasip2` standard library, the only wasm
//! one this machine's toolchain has (no `wasm32-wasip1`, which hyper-mcp's docs build
//! plugins for, and no way to fetch it: registries only). The build links a core module
//! (`--skip-wit-component`), as Extism loads; wasi-libc's p2 build would import WASI 0.2
//! functions, which Extism's preview 1 host does not have. These definitions take their
//! symbols, so the module imports only `extism:host/env`. They are stdio, environment and
//! exit: an echo that neither prints nor panics never reaches them, and one that did would
//! trap (a resource drop is a no-op). The bench's first call checks the echo answers.

#![allow(unsafe_code, reason = "the symbols wasi-libc imports are defined here, as it declares them")]

use core::arch::wasm32::unreachable;

macro_rules! no_op {
    ($($name:ident),* $(,)?) => {$(
        #[unsafe(no_mangle)]
        extern "C" fn $name(_handle: i32) {}
    )*};
}

macro_rules! trap {
    ($($name:ident ( $($arg:ident),* ) $(-> $ret:ty)?),* $(,)?) => {$(
        #[unsafe(no_mangle)]
        extern "C" fn $name($(_: $arg),*) $(-> $ret)? {
            unreachable()
        }
    )*};
}

no_op!(
    __wasm_import_io_error_error_drop,
    __wasm_import_poll_pollable_drop,
    __wasm_import_streams_input_stream_drop,
    __wasm_import_streams_output_stream_drop,
    __wasm_import_terminal_input_terminal_input_drop,
    __wasm_import_terminal_output_terminal_output_drop,
);

trap!(
    __wasm_import_environment_get_environment(i32),
    __wasm_import_exit_exit(i32),
    __wasm_import_poll_method_pollable_block(i32),
    __wasm_import_streams_method_output_stream_check_write(i32, i32),
    __wasm_import_streams_method_output_stream_write(i32, i32, i32, i32),
    __wasm_import_streams_method_output_stream_blocking_flush(i32, i32),
    __wasm_import_streams_method_output_stream_subscribe(i32) -> i32,
    __wasm_import_stdin_get_stdin() -> i32,
    __wasm_import_stdout_get_stdout() -> i32,
    __wasm_import_stderr_get_stderr() -> i32,
    __wasm_import_terminal_stdin_get_terminal_stdin(i32),
    __wasm_import_terminal_stdout_get_terminal_stdout(i32),
    __wasm_import_terminal_stderr_get_terminal_stderr(i32),
);
