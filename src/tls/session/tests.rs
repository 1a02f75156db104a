//! Sessions against rustls's own buffered connections as the peer (a record layer
//! that is not ours), and against each other: every version and cipher suite,
//! records cut anywhere, key updates, alerts, tickets, renegotiation.

use std::io::{Read, Write};
use std::path::PathBuf;
use std::sync::Arc;

use rustls::crypto::aws_lc_rs as provider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{
    CipherSuite, ClientConnection, ServerConnection, SupportedCipherSuite, SupportedProtocolVersion,
};

use super::*;
use crate::tls::{ClientTls, ClientTlsOptions, ServerTls, Trust, MAX_PLAINTEXT};

fn file(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/tls").join(name)
}

fn server_tls() -> ServerTls {
    ServerTls::from_pem_files(file("localhost.pem"), file("localhost.key"))
        .expect("the test certificate")
        .with_alpn(&[b"http/1.1"])
}

fn localhost() -> ServerName<'static> {
    ServerName::try_from("localhost").expect("a name")
}

fn roots() -> rustls::RootCertStore {
    let mut roots = rustls::RootCertStore::empty();
    let ca = CertificateDer::pem_file_iter(file("ca.pem")).expect("the CA");
    roots.add_parsable_certificates(ca.map(|c| c.expect("a certificate")));
    roots
}

fn version_of(suite: SupportedCipherSuite) -> &'static SupportedProtocolVersion {
    match suite {
        SupportedCipherSuite::Tls13(_) => &rustls::version::TLS13,
        SupportedCipherSuite::Tls12(_) => &rustls::version::TLS12,
    }
}

/// rustls's buffered client, trusting the test CA, offering `suite` alone.
fn rustls_client(suite: SupportedCipherSuite) -> ClientConnection {
    let provider =
        rustls::crypto::CryptoProvider { cipher_suites: vec![suite], ..provider::default_provider() };
    let mut config = rustls::ClientConfig::builder_with_provider(Arc::new(provider))
        .with_protocol_versions(&[version_of(suite)])
        .expect("a version")
        .with_root_certificates(roots())
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    ClientConnection::new(Arc::new(config), localhost()).expect("a client")
}

fn tls13() -> SupportedCipherSuite {
    provider::cipher_suite::TLS13_AES_128_GCM_SHA256
}

fn tls12() -> SupportedCipherSuite {
    provider::cipher_suite::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256
}

/// What a rustls peer sent, for the session to take.
fn sent_by(peer: &mut impl RustlsPeer) -> Vec<u8> {
    let mut sent = Vec::new();
    peer.write(&mut sent);
    sent
}

/// rustls's two buffered connections, as the tests drive them.
trait RustlsPeer {
    fn write(&mut self, out: &mut Vec<u8>);
    fn deliver(&mut self, bytes: &[u8]);
    fn handshaking(&self) -> bool;
    fn send(&mut self, plaintext: &[u8]);
    fn received(&mut self) -> Vec<u8>;
}

macro_rules! rustls_peer {
    ($connection:ty) => {
        impl RustlsPeer for $connection {
            fn write(&mut self, out: &mut Vec<u8>) {
                while self.wants_write() {
                    self.write_tls(out).expect("to a vector");
                }
            }
            fn deliver(&mut self, mut bytes: &[u8]) {
                while !bytes.is_empty() {
                    self.read_tls(&mut bytes).expect("read_tls");
                    self.process_new_packets().expect("records rustls takes");
                }
            }
            fn handshaking(&self) -> bool {
                self.is_handshaking()
            }
            fn send(&mut self, plaintext: &[u8]) {
                self.writer().write_all(plaintext).expect("written");
            }
            fn received(&mut self) -> Vec<u8> {
                let mut plaintext = Vec::new();
                match self.reader().read_to_end(&mut plaintext) {
                    Err(e) if e.kind() != std::io::ErrorKind::WouldBlock => panic!("{e}"),
                    _ => plaintext,
                }
            }
        }
    };
}

rustls_peer!(ClientConnection);
rustls_peer!(ServerConnection);

