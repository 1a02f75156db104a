//! Prebuilt responses: every byte laid out at start-up, the `Date` value patched in
//! place once a second. A large body is held once and sent by reference, from
//! memory or, sealed in a file, with sendfile(2).

use std::fs::File;
use std::io;
use std::sync::Arc;
use std::time::SystemTime;

use super::date::{http_date, DATE_LEN};
use super::parse::Version;
use crate::reactor::{sealed_file, Io, COPY_MAX};

/// A response body, held once however many responses and connections send it.
#[derive(Clone, Debug)]
pub struct Body(Storage);

#[derive(Clone, Debug)]
enum Storage {
    /// In memory: copied with the head when small, referenced when large.
    Bytes(Arc<[u8]>),
    /// In a sealed file of this many bytes, sent with sendfile(2).
    Sealed(Arc<File>, usize),
}

impl Body {
    /// A body held in memory: copied into each answer up to 1 KiB, referenced
    /// (one `sendmsg` with the head) when larger.
    pub fn bytes(bytes: impl Into<Arc<[u8]>>) -> Body {
        Body(Storage::Bytes(bytes.into()))
    }

    /// A body of what `from` reads (bytes, or a file: copied in the kernel),
    /// held in a sealed memfd ([`sealed_file`]) and sent with sendfile(2): no copy
    /// to the socket and no user memory, for large bodies (the hello server's
    /// `--sendfile-min`). Each answer's head goes first, with `MSG_MORE`.
    pub fn sealed(from: impl io::Read) -> io::Result<Body> {
        let file = sealed_file(from)?;
        let len = usize::try_from(file.metadata()?.len())
            .map_err(|_| io::Error::from(io::ErrorKind::FileTooLarge))?;
        Ok(Body(Storage::Sealed(Arc::new(file), len)))
    }

    /// Its length in bytes.
    pub fn len(&self) -> usize {
        match &self.0 {
            Storage::Bytes(bytes) => bytes.len(),
            Storage::Sealed(_, len) => *len,
        }
    }

    /// Whether it has no bytes.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Default for Body {
    /// `hello, world!\n`
    fn default() -> Body {
        Body::bytes(&b"hello, world!\n"[..])
    }
}

/// One complete response, ready to be written as it is.
#[derive(Clone, Debug)]
pub(crate) struct Response {
    /// The head, followed by the body when the body is small.
    bytes: Vec<u8>,
    date_at: usize,
    head_len: usize,
    /// The body, when it is too large to copy: every response with it, and every
    /// connection still sending it, holds this one copy.
    referenced: Option<Storage>,
}

impl Response {
    /// Lays out `HTTP/1.1 {status}`, `Server`, `Date`, `Content-Type`,
    /// `Content-Length`, then `headers` (name and value pairs), then `body`.
    pub(crate) fn new(status: &str, content_type: &str, headers: &[(&str, &str)], body: &Body) -> Response {
        let mut head = format!("HTTP/1.1 {status}\r\nServer: percore\r\nDate: ");
        let date_at = head.len();
        head.extend(http_date(SystemTime::now()).map(char::from));
        head += &format!("\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n", body.len());
        for (name, value) in headers {
            head += &format!("{name}: {value}\r\n");
        }
        head += "\r\n";
        let head_len = head.len();
        let mut bytes = head.into_bytes();
        let referenced = match &body.0 {
            Storage::Bytes(small) if small.len() <= COPY_MAX => {
                bytes.extend_from_slice(small);
                None
            }
            held => Some(held.clone()),
        };
        Response { bytes, date_at, head_len, referenced }
    }

    /// Writes the whole response to `io`: copied, or the head copied and the body
    /// referenced.
    pub(crate) fn write(&self, io: &mut Io<'_>) {
        io.write(&self.bytes);
        match &self.referenced {
            None => {}
            Some(Storage::Bytes(body)) => io.write_shared(body),
            Some(Storage::Sealed(file, len)) => io.write_file(Arc::clone(file), 0, *len),
        }
    }

    /// Writes the head alone, as the answer to `HEAD`.
    pub(crate) fn write_head(&self, io: &mut Io<'_>) {
        io.write(&self.bytes[..self.head_len]);
    }

    /// Writes `date` (an IMF-fixdate) into the `Date` slot.
    pub(crate) fn set_date(&mut self, date: &[u8; DATE_LEN]) {
        self.bytes[self.date_at..self.date_at + DATE_LEN].copy_from_slice(date);
    }
}

/// Whether a connection stays open after a response.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Persist {
    /// It stays open for the next request.
    KeepAlive,
    /// It closes after this response.
    Close,
}

/// One response in its three connection variants: kept open for HTTP/1.1 (no
/// `Connection` header), kept open for HTTP/1.0 (`Connection: keep-alive`, which
/// `ab -k` waits for), and closing (`Connection: close`).
#[derive(Clone, Debug)]
pub(crate) struct Variants {
    keep_alive: Response,
    keep_alive_http10: Response,
    close: Response,
}

