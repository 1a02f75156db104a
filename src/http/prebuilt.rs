//! Prebuilt responses: every byte laid out at start-up, the `Date` value patched in
//! place once a second.

use std::time::SystemTime;

/// Length of an IMF-fixdate, `Sun, 06 Nov 1994 08:49:37 GMT`.
pub const DATE_LEN: usize = 29;

/// One complete response, ready to be copied to the wire as it is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Response {
    bytes: Vec<u8>,
    date_at: usize,
    head_len: usize,
}

impl Response {
    /// Lays out `HTTP/1.1 {status}`, `Server`, `Date`, `Content-Type`,
    /// `Content-Length`, then `headers` (name and value pairs), then `body`.
    pub fn new(status: &str, content_type: &str, headers: &[(&str, &str)], body: &[u8]) -> Response {
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
        bytes.extend_from_slice(body);
        Response { bytes, date_at, head_len }
    }

    /// The whole response.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The head alone, as the answer to `HEAD`.
    pub fn head(&self) -> &[u8] {
        &self.bytes[..self.head_len]
    }

    /// Writes `date` (an IMF-fixdate) into the `Date` slot.
    pub fn set_date(&mut self, date: &[u8; DATE_LEN]) {
        self.bytes[self.date_at..self.date_at + DATE_LEN].copy_from_slice(date);
    }
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
    pub fn new(status: &str, content_type: &str, headers: &[(&str, &str)], body: &[u8]) -> Variants {
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

    /// The variant for a connection that stays open (or not), on HTTP/1.0 (or not).
    pub fn pick(&self, keep_alive: bool, http10: bool) -> &Response {
        match (keep_alive, http10) {
            (false, _) => &self.close,
            (true, false) => &self.keep_alive,
            (true, true) => &self.keep_alive_http10,
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