/// `session` and `peer` through their handshake, flight by flight: what the peer
/// sent after it (a server's tickets), for the session to open.
fn handshake_with(session: &mut Session, peer: &mut impl RustlsPeer) -> Vec<u8> {
    let mut out = Vec::new();
    let mut from_peer = Vec::new();
    for _ in 0..10 {
        out.clear();
        let done = session.handshake(&from_peer, &mut out).expect("a handshake");
        peer.deliver(&out);
        from_peer = sent_by(peer);
        if done == Handshaking::Done && !peer.handshaking() {
            return from_peer;
        }
    }
    panic!("no handshake in ten flights")
}

/// A server session through its handshake with a rustls client of `suite`.
fn server_with(suite: SupportedCipherSuite) -> (Session, ClientConnection) {
    let mut client = rustls_client(suite);
    let mut server = server_tls().session();
    assert!(handshake_with(&mut server, &mut client).is_empty(), "a client sends nothing after its Finished");
    (server, client)
}

/// What `session` opens of `sealed`, handed in `piece` bytes at a time as a
/// socket gives them: the plaintext in order, whether the peer closed, and what the
/// session sent back.
fn open_in_pieces(
    session: &mut Session,
    sealed: &[u8],
    piece: usize,
) -> Result<(Vec<u8>, bool, Vec<u8>), Failure> {
    let (mut plaintext, mut closed, mut out) = (Vec::new(), false, Vec::new());
    let mut buffer = vec![0; 64 * 1024];
    let early = session.take_early(&mut buffer);
    plaintext.extend_from_slice(&buffer[..early]);
    for chunk in sealed.chunks(piece.max(1)) {
        let kept = session.take_partial(&mut buffer);
        buffer[kept..kept + chunk.len()].copy_from_slice(chunk);
        let opened = session.open(&mut buffer, kept + chunk.len(), &mut out)?;
        plaintext.extend_from_slice(&buffer[..opened.plaintext]);
        closed |= opened.peer_closed;
    }
    Ok((plaintext, closed, out))
}

/// `plaintext` sealed by `session`, in records of at most `MAX_PLAINTEXT`.
fn sealed_by(session: &mut Session, plaintext: &[u8], content_type: ContentType) -> Vec<u8> {
    let records = session.records().expect("established");
    let mut out = Vec::new();
    for content in plaintext.chunks(MAX_PLAINTEXT) {
        let start = records.begin(&mut out);
        out.extend_from_slice(content);
        records.seal(&mut out, start, content_type);
    }
    out
}

#[test]
fn every_version_and_suite_carries_data_both_ways_with_rustls_as_the_peer() {
    let mut seen = Vec::new();
    // The test certificate's key is ECDSA: the TLS 1.2 suites that sign with RSA are
    // not for it.
    let ecdsa = provider::ALL_CIPHER_SUITES.iter().filter(|s| !format!("{:?}", s.suite()).contains("_RSA_"));
    for &suite in ecdsa {
        let (mut server, mut client) = server_with(suite);
        let negotiated = server.negotiated().expect("established").clone();
        assert_eq!((negotiated.suite, negotiated.alpn.as_deref()), (suite.suite(), Some(&b"http/1.1"[..])));
        assert!(!negotiated.resumed);
        // Several records, one larger than a record holds.
        let request: Vec<u8> = (0..40_000u32).map(|i| (i % 251) as u8).collect();
        client.send(&request);
        let (opened, closed, out) =
            open_in_pieces(&mut server, &sent_by(&mut client), usize::MAX).expect("opens");
        assert!(opened == request && !closed && out.is_empty(), "{:?}", suite.suite());
        let answer = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi".repeat(500);
        client.deliver(&sealed_by(&mut server, &answer, ContentType::ApplicationData));
        assert_eq!(client.received(), answer, "{:?}", suite.suite());
        seen.push((negotiated.version, suite.suite()));
    }
    assert!(seen
        .contains(&(rustls::ProtocolVersion::TLSv1_2, CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256)));
    assert!(seen.contains(&(rustls::ProtocolVersion::TLSv1_3, CipherSuite::TLS13_CHACHA20_POLY1305_SHA256)));
}

