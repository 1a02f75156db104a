//! The URL a benchmark loads, parsed by the `url` crate (WHATWG's parse: percent-
//! encoding, IDNA hosts, IPv6 literals, no fragment on the wire), and the request it
//! sends there, built once. An `https://` URL is loaded over TLS, its host the name
//! the server's certificate must have.

use std::net::SocketAddr;
use std::sync::Arc;

use percore::reactor::Io;
use url::{Host, Position, Url};

/// Bytes up to which a request body is copied into each request rather than
/// referenced: copied, a request and a pipeline of them stay one contiguous `send`;
/// larger, a reference saves the copy. The library's prebuilt answers draw their
/// line at the same 1 KiB.
const COPY_MAX: usize = 1024;

/// Where the load goes: an `http://` or `https://` URL.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    url: Url,
}

impl Target {
    /// Parses an `http://` or `https://` URL; refuses other schemes and
    /// credentials, which the load would not send.
    pub fn parse(text: &str) -> Result<Target, String> {
        let mut url = Url::parse(text).map_err(|e| match e {
            url::ParseError::RelativeUrlWithoutBase => {
                format!("{text}: not a URL (such as http://127.0.0.1:8080/)")
            }
            e => format!("{text}: {e}"),
        })?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(format!("{text}: not an http:// or https:// URL"));
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err(format!(
                "{text}: user and password in the URL are not sent; use -H 'Authorization: ...'"
            ));
        }
        if url.host_str().is_none_or(str::is_empty) {
            return Err(format!("{text}: no host"));
        }
        // The fragment is the client's own: never sent (RFC 9110, 4.2.4).
        url.set_fragment(None);
        Ok(Target { url })
    }

    /// The URL, normalised, as it is loaded.
    pub fn as_str(&self) -> &str {
        self.url.as_str()
    }

    /// Whether the load speaks TLS: an `https://` URL.
    pub fn is_https(&self) -> bool {
        self.url.scheme() == "https"
    }

    /// The name the server's certificate must have (and SNI sends): the host, an
    /// IPv6 address without its brackets.
    pub fn server_name(&self) -> String {
        match self.url.host() {
            Some(Host::Ipv6(addr)) => addr.to_string(),
            host => host.map(|host| host.to_string()).unwrap_or_default(),
        }
    }

    /// The first address the host resolves to (port 443 for https:// without one).
    pub fn resolve(&self) -> Result<SocketAddr, String> {
        let host = self.url.host_str().unwrap_or_default();
        let addrs = self.url.socket_addrs(|| None).map_err(|e| format!("cannot resolve {host}: {e}"))?;
        addrs.first().copied().ok_or_else(|| format!("cannot resolve {host}: no address"))
    }

    /// `Host` and port as the request names them: the port only when not the
    /// scheme's (80, or 443 for https).
    fn authority(&self) -> String {
        let host = self.url.host_str().unwrap_or_default();
        match self.url.port() {
            Some(port) => format!("{host}:{port}"),
            None => host.to_string(),
        }
    }

    /// The request to send: HTTP/1.1 keep-alive, or (`close`) HTTP/1.0 with no
    /// keep-alive, as ab sends without `-k`. `headers` are `Name: value` lines; one
    /// named `Host` replaces the URL's. A body comes with its `Content-Length` (and
    /// `content_type`, if given).
    pub fn request(&self, spec: &RequestSpec<'_>) -> Request {
        let version = if spec.close { "HTTP/1.0" } else { "HTTP/1.1" };
        let target = &self.url[Position::BeforePath..Position::AfterQuery];
        let mut head = format!("{} {target} {version}\r\n", spec.method);
        if !spec.headers.iter().any(|h| names(h, "host")) {
            head += &format!("Host: {}\r\n", self.authority());
        }
        for header in spec.headers {
            head += &format!("{}\r\n", header.trim());
        }
        if let Some(content_type) = spec.content_type {
            head += &format!("Content-Type: {content_type}\r\n");
        }
        if let Some(body) = spec.body {
            head += &format!("Content-Length: {}\r\n", body.len());
        }
        head += "\r\n";
        let mut copied = head.into_bytes();
        let shared = match spec.body {
            Some(body) if body.len() > COPY_MAX => Some(Arc::clone(body)),
            Some(body) => {
                copied.extend_from_slice(body);
                None
            }
            None => None,
        };
        Request { copied, shared }
    }
}

/// Whether the header line `header` is named `name`.
pub fn names(header: &str, name: &str) -> bool {
    header.split(':').next().is_some_and(|n| n.trim().eq_ignore_ascii_case(name))
}

/// What the request says besides the URL.
#[derive(Clone, Copy, Debug)]
pub struct RequestSpec<'a> {
    pub method: &'a str,
    pub headers: &'a [String],
    pub body: Option<&'a Arc<[u8]>>,
    pub content_type: Option<&'a str>,
    pub close: bool,
}

/// A request, built once and written for every send: its head (and a small body)
/// copied, a large body referenced.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    copied: Vec<u8>,
    shared: Option<Arc<[u8]>>,
}

