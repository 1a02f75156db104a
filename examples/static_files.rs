//! A static file server on percore's loop: the regular files under `--root DIR`,
//! for `GET` and `HEAD`, each file's bytes sent with sendfile(2)
//! ([`Io::write_file`]), never copied to user memory; on one pinned worker process
//! per CPU, with the flags of `percore serve`.
//!
//! ```text
//! cargo run --release --example static_files -- --port 8080 --root ./public
//! curl -O http://127.0.0.1:8080/some/file.bin
//! ```
//!
//! Answers: `200` with `Content-Length` and a `Content-Type` taken from the name
//! (`text/html` for `.html` and `.htm`, `text/plain` for `.txt`,
//! `application/octet-stream` otherwise); `404` for a path that names nothing, a
//! directory, or anything but a regular file (a FIFO, a device, a socket); `403`
//! for a file the server may not read; `405` with `Allow: GET, HEAD` for any other
//! method; `400` for a request head that does not parse, or a target that is not a
//! clean path (then the connection is closed). A request with a body
//! (`Content-Length` above 0, or `Transfer-Encoding: chunked`) is never read: it
//! gets `413` (a `GET` or `HEAD`) or `405` (another method) and the connection is
//! closed after the answer. Every answer carries `Date`.
//!
//! Connections: HTTP/1.1 keeps the connection unless the request says
//! `Connection: close`; HTTP/1.0 closes it unless the request says
//! `Connection: keep-alive` (then the answer says so too). Pipelined requests are
//! answered in order; once a connection's unsent output is full ([`Io::is_full`])
//! the server stops and pauses, and goes on with the rest once the client has read
//! enough. In a graceful stop every answer says `Connection: close`.
//!
//! Paths never leave the root. The target's path (its query dropped) is
//! percent-decoded here; a bad escape (`%zz`, `%4`), an encoded `/` or `\` (`%2f`,
//! `%5c`, in any case), a NUL or other control byte, a `\`, and a `..` segment
//! (also as `%2e%2e`, in any case) are refused with `400`: nothing is resolved
//! against its parent. The root is made canonical once, at start. A file is
//! opened (`O_NONBLOCK`, so that a FIFO swapped in cannot block the loop), and then
//! the *opened* file is checked: its metadata must say a regular file, and its real
//! path, as `/proc/self/fd/N` names it, must lie under the root; else `404`. A
//! symlink inside the root that points out of it is so refused, and swapping a
//! symlink in between the check and the open changes nothing, as it is the open
//! descriptor that is checked and sent. (`.` and empty segments are skipped. A hard
//! link or a bind mount inside the root is a file of the root, and served.)
//!
//! What a client gets when a file changes on disk:
//! - `Content-Length` is the file's size when it was opened, for that request;
//! - a file replaced by a rename while it is being sent is sent whole as it was
//!   when opened: the open descriptor keeps the old file; the next request gets the
//!   new one;
//! - a file rewritten in place while it is being sent may go out part old, part
//!   new (the bytes sent are those the file holds when the socket takes them);
//! - a file truncated while it is being sent ends before its range does: the
//!   library then closes the connection, so the client sees the close before
//!   `Content-Length` bytes of body and knows the answer is incomplete.
//!
//! Limits: the request head as [`Limits::default`] (8 KiB for the request line,
//! 32 KiB in all: `414` and `431` beyond); the loop's timeouts (`--header-timeout`,
//! `--keepalive-timeout`, `--send-timeout`). Opening and checking a file are
//! ordinary blocking system calls made in the loop: fine for files in the page
//! cache or on a local disk, not for a slow network file system.

use std::ffi::OsStr;
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::SystemTime;

use clap::Parser;
use percore::cli::{self, ServerArgs};
use percore::http::{http_date, Limits, Method, Parsed, Progress, Request, Version, DATE_LEN};
use percore::listen::Opening;
use percore::reactor::{Conns, Counts, Io, Protocol, Verdict};