#[test]
fn records_cut_anywhere_open_to_the_same_plaintext() {
    let requests: [&[u8]; 3] = [b"GET / HTTP/1.1\r\n\r\n", b"x", b"GET /2 HTTP/1.1\r\n\r\n"];
    for suite in [tls13(), tls12(), provider::cipher_suite::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256] {
        let (mut server, mut client) = server_with(suite);
        for piece in [1, 2, 5, 7, 13, 29, 64] {
            let mut sealed = Vec::new();
            for request in requests {
                client.send(request);
                sealed.extend(sent_by(&mut client));
            }
            let (opened, _, _) = open_in_pieces(&mut server, &sealed, piece).expect("opens");
            assert_eq!(opened, requests.concat(), "{:?} in pieces of {piece}", suite.suite());
        }
    }
}

#[test]
fn a_request_sent_with_the_clients_finished_comes_first() {
    let mut client = rustls_client(tls13());
    let mut server = server_tls().session();
    let mut out = Vec::new();
    assert!(matches!(server.handshake(&sent_by(&mut client), &mut out), Ok(Handshaking::Reading)));
    client.deliver(&out);
    // The client's Finished and its request, in one flight.
    client.send(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n");
    out.clear();
    assert!(matches!(server.handshake(&sent_by(&mut client), &mut out), Ok(Handshaking::Done)));
    client.deliver(&out);
    let (opened, _, _) = open_in_pieces(&mut server, b"", 1).expect("opens");
    assert_eq!(opened, b"GET / HTTP/1.1\r\nHost: a\r\n\r\n");
}

#[test]
fn a_key_update_is_followed_and_answered() {
    let (mut server, mut client) = server_with(tls13());
    client.refresh_traffic_keys().expect("TLS 1.3");
    client.send(b"after the update");
    let (opened, _, answer) = open_in_pieces(&mut server, &sent_by(&mut client), usize::MAX).expect("opens");
    assert_eq!(opened, b"after the update");
    // rustls asks the peer to update too: the answer goes first, then new records.
    client.deliver(&answer);
    client.deliver(&sealed_by(&mut server, b"under the new key", ContentType::ApplicationData));
    assert_eq!(client.received(), b"under the new key");
}

#[test]
fn close_notify_ends_the_peers_stream_and_ours_is_read_as_its_end() {
    let (mut server, mut client) = server_with(tls13());
    client.send(b"last");
    client.send_close_notify();
    let (opened, closed, _) = open_in_pieces(&mut server, &sent_by(&mut client), 3).expect("opens");
    assert_eq!((opened.as_slice(), closed), (&b"last"[..], true));
    let mut out = Vec::new();
    server.close_notify(&mut out);
    client.deliver(&out);
    let mut rest = Vec::new();
    assert_eq!(client.reader().read_to_end(&mut rest).expect("a clean end"), 0);
}

#[test]
fn a_record_altered_on_the_way_fails_with_a_fatal_alert_the_peer_reads() {
    for suite in [tls13(), tls12()] {
        let (mut server, mut client) = server_with(suite);
        client.send(b"GET / HTTP/1.1\r\n\r\n");
        let mut sealed = sent_by(&mut client);
        let last = sealed.len() - 1;
        sealed[last] ^= 1;
        let Err(Failure::Record(RecordError::BadMac)) = open_in_pieces(&mut server, &sealed, usize::MAX)
        else {
            panic!("{:?}: not refused", suite.suite())
        };
        // Nothing more is opened after it.
        assert!(server.records().is_none());
    }
    // The alert reaches the peer: a record that does not open ends rustls's reading.
    let (mut server, mut client) = server_with(tls13());
    client.send(b"x");
    let mut altered = sent_by(&mut client);
    altered[6] ^= 0x80;
    let mut buffer = altered.clone();
    let mut out = Vec::new();
    assert!(server.open(&mut buffer, altered.len(), &mut out).is_err());
    let mut alert = &out[..];
    client.read_tls(&mut alert).expect("read_tls");
    let refused = client.process_new_packets().expect_err("a fatal alert");
    assert_eq!(refused, rustls::Error::AlertReceived(rustls::AlertDescription::BadRecordMac));
}

#[test]
fn a_handshake_refused_tells_the_peer_why_with_an_alert() {
    // Bytes that are no TLS (http:// to an https port), an empty ClientHello, a
    // ClientHello begun and then garbage: one decode_error alert, in plaintext.
    for input in [
        &b"GET / HTTP/1.1\r\n\r\n"[..],
        &[22, 3, 1, 0, 4, 1, 0, 0, 0],
        &[22, 3, 1, 0, 2, 1, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff],
    ] {
        let mut server = server_tls().session();
        let mut out = Vec::new();
        assert!(matches!(server.handshake(input, &mut out), Err(Failure::Handshake(_))), "{input:?}");
        assert_eq!(out, [21, 3, 3, 0, 2, 2, 50], "{input:?}");
    }
    // A handshake message announced past rustls's limit: refused, with no alert
    // from rustls for it, and nothing read past the error.
    let mut server = server_tls().session();
    let mut out = Vec::new();
    assert!(server.handshake(&[22, 3, 1, 0, 5, b'h', b'e', b'l', b'l', b'o'], &mut out).is_err());
    assert_eq!(out, []);
    // A client offering no protocol the server speaks by ALPN reads why.
    let mut client = rustls_client(tls13());
    let mut server = server_tls().with_alpn(&[b"h2"]).session();
    let mut out = Vec::new();
    assert!(server.handshake(&sent_by(&mut client), &mut out).is_err());
    let mut alert = &out[..];
    client.read_tls(&mut alert).expect("read_tls");
    let refused = client.process_new_packets().expect_err("a fatal alert");
    assert_eq!(refused, rustls::Error::AlertReceived(rustls::AlertDescription::NoApplicationProtocol));
}

#[test]
fn a_header_longer_than_a_peer_may_send_is_refused_before_its_body_comes() {
    for (suite, header) in [(tls13(), [23, 3, 3, 0x41, 0x01]), (tls12(), [23, 3, 3, 0x48, 0x01])] {
        let (mut server, _client) = server_with(suite);
        let result = open_in_pieces(&mut server, &header, usize::MAX);
        assert!(matches!(result, Err(Failure::Record(RecordError::Overflow))), "{:?}", suite.suite());
    }
    // Past the TLS 1.3 handshake every record is application data on the outside.
    let (mut server, _client) = server_with(tls13());
    let result = open_in_pieces(&mut server, &[22, 3, 3, 0, 1, 0], usize::MAX);
    assert!(matches!(result, Err(Failure::Record(RecordError::Unexpected))));
}

/// A client session of ours (of `version` alone) to a server session of ours,
/// through their handshake.
fn ours(version: &'static SupportedProtocolVersion) -> (Session, Session) {
    let mut config = rustls::ClientConfig::builder_with_provider(Arc::new(provider::default_provider()))
        .with_protocol_versions(&[version])
        .expect("a version")
        .with_root_certificates(roots())
        .with_no_client_auth();
    config.enable_secret_extraction = true;
    let conn =
        rustls::client::UnbufferedClientConnection::new(Arc::new(config), localhost()).expect("a client");
    let mut client = Session::client(conn);
    let mut server = server_tls().session();
    let (mut to_server, mut to_client) = (Vec::new(), Vec::new());
    for _ in 0..10 {
        to_server.clear();
        let client_done = client.handshake(&to_client, &mut to_server).expect("the client's handshake");
        to_client.clear();
        let server_done = server.handshake(&to_server, &mut to_client).expect("the server's handshake");
        if client_done == Handshaking::Done && server_done == Handshaking::Done {
            // The server's ticket, after its last handshake record, reaches the client
            // as a record.
            let (plaintext, _, _) = open_in_pieces(&mut client, &to_client, usize::MAX).expect("opens");
            assert!(plaintext.is_empty());
            return (client, server);
        }
    }
    panic!("no handshake in ten flights")
}

#[test]
fn our_client_and_our_server_talk_and_a_tls_1_3_client_hello_is_fatal() {
    let (mut client, mut server) = ours(&rustls::version::TLS13);
    let (opened, _, _) =
        open_in_pieces(&mut server, &sealed_by(&mut client, b"ping", ContentType::ApplicationData), 1)
            .expect("opens");
    assert_eq!(opened, b"ping");
    let (opened, _, _) =
        open_in_pieces(&mut client, &sealed_by(&mut server, b"pong", ContentType::ApplicationData), 3)
            .expect("opens");
    assert_eq!(opened, b"pong");
    // In TLS 1.3 a ClientHello after the handshake is no message at all: fatal.
    let hello = sealed_by(&mut client, &[1, 0, 0, 0], ContentType::Handshake);
    assert!(matches!(
        open_in_pieces(&mut server, &hello, usize::MAX),
        Err(Failure::Record(RecordError::Unexpected))
    ));
}

#[test]
fn a_tls_1_2_client_asking_to_renegotiate_gets_a_warning_and_the_connection_goes_on() {
    let (mut client, mut server) = ours(&rustls::version::TLS12);
    let hello = sealed_by(&mut client, &[1, 0, 0, 0], ContentType::Handshake);
    let (opened, _, warning) = open_in_pieces(&mut server, &hello, usize::MAX).expect("not fatal");
    assert!(opened.is_empty() && !warning.is_empty());
    // The warning is read and let go; data goes on both ways.
    let (opened, _, _) = open_in_pieces(&mut client, &warning, usize::MAX).expect("a warning");
    assert!(opened.is_empty());
    let (opened, _, _) =
        open_in_pieces(&mut server, &sealed_by(&mut client, b"after", ContentType::ApplicationData), 4)
            .expect("opens");
    assert_eq!(opened, b"after");
}

#[test]
fn a_ticket_from_a_rustls_server_lets_our_client_resume() {
    let server_config = {
        let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(provider::default_provider()))
            .with_safe_default_protocol_versions()
            .expect("versions")
            .with_no_client_auth()
            .with_single_cert(
                CertificateDer::pem_file_iter(file("localhost.pem"))
                    .expect("pem")
                    .map(|c| c.expect("cert"))
                    .collect(),
                rustls::pki_types::PrivateKeyDer::from_pem_file(file("localhost.key")).expect("key"),
            )
            .expect("a config");
        config.ticketer = provider::Ticketer::new().expect("a ticketer");
        Arc::new(config)
    };
    let options = ClientTlsOptions { resume: 8, ..ClientTlsOptions::default() };
    let client_tls = ClientTls::new(&Trust::CaFile(file("ca.pem")), &options).expect("the CA");
    let mut resumed = Vec::new();
    for _ in 0..2 {
        let mut server = ServerConnection::new(Arc::clone(&server_config)).expect("a server");
        let mut client = client_tls.session("localhost").expect("a session");
        let tickets = handshake_with(&mut client, &mut server);
        // The tickets come after the handshake, as records.
        let (plaintext, _, _) = open_in_pieces(&mut client, &tickets, usize::MAX).expect("opens");
        assert!(plaintext.is_empty());
        resumed.push(client.negotiated().expect("established").resumed);
        server.send(b"hello");
        let (opened, _, _) = open_in_pieces(&mut client, &sent_by(&mut server), 2).expect("opens");
        assert_eq!(opened, b"hello");
    }
    assert_eq!(resumed, [false, true]);
}