impl Variants {
    /// Builds the three variants of one response.
    pub(crate) fn new(status: &str, content_type: &str, headers: &[(&str, &str)], body: &Body) -> Variants {
        let with = |connection: Option<&str>| {
            let mut all = headers.to_vec();
            all.extend(connection.map(|value| ("Connection", value)));
            Response::new(status, content_type, &all, body)
        };
        Variants {
            keep_alive: with(None),
            keep_alive_http10: with(Some("keep-alive")),
            close: with(Some("close")),
        }
    }

    /// The variant for a request of `version` on a connection that `persists` or not.
    pub(crate) fn pick(&self, version: Version, persists: Persist) -> &Response {
        match (persists, version) {
            (Persist::Close, _) => &self.close,
            (Persist::KeepAlive, Version::Http11) => &self.keep_alive,
            (Persist::KeepAlive, Version::Http10) => &self.keep_alive_http10,
        }
    }

    /// Writes `date` into every variant.
    pub(crate) fn set_date(&mut self, date: &[u8; DATE_LEN]) {
        for response in [&mut self.keep_alive, &mut self.keep_alive_http10, &mut self.close] {
            response.set_date(date);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reactor::{Harness, Io, Protocol, Verdict};
    use std::time::{Duration, UNIX_EPOCH};

    /// Writes one prebuilt response, whole or its head, per call.
    struct Writes(Response, bool);

    impl Protocol for Writes {
        type Conn = ();
        fn on_data(&mut self, _: &mut (), input: &[u8], io: &mut Io<'_>) -> Verdict {
            if self.1 {
                self.0.write_head(io);
            } else {
                self.0.write(io);
            }
            Verdict::keep(input.len())
        }
    }

    fn written(response: &Response, head_only: bool) -> Vec<u8> {
        let mut harness = Harness::new(Writes(response.clone(), head_only));
        harness.data(b"x");
        harness.take_output()
    }

    /// 1994-11-06 08:49:37 UTC, RFC 9110's example date.
    fn example_date() -> [u8; DATE_LEN] {
        http_date(UNIX_EPOCH + Duration::from_secs(784_111_777))
    }

    #[test]
    fn a_response_is_its_head_then_its_body_small_or_shared() {
        for size in [5, COPY_MAX, COPY_MAX + 1, 100_000] {
            let body: Arc<[u8]> = (0..size).map(|i| i as u8).collect::<Vec<_>>().into();
            let mut response =
                Response::new("200 OK", "text/plain", &[("X-A", "b")], &Body::bytes(Arc::clone(&body)));
            response.set_date(&example_date());
            let head = format!(
                "HTTP/1.1 200 OK\r\nServer: percore\r\nDate: Sun, 06 Nov 1994 08:49:37 GMT\r\n\
                 Content-Type: text/plain\r\nContent-Length: {size}\r\nX-A: b\r\n\r\n"
            );
            let whole = [head.as_bytes(), &body].concat();
            assert_eq!(written(&response, false), whole, "a {size}-byte body");
            assert_eq!(written(&response, true), head.as_bytes(), "the head of a {size}-byte body");
            let shared = size > COPY_MAX;
            assert_eq!(Arc::strong_count(&body) > 1, shared, "a {size}-byte body shared, not copied");
        }
    }

    #[test]
    fn a_sealed_body_is_written_after_its_head_as_a_file_range() {
        let bytes: Vec<u8> = (0..100_000).map(|i| (i % 251) as u8).collect();
        let body = Body::sealed(&bytes[..]).expect("a sealed memfd");
        assert_eq!(body.len(), bytes.len());
        let mut response = Response::new("200 OK", "text/plain", &[], &body);
        response.set_date(&example_date());
        let head = "HTTP/1.1 200 OK\r\nServer: percore\r\nDate: Sun, 06 Nov 1994 08:49:37 GMT\r\n\
                    Content-Type: text/plain\r\nContent-Length: 100000\r\n\r\n";
        assert_eq!(written(&response, false), [head.as_bytes(), &bytes].concat());
        assert_eq!(written(&response, true), head.as_bytes(), "HEAD: the head alone");
    }

    #[test]
    fn set_date_rewrites_the_date_slot_alone_in_every_variant() {
        let mut variants = Variants::new("200 OK", "text/plain", &[], &Body::bytes(&b"hi"[..]));
        variants.set_date(&example_date());
        for (version, persists, connection) in [
            (Version::Http11, Persist::KeepAlive, ""),
            (Version::Http10, Persist::KeepAlive, "Connection: keep-alive\r\n"),
            (Version::Http11, Persist::Close, "Connection: close\r\n"),
        ] {
            let expected = format!(
                "HTTP/1.1 200 OK\r\nServer: percore\r\nDate: Sun, 06 Nov 1994 08:49:37 GMT\r\n\
                 Content-Type: text/plain\r\nContent-Length: 2\r\n{connection}\r\nhi"
            );
            let text = String::from_utf8(written(variants.pick(version, persists), false)).expect("text");
            assert_eq!(text, expected, "{version:?} {persists:?}");
        }
    }
}