#[derive(Debug, Parser)]
#[command(about = "Serves the regular files under a directory, each sent with sendfile(2)")]
struct Args {
    #[command(flatten)]
    server: ServerArgs,

    /// The directory whose regular files are served; nothing outside it is.
    #[arg(long, value_name = "DIR", required = true)]
    root: PathBuf,
}

/// The server: where the files are, and what it says in every answer.
struct StaticFiles {
    /// The root, canonical: every file served has a real path under it.
    root: PathBuf,
    limits: Limits,
    /// The `Date` value, renewed once a second.
    date: [u8; DATE_LEN],
    /// A graceful stop began: every answer closes its connection.
    draining: bool,
    counts: Counts,
}

/// A connection's state: how far the parse of a head that arrives in pieces got.
#[derive(Debug, Default)]
struct Conn {
    progress: Progress,
}

/// How an answer ends its connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Persist {
    /// Kept open, as HTTP/1.1 keeps it by default.
    Keep,
    /// Kept open for an HTTP/1.0 client that asked: the answer says so.
    KeepAlive10,
    /// Closed after the answer (`Connection: close`).
    Close,
}

/// One answer's head, before its body.
struct Head<'a> {
    status: u16,
    content_type: &'a str,
    content_length: u64,
    allow: bool,
    persist: Persist,
}

impl StaticFiles {
    fn new(root: PathBuf) -> StaticFiles {
        StaticFiles {
            root,
            limits: Limits::default(),
            date: http_date(SystemTime::now()),
            draining: false,
            counts: Counts::default(),
        }
    }

    fn write_head(&mut self, io: &mut Io<'_>, head: &Head<'_>) {
        self.counts.requests += 1;
        if head.status >= 400 {
            self.counts.refused += 1;
        }
        // Writing to an Io cannot fail: it copies to the output.
        let _ = write!(io, "HTTP/1.1 {} {}\r\nDate: ", head.status, reason(head.status));
        io.write(&self.date);
        let _ = write!(
            io,
            "\r\nContent-Type: {}\r\nContent-Length: {}\r\n",
            head.content_type, head.content_length
        );
        if head.allow {
            io.write(b"Allow: GET, HEAD\r\n");
        }
        match head.persist {
            Persist::Keep => {}
            Persist::KeepAlive10 => io.write(b"Connection: keep-alive\r\n"),
            Persist::Close => io.write(b"Connection: close\r\n"),
        }
        io.write(b"\r\n");
    }

    /// An error answer: a short text body (none for `HEAD`).
    fn refuse(&mut self, io: &mut Io<'_>, status: u16, method: Method, persist: Persist, allow: bool) {
        let body = format!("{status} {}\n", reason(status));
        let head =
            Head { status, content_type: "text/plain", content_length: body.len() as u64, allow, persist };
        self.write_head(io, &head);
        if method != Method::Head {
            io.write(body.as_bytes());
        }
    }

    /// Answers one request; returns whether the connection stays open.
    fn answer(&mut self, request: &Request<'_>, io: &mut Io<'_>) -> bool {
        let method = request.method;
        let is_get_or_head = matches!(method, Method::Get | Method::Head);
        if request.content_length > 0 || request.chunked {
            // The body is never read, so the connection cannot go on after it.
            let status = if is_get_or_head { 413 } else { 405 };
            self.refuse(io, status, method, Persist::Close, !is_get_or_head);
            return false;
        }
        let persist = match (request.keep_alive && !self.draining, request.version) {
            (false, _) => Persist::Close,
            (true, Version::Http10) => Persist::KeepAlive10,
            (true, Version::Http11) => Persist::Keep,
        };
        if !is_get_or_head {
            self.refuse(io, 405, method, persist, true);
            return persist != Persist::Close;
        }
        let path = match resolve(&self.root, request.target) {
            Ok(path) => path,
            Err(status) => {
                // A target that is not a clean path: refused, and the connection closed.
                let persist = if status == 400 { Persist::Close } else { persist };
                self.refuse(io, status, method, persist, false);
                return persist != Persist::Close;
            }
        };
        let (file, len) = match open_under(&self.root, &path) {
            Ok(opened) => opened,
            Err(status) => {
                self.refuse(io, status, method, persist, false);
                return persist != Persist::Close;
            }
        };
        let Ok(range) = usize::try_from(len) else {
            self.refuse(io, 500, method, persist, false);
            return persist != Persist::Close;
        };
        let head = Head {
            status: 200,
            content_type: content_type(&path),
            content_length: len,
            allow: false,
            persist,
        };
        self.write_head(io, &head);
        if method == Method::Get && range > 0 {
            // The descriptor goes with the range: closed once it is sent, or when
            // the connection is gone.
            io.write_file(file, 0, range);
        }
        persist != Persist::Close
    }
}

