//! The URL a benchmark loads, and the request it sends there, built once.

use std::net::{SocketAddr, ToSocketAddrs};

/// Where the load goes: `http://host[:port][/path]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    /// Host as written, and port: what `Host` says and what is resolved.
    pub host: String,
    /// TCP port (80 when the URL gives none).
    pub port: u16,
    /// Path and query, at least `/`.
    pub path: String,
}

impl Target {
    /// Parses an `http://` URL.
    pub fn parse(url: &str) -> Result<Target, String> {
        let rest = url.strip_prefix("http://").ok_or_else(|| {
            if url.starts_with("https://") {
                format!("{url}: https is not supported; percore bench speaks plain HTTP/1.1")
            } else {
                format!("{url}: not an http:// URL")
            }
        })?;
        let path_at = rest.find(['/', '?']).unwrap_or(rest.len());
        let (authority, path) = rest.split_at(path_at);
        let (host, port) = match authority.rsplit_once(':') {
            // A colon inside brackets belongs to an IPv6 address, not a port.
            Some((host, port)) if !port.contains(']') => {
                (host, port.parse().map_err(|_| format!("{url}: invalid port {port:?}"))?)
            }
            _ => (authority, 80),
        };
        if host.is_empty() {
            return Err(format!("{url}: no host"));
        }
        let path = match path {
            "" => "/".to_string(),
            p if p.starts_with('?') => format!("/{p}"),
            p => p.to_string(),
        };
        Ok(Target { host: host.to_string(), port, path })
    }

    /// The first address the host resolves to.
    pub fn resolve(&self) -> Result<SocketAddr, String> {
        let host = self.host.trim_start_matches('[').trim_end_matches(']');
        (host, self.port)
            .to_socket_addrs()
            .map_err(|e| format!("cannot resolve {}: {e}", self.host))?
            .next()
            .ok_or_else(|| format!("cannot resolve {}: no address", self.host))
    }

    /// The request to send: HTTP/1.1 keep-alive, or (`close`) HTTP/1.0 with no
    /// keep-alive, as ab sends without `-k`. `headers` are `Name: value` lines; one
    /// named `Host` replaces the URL's.
    pub fn request(&self, method: &str, headers: &[String], close: bool) -> Vec<u8> {
        let version = if close { "HTTP/1.0" } else { "HTTP/1.1" };
        let mut request = format!("{method} {} {version}\r\n", self.path);
        if !headers.iter().any(|h| h.split(':').next().is_some_and(|n| n.trim().eq_ignore_ascii_case("host")))
        {
            let host =
                if self.port == 80 { self.host.clone() } else { format!("{}:{}", self.host, self.port) };
            request += &format!("Host: {host}\r\n");
        }
        for header in headers {
            request += &format!("{}\r\n", header.trim());
        }
        request += "\r\n";
        request.into_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        let t = Target::parse("http://127.0.0.1:8080/a?b=1").unwrap();
        assert_eq!((t.host.as_str(), t.port, t.path.as_str()), ("127.0.0.1", 8080, "/a?b=1"));
        let t = Target::parse("http://example.com").unwrap();
        assert_eq!((t.host.as_str(), t.port, t.path.as_str()), ("example.com", 80, "/"));
        let t = Target::parse("http://[::1]:9000?x").unwrap();
        assert_eq!((t.host.as_str(), t.port, t.path.as_str()), ("[::1]", 9000, "/?x"));
        for bad in ["https://a/", "ftp://a", "http://", "http://a:x/", "127.0.0.1:80"] {
            assert!(Target::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn requests() {
        let t = Target::parse("http://h:81/p").unwrap();
        assert_eq!(t.request("GET", &[], false), b"GET /p HTTP/1.1\r\nHost: h:81\r\n\r\n");
        assert_eq!(
            t.request("HEAD", &["X-A: 1".into()], true),
            b"HEAD /p HTTP/1.0\r\nHost: h:81\r\nX-A: 1\r\n\r\n"
        );
        assert_eq!(
            t.request("GET", &["host: other".into()], false),
            b"GET /p HTTP/1.1\r\nhost: other\r\n\r\n"
        );
    }
}