impl Request {
    pub fn write_to(&self, io: &mut Io<'_>) {
        io.write(&self.copied);
        if let Some(body) = &self.shared {
            io.write_shared(body);
        }
    }

    /// The whole request, as it goes on the wire.
    #[cfg(test)]
    fn bytes(&self) -> Vec<u8> {
        [&self.copied[..], self.shared.as_deref().unwrap_or_default()].concat()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The URL as the report names it, the `Host` and the request line's target, as
    /// the request sent has them.
    fn parts(url: &str) -> (String, String, String) {
        let t = Target::parse(url).unwrap_or_else(|e| panic!("{url}: {e}"));
        let request = String::from_utf8(t.request(&spec("GET", &[])).copied).expect("an ASCII head");
        let target = request.split(' ').nth(1).unwrap_or_default().to_string();
        (t.as_str().to_string(), t.authority(), target)
    }

    fn spec<'a>(method: &'a str, headers: &'a [String]) -> RequestSpec<'a> {
        RequestSpec { method, headers, body: None, content_type: None, close: false }
    }

    #[test]
    fn urls() {
        let cases = [
            ("http://127.0.0.1:8080/a?b=1", "127.0.0.1:8080", "/a?b=1"),
            ("http://example.com", "example.com", "/"),
            ("http://example.com:80/x", "example.com", "/x"),
            ("http://[::1]:9000?x", "[::1]:9000", "/?x"),
            // A fragment is not sent; a space is percent-encoded; a name is lowered.
            ("http://h/a b?c d#frag", "h", "/a%20b?c%20d"),
            ("http://EXAMPLE.com/", "example.com", "/"),
            ("https://example.com/", "example.com", "/"),
            ("https://example.com:443/x", "example.com", "/x"),
            ("https://example.com:80/", "example.com:80", "/"),
        ];
        for (url, authority, target) in cases {
            let (_, a, t) = parts(url);
            assert_eq!((a.as_str(), t.as_str()), (authority, target), "{url}");
        }
        assert_eq!(parts("http://h/p#f").0, "http://h/p");
    }

    #[test]
    fn an_https_url_speaks_tls_to_its_host_on_443_unless_told() {
        // Addresses, so that nothing is looked up.
        let cases = [("https://127.0.0.1/", "127.0.0.1", 443), ("https://[::1]:8443/", "::1", 8443)];
        for (url, name, port) in cases {
            let target = Target::parse(url).expect(url);
            assert!(target.is_https(), "{url}");
            assert_eq!(target.server_name(), name, "{url}");
            assert_eq!(target.resolve().map(|addr| addr.port()), Ok(port), "{url}");
        }
        assert_eq!(Target::parse("https://Example.com/").expect("a URL").server_name(), "example.com");
        assert!(!Target::parse("http://h/").expect("a URL").is_https());
    }

    #[test]
    fn bad_urls_say_why() {
        let cases = [
            ("ftp://a", "not an http:// or https:// URL"),
            ("http://", "empty host"),
            ("http://a:x/", "invalid port"),
            ("127.0.0.1:80", "not a URL"),
            ("localhost:8080", "not an http:// or https:// URL"),
            ("localhost/x", "not a URL"),
            ("http://user@host/", "user and password"),
            ("http://user:pw@host/", "user and password"),
        ];
        for (url, why) in cases {
            let error = Target::parse(url).expect_err(url);
            assert!(error.contains(why), "{url}: {error}");
        }
    }

    #[test]
    fn requests() {
        let t = Target::parse("http://h:81/p").unwrap();
        assert_eq!(t.request(&spec("GET", &[])).bytes(), b"GET /p HTTP/1.1\r\nHost: h:81\r\n\r\n");
        let headers = ["X-A: 1".to_string()];
        let close = RequestSpec { close: true, ..spec("HEAD", &headers) };
        assert_eq!(t.request(&close).bytes(), b"HEAD /p HTTP/1.0\r\nHost: h:81\r\nX-A: 1\r\n\r\n");
        assert_eq!(
            t.request(&spec("GET", &["host: other".into()])).bytes(),
            b"GET /p HTTP/1.1\r\nhost: other\r\n\r\n"
        );
    }

    #[test]
    fn a_body_comes_with_its_length_and_type_and_a_large_one_is_shared() {
        let t = Target::parse("http://h/p").unwrap();
        let body: Arc<[u8]> = Arc::from(&b"{\"a\":1}"[..]);
        let post =
            RequestSpec { body: Some(&body), content_type: Some("application/json"), ..spec("POST", &[]) };
        let request = t.request(&post);
        let expected = "POST /p HTTP/1.1\r\nHost: h\r\nContent-Type: application/json\r\nContent-Length: 7\r\n\r\n{\"a\":1}";
        assert_eq!(String::from_utf8_lossy(&request.bytes()), expected);
        assert!(request.shared.is_none());
        let large: Arc<[u8]> = Arc::from(vec![b'x'; 4096]);
        let request = t.request(&RequestSpec { body: Some(&large), ..spec("PUT", &[]) });
        assert!(request.shared.as_ref().is_some_and(|shared| Arc::ptr_eq(shared, &large)));
        assert!(request.copied.ends_with(b"Content-Length: 4096\r\n\r\n"));
    }
}
