//! System calls interrupted by a signal (`EINTR`) are made again.

use std::io;

/// Makes `call` again while it fails with `EINTR`.
pub(super) fn restarting<T>(mut call: impl FnMut() -> io::Result<T>) -> io::Result<T> {
    loop {
        match call() {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            result => return result,
        }
    }
}
