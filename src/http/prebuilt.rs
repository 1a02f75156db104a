//! Prebuilt responses: every byte laid out at start-up, the `Date` value patched in
//! place once a second. A large body is held once and sent by reference.

use std::sync::Arc;
use std::time::SystemTime;

use super::parse::Version;
use crate::reactor::Io;

/// Length of an IMF-fixdate, `Sun, 06 Nov 1994 08:49:37 GMT`.
pub const DATE_LEN: usize = 29;

/// Bodies up to this size are copied with their head, so that an answer (and a
/// pipeline of them) is one contiguous send; larger ones are referenced.
const COPIED_BODY_MAX: usize = 1024;

/// One complete response, ready to be written as it is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Response {
    /// The head, followed by the body when the body is small.
    bytes: Vec<u8>,
    date_at: usize,
    head_len: usize,
    /// The body, when it is too large to copy: every response with it, and every
    /// connection still sending it, holds this one copy.
    shared_body: Option<Arc<[u8]>>,
}

impl Response {
    /// Lays out `HTTP/1.1 {status}`, `Server`, `Date`, `Content-Type`,
    /// `Content-Length`, then `headers` (name and value pairs), then `body`.
    pub fn new(status: &str, content_type: &str, headers: &[(&str, &str)], body: &Arc<[u8]>) -> Response {
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
        let shared_body = if body.len() <= COPIED_BODY_MAX {
            bytes.extend_from_slice(body);
            None
        } else {
            Some(Arc::clone(body))
        };
        Response { bytes, date_at, head_len, shared_body }
    }

    /// Writes the whole response to `io`: copied, or the head copied and the body
    /// referenced.
    pub fn write(&self, io: &mut Io<'_>) {
        io.write(&self.bytes);
        if let Some(body) = &self.shared_body {
            io.write_shared(body);
        }
    }

    /// Writes the head alone, as the answer to `HEAD`.
    pub fn write_head(&self, io: &mut Io<'_>) {
        io.write(&self.bytes[..self.head_len]);
    }

    /// Writes `date` (an IMF-fixdate) into the `Date` slot.
    pub fn set_date(&mut self, date: &[u8; DATE_LEN]) {
        self.bytes[self.date_at..self.date_at + DATE_LEN].copy_from_slice(date);
    }
}

/// Whether a connection stays open after a response.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Persist {
    /// It stays open for the next request.
    KeepAlive,
    /// It closes after this response.
    Close,
}

/// One response in its three connection variants: kept open for HTTP/1.1 (no
/// `Connection` header), kept open for HTTP/1.0 (`Connection: keep-alive`, which
/// `ab -k` waits for), and closing (`Connection: close`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Variants {
    keep_alive: Response,
    keep_alive_http10: Response,
    close: Response,
}

impl Variants {
    /// Builds the three variants of one response.
    pub fn new(status: &str, content_type: &str, headers: &[(&str, &str)], body: &Arc<[u8]>) -> Variants {
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
    pub fn pick(&self, version: Version, persists: Persist) -> &Response {
        match (persists, version) {
            (Persist::Close, _) => &self.close,
            (Persist::KeepAlive, Version::Http11) => &self.keep_alive,
            (Persist::KeepAlive, Version::Http10) => &self.keep_alive_http10,
        }
    }

    /// Writes `date` into every variant.
    pub fn set_date(&mut self, date: &[u8; DATE_LEN]) {
        for response in [&mut self.keep_alive, &mut self.keep_alive_http10, &mut self.close] {
            response.set_date(date);
        }
    }
}

/// Formats `now` as an IMF-fixdate, for [`Response::set_date`].
pub fn http_date(now: SystemTime) -> [u8; DATE_LEN] {
    super::date::imf_fixdate(now)
}