#[test]
fn a_key_at_its_limit_is_updated_in_tls_1_3_and_ends_a_tls_1_2_connection() {
    let (mut server, mut client) = server_with(tls13());
    server.records().expect("established").limit_tx(2);
    let mut sealed = Vec::new();
    for record in 0..5 {
        assert!(server.refresh_if_exhausted(&mut sealed), "record {record}");
        let records = server.records().expect("established");
        let start = records.begin(&mut sealed);
        sealed.extend_from_slice(format!("record {record};").as_bytes());
        records.seal(&mut sealed, start, ContentType::ApplicationData);
    }
    // rustls follows the KeyUpdate sealed under the old key.
    client.deliver(&sealed);
    assert_eq!(client.received(), b"record 0;record 1;record 2;record 3;record 4;");
    let (mut server, _client) = server_with(tls12());
    server.records().expect("established").limit_tx(0);
    assert!(!server.refresh_if_exhausted(&mut Vec::new()), "TLS 1.2 has no key update");
}

#[test]
fn a_flood_of_key_updates_is_cut_off() {
    let (mut server, mut client) = server_with(tls13());
    let mut flood = Vec::new();
    for _ in 0..=KEY_UPDATES_IN_A_ROW {
        client.refresh_traffic_keys().expect("TLS 1.3");
        flood.extend(sent_by(&mut client));
    }
    assert!(matches!(
        open_in_pieces(&mut server, &flood, usize::MAX),
        Err(Failure::Record(RecordError::Unexpected))
    ));
}
