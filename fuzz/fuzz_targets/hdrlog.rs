//! `percore bench merge` on arbitrary bytes as one of its interval logs: the reader
//! (`report/hdrlog.rs`: the log's report comment, then HdrHistogram's own log
//! iterator, base64 and deserializer) and the merge of what it read. No panic, no
//! allocation beyond the limits the run sets (`-rss_limit_mb`, `-malloc_limit_mb`),
//! and a bad log refused with one line that names the file.
#![no_main]

use std::fs::File;
use std::io::{Seek, SeekFrom, Write};
use std::os::fd::{AsRawFd, FromRawFd};
use std::path::PathBuf;
use std::sync::{Mutex, OnceLock};

use libfuzzer_sys::fuzz_target;

// The bench code is in the binary crate, not the library: its report module (the
// reader and what it reads into) and the merge are taken as they are. The merge
// finds the reader as `super::report`, this crate's root.
// What the binary re-exports for its other modules goes unused here.
#[allow(dead_code, unused_imports)]
#[path = "../../percore-bin/src/bench/report/mod.rs"]
mod report;

#[allow(dead_code)]
#[path = "../../percore-bin/src/bench/merge.rs"]
mod merge;

fuzz_target!(|data: &[u8]| {
    // The reader takes a path: the input is written to a file in memory, one for the
    // process, that leaves nothing behind.
    let mut log = log_file().lock().unwrap();
    let (file, path) = &mut *log;
    file.set_len(0).unwrap();
    file.seek(SeekFrom::Start(0)).unwrap();
    file.write_all(data).unwrap();
    // One log: the merge's refusal of runs not taken at once, which names no file,
    // cannot arise, as the reader refuses a report longer than its intervals.
    if let Err(error) = merge::merge(std::slice::from_ref(path)) {
        let name = path.display().to_string();
        assert!(error.starts_with(&name) || error.starts_with(&format!("cannot read {name}")), "{error}");
        assert!(error.len() > name.len() + 2 && !error.contains('\n'), "{error:?}");
    }
});

/// An anonymous in-memory file, and the path that opens it.
fn log_file() -> &'static Mutex<(File, PathBuf)> {
    static FILE: OnceLock<Mutex<(File, PathBuf)>> = OnceLock::new();
    FILE.get_or_init(|| {
        let fd = unsafe { libc::memfd_create(c"percore-fuzz-hdrlog".as_ptr(), libc::MFD_CLOEXEC) };
        assert!(fd >= 0, "memfd_create: {}", std::io::Error::last_os_error());
        let file = unsafe { File::from_raw_fd(fd) };
        let path = PathBuf::from(format!("/proc/self/fd/{}", file.as_raw_fd()));
        Mutex::new((file, path))
    })
}