impl Protocol for StaticFiles {
    type Conn = Conn;

    /// Every complete request head in the input is answered, in order, until the
    /// output is full: then the rest waits until the client has read it.
    fn on_data(&mut self, conn: &mut Conn, input: &[u8], io: &mut Io<'_>) -> Verdict {
        let mut at = 0;
        loop {
            if at == input.len() {
                return Verdict::keep(at);
            }
            if io.is_full() {
                return Verdict::pause(at);
            }
            let request = match conn.progress.parse(&input[at..], &self.limits) {
                Ok(Parsed::Partial) => return Verdict::keep(at),
                Ok(Parsed::Complete(request)) => request,
                Err(error) => {
                    conn.progress = Progress::default();
                    // Where this request ends is unknown: answer, and close.
                    self.refuse(io, error.status(), Method::Get, Persist::Close, false);
                    return Verdict::close(at);
                }
            };
            at += request.head_len;
            if !self.answer(&request, io) {
                return Verdict::close(at);
            }
        }
    }

    fn on_tick(&mut self, now: SystemTime, _conns: &mut Conns<'_>) {
        self.date = http_date(now);
    }

    fn on_drain(&mut self, _conns: &mut Conns<'_>) {
        self.draining = true;
    }

    fn counts(&self) -> Counts {
        self.counts
    }
}

/// The file `target` names under `root`, or the status that refuses it. Nothing is
/// resolved against its parent: a `..` segment is refused, not followed.
fn resolve(root: &Path, target: &[u8]) -> Result<PathBuf, u16> {
    let path = origin_path(target).ok_or(400u16)?;
    let decoded = percent_decode(path).ok_or(400u16)?;
    if decoded.contains(&b'\\') {
        return Err(400);
    }
    if decoded.ends_with(b"/") {
        // A directory's name: no listings here.
        return Err(404);
    }
    let mut full = root.to_path_buf();
    for segment in decoded.split(|&b| b == b'/') {
        match segment {
            b"" | b"." => {}
            b".." => return Err(400),
            _ => full.push(OsStr::from_bytes(segment)),
        }
    }
    Ok(full)
}

/// The path of a request target, without its query: an origin-form target as it
/// is (`/a/b?q`), an absolute-form one (`http://host/a/b`) without its scheme and
/// authority; `None` for anything else (`*`, a relative path).
fn origin_path(target: &[u8]) -> Option<&[u8]> {
    let path = if target.starts_with(b"/") {
        target
    } else {
        let scheme_end = target.windows(3).position(|w| w == b"://")?;
        let scheme = &target[..scheme_end];
        if !(scheme.eq_ignore_ascii_case(b"http") || scheme.eq_ignore_ascii_case(b"https")) {
            return None;
        }
        let after = &target[scheme_end + 3..];
        &after[after.iter().position(|&b| b == b'/')?..]
    };
    let end = path.iter().position(|&b| b == b'?' || b == b'#').unwrap_or(path.len());
    Some(&path[..end])
}

