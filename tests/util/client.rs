//! A small blocking HTTP/1.1 client that reads one Content-Length-framed
//! response at a time, and the checks tests make on what it reads.

use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};

use socket2::{Domain, Socket, Type};

use super::IO_TIMEOUT;

/// A TCP connection with read/write timeouts set.
pub fn connect(addr: SocketAddr) -> TcpStream {
    let stream =
        TcpStream::connect_timeout(&addr, IO_TIMEOUT).unwrap_or_else(|e| panic!("connecting to {addr}: {e}"));
    stream.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    stream.set_write_timeout(Some(IO_TIMEOUT)).unwrap();
    stream
}

/// A connection with a receive buffer of about `receive_buffer` bytes, set before
/// connecting so that the window is small from the first byte, and fixed so that the
/// kernel does not grow it: what the client leaves unread soon fills the server's
/// socket. With `segment`, its segments are at most that size (TCP_MAXSEG, which the
/// server learns from it, and from which its socket sizes its send buffer: on
/// loopback, with 64 KiB segments, that starts at several MiB), so that a client that
/// reads nothing costs the kernel little.
pub fn connect_with(addr: SocketAddr, receive_buffer: usize, segment: Option<u32>) -> TcpStream {
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, None).expect("a socket");
    socket.set_recv_buffer_size(receive_buffer).expect("setting SO_RCVBUF");
    if let Some(segment) = segment {
        socket.set_mss(segment).expect("setting TCP_MAXSEG");
    }
    socket.connect_timeout(&addr.into(), IO_TIMEOUT).unwrap_or_else(|e| panic!("connecting to {addr}: {e}"));
    let stream = TcpStream::from(socket);
    stream.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    stream.set_write_timeout(Some(IO_TIMEOUT)).unwrap();
    stream
}

/// Reads exactly `len` bytes, as text.
pub fn read_text(stream: &mut TcpStream, len: usize) -> String {
    let mut buf = vec![0; len];
    stream.read_exact(&mut buf).unwrap_or_else(|e| panic!("reading {len} bytes: {e}"));
    String::from_utf8_lossy(&buf).into_owned()
}

/// One parsed response. `head` keeps the exact bytes of the status line,
/// header lines and blank line, for byte-for-byte comparisons.
#[derive(Debug, Clone)]
pub struct Response {
    pub status_line: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    pub head: Vec<u8>,
}

impl Response {
    /// Value of the first header named `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    /// The exact bytes this response occupied on the wire.
    pub fn raw(&self) -> Vec<u8> {
        [self.head.as_slice(), &self.body].concat()
    }

    pub fn content_length(&self) -> usize {
        let value = self.header("Content-Length").unwrap_or_else(|| panic!("no Content-Length in {self:?}"));
        value.parse().unwrap_or_else(|e| panic!("bad Content-Length {value:?}: {e}"))
    }
}

/// Whether the request a response answers was a HEAD, which decides whether
/// Content-Length bytes of body follow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    Get,
    Head,
}

impl Method {
    pub fn as_str(self) -> &'static str {
        match self {
            Method::Get => "GET",
            Method::Head => "HEAD",
        }
    }
}

/// A blocking client. The buffered reader lives as long as the connection so
/// bytes of a later pipelined response read ahead are not lost.
pub struct Client {
    reader: BufReader<TcpStream>,
}

impl Client {
    pub fn connect(addr: SocketAddr) -> Client {
        Client::new(connect(addr))
    }

    pub fn new(stream: TcpStream) -> Client {
        Client { reader: BufReader::new(stream) }
    }

    pub fn stream(&self) -> &TcpStream {
        self.reader.get_ref()
    }

    pub fn send(&mut self, bytes: &[u8]) {
        self.reader
            .get_mut()
            .write_all(bytes)
            .unwrap_or_else(|e| panic!("sending {:?}: {e}", String::from_utf8_lossy(bytes)));
    }

    /// Sends a request with a Host header and any `extra` header lines
    /// (each without its CRLF).
    pub fn send_request(&mut self, method: Method, target: &str, version: &str, extra: &[&str]) {
        self.send(request(method, target, version, extra).as_bytes());
    }

    /// One HTTP/1.1 GET of `target`, and its response.
    pub fn get(&mut self, target: &str) -> Response {
        self.send_request(Method::Get, target, "HTTP/1.1", &[]);
        self.read_response(Method::Get)
    }

    /// Reads exactly one response; its body is Content-Length bytes unless it
    /// answers a HEAD.
    pub fn read_response(&mut self, method: Method) -> Response {
        let mut head = Vec::new();
        let status_line = self.read_line(&mut head, "status line");
        let mut headers = Vec::new();
        loop {
            let line = self.read_line(&mut head, "header line");
            if line.is_empty() {
                break;
            }
            let (name, value) =
                line.split_once(':').unwrap_or_else(|| panic!("header line without a colon: {line:?}"));
            headers.push((name.to_string(), value.trim_start().to_string()));
        }
        let mut response = Response { status_line, headers, body: Vec::new(), head };
        if method == Method::Get {
            response.body = self.read_exact_bytes(response.content_length());
        }
        response
    }

