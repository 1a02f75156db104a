//! The `main` of a test program that runs without libtest's harness (`harness =
//! false` in Cargo.toml). Its server forks, and the master refuses to fork from a
//! process that runs more than one thread, as libtest's does: so the program is
//! both the test and, started again with a role in its environment, the server.

use std::process::ExitCode;

/// The server (`serve`) if the environment variable `role` is set, else the test
/// `name` (`check`), reported as libtest reports one. Of libtest's arguments,
/// `--list` alone is honoured (`cargo test -- --list`); filters and the rest are
/// ignored: the test always runs, never skipped by an argument misread.
pub fn test_or_serve(
    name: &str,
    role: &str,
    check: impl FnOnce() -> Result<(), String>,
    serve: impl FnOnce() -> ExitCode,
) -> ExitCode {
    if std::env::var_os(role).is_some() {
        return serve();
    }
    if std::env::args().any(|arg| arg == "--list") {
        println!("{name}: test");
        return ExitCode::SUCCESS;
    }
    match check() {
        Ok(()) => {
            println!("test {name} ... ok");
            ExitCode::SUCCESS
        }
        Err(why) => {
            eprintln!("test {name} ... FAILED\n{why}");
            ExitCode::FAILURE
        }
    }
}