/// `raw` with its percent-escapes decoded; `None` for a bad escape, an encoded `/`
/// or `\`, or a control byte (NUL among them), raw or encoded.
fn percent_decode(raw: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(raw.len());
    let mut i = 0;
    while i < raw.len() {
        let byte = if raw[i] == b'%' {
            let high = hex(*raw.get(i + 1)?)?;
            let low = hex(*raw.get(i + 2)?)?;
            let byte = high << 4 | low;
            if byte == b'/' || byte == b'\\' {
                return None;
            }
            i += 3;
            byte
        } else {
            i += 1;
            raw[i - 1]
        };
        if byte.is_ascii_control() {
            return None;
        }
        out.push(byte);
    }
    Some(out)
}

fn hex(digit: u8) -> Option<u8> {
    match digit {
        b'0'..=b'9' => Some(digit - b'0'),
        b'a'..=b'f' => Some(digit - b'a' + 10),
        b'A'..=b'F' => Some(digit - b'A' + 10),
        _ => None,
    }
}

/// Opens `path` and checks the file opened: a regular file whose real path lies
/// under `root`. Returns it with its size at open, or the status that refuses it.
fn open_under(root: &Path, path: &Path) -> Result<(File, u64), u16> {
    // A first look, so that a FIFO or a device is not even opened (an open may
    // have effects); the check that counts is on the opened file, below.
    if !std::fs::metadata(path).map_err(|e| open_status(&e))?.is_file() {
        return Err(404);
    }
    let file = OpenOptions::new()
        .read(true)
        // A FIFO swapped in since the look above must not block the loop.
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(|e| open_status(&e))?;
    let metadata = file.metadata().map_err(|_| 500u16)?;
    if !metadata.is_file() {
        return Err(404);
    }
    let real = real_path(&file).map_err(|_| 500u16)?;
    if !real.starts_with(root) || real == root {
        return Err(404);
    }
    Ok((file, metadata.len()))
}

/// The path the kernel gives an open file (a deleted one's ends in " (deleted)").
fn real_path(file: &File) -> io::Result<PathBuf> {
    std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd()))
}

/// The status for a file that could not be looked at or opened.
fn open_status(error: &io::Error) -> u16 {
    match error.raw_os_error() {
        Some(libc::ENOENT | libc::ENOTDIR | libc::ELOOP | libc::ENAMETOOLONG) => 404,
        Some(libc::EACCES | libc::EPERM) => 403,
        Some(libc::EMFILE | libc::ENFILE) => 503,
        _ => 500,
    }
}

fn content_type(path: &Path) -> &'static str {
    let extension = path.extension().map(OsStr::as_bytes).unwrap_or_default();
    if extension.eq_ignore_ascii_case(b"html") || extension.eq_ignore_ascii_case(b"htm") {
        "text/html"
    } else if extension.eq_ignore_ascii_case(b"txt") {
        "text/plain"
    } else {
        "application/octet-stream"
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        413 => "Content Too Large",
        414 => "URI Too Long",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        503 => "Service Unavailable",
        505 => "HTTP Version Not Supported",
        _ => "Error",
    }
}

/// `root` made canonical, once it is known to be a directory whose open
/// descriptors `/proc/self/fd` names: the check every file served passes.
fn canonical_root(root: &Path) -> io::Result<PathBuf> {
    let root = root.canonicalize()?;
    if !root.is_dir() {
        return Err(io::Error::new(io::ErrorKind::NotADirectory, "not a directory"));
    }
    let real = real_path(&File::open(&root)?)
        .map_err(|e| io::Error::new(e.kind(), format!("reading /proc/self/fd (is /proc mounted?): {e}")))?;
    if real != root {
        let why = format!("/proc/self/fd names it {}, not {}", real.display(), root.display());
        return Err(io::Error::other(why));
    }
    Ok(root)
}

fn main() -> ExitCode {
    let args = Args::parse();
    let root = match canonical_root(&args.root) {
        Ok(root) => root,
        Err(e) => {
            cli::say(format_args!("static_files: --root {}: {e}", args.root.display()));
            return ExitCode::from(2);
        }
    };
    // The client speaks first: the kernel may hold a connection until it does.
    let options = args.server.options(Opening::ClientSpeaksFirst);
    cli::serve(&options, move || Ok(StaticFiles::new(root.clone())))
}