    /// Reads one CRLF-terminated line, appending its raw bytes to `raw` and
    /// returning it without the CRLF.
    fn read_line(&mut self, raw: &mut Vec<u8>, what: &str) -> String {
        let start = raw.len();
        match self.reader.read_until(b'\n', raw) {
            Ok(0) => panic!(
                "connection closed while reading a {what}; got so far: {:?}",
                String::from_utf8_lossy(raw)
            ),
            Ok(_) => {}
            Err(e) => panic!("reading a {what}: {e}; got so far: {:?}", String::from_utf8_lossy(raw)),
        }
        let line = &raw[start..];
        assert!(
            line.ends_with(b"\r\n"),
            "{what} not terminated by CRLF: {:?}",
            String::from_utf8_lossy(line)
        );
        String::from_utf8(line[..line.len() - 2].to_vec())
            .unwrap_or_else(|e| panic!("{what} is not UTF-8: {e}"))
    }

    pub fn read_exact_bytes(&mut self, n: usize) -> Vec<u8> {
        let mut buf = vec![0; n];
        self.reader.read_exact(&mut buf).unwrap_or_else(|e| panic!("reading {n} bytes: {e}"));
        buf
    }

    /// Asserts the peer closes the connection (a read returns 0) within the
    /// read timeout, with no further bytes before that.
    pub fn expect_eof(&mut self) {
        read_to_eof(&mut self.reader);
    }

    /// Half-closes: the peer sees EOF, we can still read.
    pub fn shutdown_write(&self) {
        self.stream().shutdown(Shutdown::Write).expect("shutting down the write half");
    }
}

/// Builds a request: request line, a Host header, then `extra` header lines.
pub fn request(method: Method, target: &str, version: &str, extra: &[&str]) -> String {
    let mut text = format!("{} {target} {version}\r\nHost: localhost\r\n", method.as_str());
    for line in extra {
        text.push_str(line);
        text.push_str("\r\n");
    }
    text.push_str("\r\n");
    text
}

/// Asserts `reader` reaches EOF (read returns 0) within its timeout without
/// yielding any more bytes.
///
/// A read is tried again when it was interrupted: on a socket with a receive
/// timeout, a stop of the test process (a stop signal, or a cgroup freeze on a
/// loaded, shared machine) ends the read with EINTR, which says nothing of the server.
pub fn read_to_eof(reader: &mut impl Read) {
    let mut buf = [0u8; 4096];
    let read = loop {
        match reader.read(&mut buf) {
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            read => break read,
        }
    };
    match read {
        Ok(0) => {}
        Ok(n) => panic!(
            "expected the connection to close, got {n} more bytes: {:?}",
            String::from_utf8_lossy(&buf[..n])
        ),
        Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
            panic!("the connection was not closed within {IO_TIMEOUT:?}")
        }
        Err(e) => panic!("expected a clean close (EOF), got error: {e}"),
    }
}

/// Reads one response (head, then its Content-Length body, dropped) and
/// returns its status line.
pub fn read_status(reader: &mut impl BufRead) -> std::io::Result<String> {
    use std::io::{self, Error};
    fn line(reader: &mut impl BufRead, buf: &mut String) -> io::Result<()> {
        buf.clear();
        match reader.read_line(buf)? {
            0 => Err(Error::new(ErrorKind::UnexpectedEof, "connection closed mid-response")),
            _ => Ok(()),
        }
    }
    let mut status = String::new();
    line(reader, &mut status)?;
    let mut header = String::new();
    let mut length = None;
    loop {
        line(reader, &mut header)?;
        if header == "\r\n" {
            break;
        }
        if let Some((name, value)) = header.split_once(':') {
            if name.eq_ignore_ascii_case("content-length") {
                length = value.trim().parse::<u64>().ok();
            }
        }
    }
    let length = length.ok_or_else(|| Error::new(ErrorKind::InvalidData, "no Content-Length"))?;
    let skipped = io::copy(&mut reader.by_ref().take(length), &mut io::sink())?;
    if skipped < length {
        return Err(Error::new(ErrorKind::UnexpectedEof, "connection closed mid-body"));
    }
    Ok(status.trim_end().to_string())
}

/// The response's `Date` value, asserted to be a 29-byte IMF-fixdate.
pub fn date_of(response: &Response) -> &str {
    let date = response.header("Date").unwrap_or_else(|| panic!("no Date header in {response:?}"));
    assert_eq!(date.len(), 29, "Date {date:?} is not 29 bytes");
    let parsed =
        httpdate::parse_http_date(date).unwrap_or_else(|e| panic!("Date {date:?} does not parse: {e}"));
    // parse_http_date also accepts the obsolete RFC 850 and asctime forms;
    // formatting back yields IMF-fixdate, so equality pins the format down.
    assert_eq!(httpdate::fmt_http_date(parsed), date, "Date is not IMF-fixdate");
    date
}
