//! How `percore bench` speaks TLS to an `https://` URL, on the library's
//! [`ClientTls`]: whom it trusts, whether it resumes sessions, the server's name;
//! what a handshake agreed on, as the report names it; and a handshake that failed,
//! told from a connect that failed and said in words.

use std::io;

use percore::http::Hello;
use percore::reactor::Protocol;
use percore::tls::{ClientTls, ClientTlsOptions, Negotiated, Trust};

/// How a run speaks TLS.
#[derive(Clone, Debug)]
pub struct TlsPlan {
    pub trust: Trust,
    /// Keep the tickets the server sends and resume with them.
    pub resume: bool,
    /// Connections a thread keeps open: it keeps as many tickets, so that a burst
    /// of them opened at once (to replace as many closed) all resume.
    pub connections: usize,
    /// The name the server's certificate must have (sent by SNI unless an address).
    pub server_name: String,
}

/// A load thread's TLS: its own client, and the name of the server it speaks to.
#[derive(Debug)]
pub struct TlsClient {
    pub client: ClientTls,
    pub server_name: String,
}

impl TlsPlan {
    /// A client as the plan says, offering HTTP/1.1 by ALPN (by the name the
    /// library's HTTP/1.1 server answers to). Each load thread makes its own:
    /// clones of one would share the sessions kept to resume with, and the lock
    /// that guards them, taken at every handshake of every thread.
    pub fn client(&self) -> Result<TlsClient, String> {
        let options = ClientTlsOptions {
            alpn: Hello::ALPN.iter().map(|name| name.to_vec()).collect(),
            resume: if self.resume { self.connections.max(1) } else { 0 },
        };
        let client = ClientTls::new(&self.trust, &options).map_err(|e| format!("--cacert {e}"))?;
        Ok(TlsClient { client, server_name: self.server_name.clone() })
    }
}

/// Whether a TLS connection that failed to open (`Closed::ConnectFailed(kind)`)
/// failed in its handshake rather than in its TCP connect: the loop says only the
/// kind, and these come only once the connection was made (a connect that fails is
/// refused, unreachable or timed out).
pub fn handshake_failed(kind: io::ErrorKind) -> bool {
    use io::ErrorKind::{BrokenPipe, ConnectionReset, InvalidData, UnexpectedEof};
    matches!(kind, InvalidData | UnexpectedEof | ConnectionReset | BrokenPipe)
}

/// Why a handshake failed, in words, from what the loop says of it: its kind alone
/// (the library keeps rustls's own reason to itself).
pub fn failure_reason(kind: io::ErrorKind) -> String {
    match kind {
        io::ErrorKind::InvalidData => {
            "the handshake failed: a certificate that does not verify (see --cacert), \
             a handshake the server refused, or a server that does not speak TLS there"
                .to_string()
        }
        io::ErrorKind::UnexpectedEof => "the server closed the connection during the handshake".to_string(),
        kind => format!("the handshake failed: {}", io::Error::from(kind)),
    }
}

/// What a handshake agreed on, as the report names it: the version as OpenSSL
/// writes it (`TLSv1.3`), the cipher suite by its IANA name
/// (`TLS13_AES_128_GCM_SHA256`).
pub fn agreed(negotiated: &Negotiated) -> (&'static str, &'static str) {
    // The codes on the wire: RFC 8446, 4.2.1, and RFC 5246, A.1.
    let version = match u16::from(negotiated.version) {
        0x0304 => "TLSv1.3",
        0x0303 => "TLSv1.2",
        // The client speaks no other; named as rustls names it, should one come.
        _ => negotiated.version.as_str().unwrap_or("unknown"),
    };
    (version, negotiated.suite.as_str().unwrap_or("unknown"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_handshake_that_failed_is_told_from_a_connect_that_did() {
        for kind in [io::ErrorKind::InvalidData, io::ErrorKind::UnexpectedEof, io::ErrorKind::ConnectionReset]
        {
            assert!(handshake_failed(kind), "{kind:?}");
        }
        for kind in
            [io::ErrorKind::ConnectionRefused, io::ErrorKind::TimedOut, io::ErrorKind::HostUnreachable]
        {
            assert!(!handshake_failed(kind), "{kind:?}");
        }
        assert!(failure_reason(io::ErrorKind::InvalidData).contains("does not verify"));
        assert!(failure_reason(io::ErrorKind::ConnectionReset).starts_with("the handshake failed: "));
    }

    #[test]
    fn a_ca_file_that_cannot_be_used_says_so_with_its_flag() {
        let plan = TlsPlan {
            trust: Trust::CaFile("/nonexistent/ca.pem".into()),
            resume: false,
            connections: 1,
            server_name: "localhost".into(),
        };
        let error = plan.client().map(drop).expect_err("no such file");
        assert!(error.starts_with("--cacert /nonexistent/ca.pem: "), "{error}");
        let insecure = TlsPlan { trust: Trust::InsecureAnyCertificate, resume: true, ..plan };
        assert!(insecure.client().is_ok());
    }
}
