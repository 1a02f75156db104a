//! The Harness with its connections speaking TLS (`Harness::with_tls`): the test is
//! their TLS client, so a protocol is driven by the same calls, and answers with the
//! same bytes, as without TLS; what differs is the wire: records, cut where the
//! record layer cuts them, opened by the test's TLS.

use std::path::PathBuf;
use std::time::Duration;

use percore::http::{Body, Hello, HelloConfig};
use percore::reactor::{Config, Flow, Harness, Io, PeerReads, Protocol, Verdict};
use percore::tls::ServerTls;

fn tls() -> ServerTls {
    let file = |name: &str| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/tls").join(name);
    ServerTls::from_pem_files(file("localhost.pem"), file("localhost.key")).expect("the test certificate")
}

fn hello(config: &HelloConfig) -> Hello {
    Hello::new(config)
}

/// The hello server's answers to `requests`, through a harness with and without TLS.
fn both_ways(config: &HelloConfig, requests: &[&[u8]]) -> (Vec<u8>, Vec<u8>) {
    let mut plain = Harness::new(hello(config));
    let mut secured = Harness::with_tls(hello(config), Config::default(), &tls());
    for request in requests {
        plain.receive(request);
        secured.receive(request);
    }
    (plain.take_output(), secured.take_output())
}

#[test]
fn the_hello_server_answers_the_same_bytes_over_tls() {
    let config = HelloConfig::default();
    let get = &b"GET / HTTP/1.1\r\nHost: a\r\n\r\n"[..];
    let (plain, secured) =
        both_ways(&config, &[get, &get.repeat(16), b"GET /x HTTP/1.1\r\nHo", b"st: a\r\n\r\n"]);
    assert!(plain.starts_with(b"HTTP/1.1 200 OK\r\n"));
    // The Date field differs by the second at most: compare what surrounds it.
    let without_date = |answer: &[u8]| {
        String::from_utf8_lossy(answer)
            .lines()
            .filter(|l| !l.starts_with("Date:"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert_eq!(without_date(&secured), without_date(&plain));
    assert_eq!(String::from_utf8_lossy(&secured).matches("hello, world!").count(), 18);
}

#[test]
fn a_body_larger_than_a_record_comes_whole_taken_in_pieces() {
    // 100 KiB shared by reference: seven records, sealed as the test reads.
    let body: Vec<u8> = (0..100 * 1024).map(|i: u32| (i % 251) as u8).collect();
    let config = HelloConfig { body: Body::bytes(body.clone()), ..HelloConfig::default() };
    let mut harness = Harness::with_tls(hello(&config), Config::default(), &tls());
    harness.receive(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n");
    let mut answer = Vec::new();
    for _ in 0..1000 {
        let piece = harness.take_some_output_of(harness.id(), 3000);
        if piece.is_empty() && answer.ends_with(&body) {
            break;
        }
        answer.extend(piece);
    }
    assert!(answer.starts_with(b"HTTP/1.1 200 OK\r\n") && answer.ends_with(&body), "{} bytes", answer.len());
}

/// Writes `size` bytes per input byte, pausing once the output is full: the
/// back-pressure a protocol keeps through `Io::is_full`.
#[derive(Default)]
struct Flood {
    paused: u32,
}

impl Protocol for Flood {
    type Conn = ();
    fn on_data(&mut self, _: &mut (), input: &[u8], io: &mut Io<'_>) -> Verdict {
        for (at, _) in input.iter().enumerate() {
            if io.is_full() {
                self.paused += 1;
                return Verdict::pause(at);
            }
            io.write(&[b'x'; 64 * 1024]);
        }
        Verdict::keep(input.len())
    }
}

#[test]
fn output_the_test_does_not_read_holds_a_protocol_back_as_without_tls() {
    let mut harness = Harness::with_tls(Flood::default(), Config::default(), &tls());
    harness.receive(&[0; 16]);
    assert_eq!(harness.protocol().paused, 1, "paused at the budget: the test has read nothing");
    let taken = harness.take_output();
    assert_eq!(taken.len(), 16 * 64 * 1024, "the rest comes as the test reads");
    assert!(taken.iter().all(|&b| b == b'x'));
}

/// Says, on open, what the TLS handshake agreed on.
struct Negotiated;

impl Protocol for Negotiated {
    type Conn = ();
    const ALPN: &'static [&'static [u8]] = &[b"negotiated/1"];
    fn on_open(&mut self, _: &mut (), io: &mut Io<'_>) -> Flow {
        let tls = io.tls().expect("a TLS connection").clone();
        let line = format!("{:?} {:?} {:?}\n", tls.version, tls.suite, tls.alpn.map(String::from_utf8));
        io.write(line.as_bytes());
        Flow::Continue
    }
    fn on_data(&mut self, _: &mut (), input: &[u8], _: &mut Io<'_>) -> Verdict {
        Verdict::keep(input.len())
    }
}

#[test]
fn a_protocol_sees_what_the_handshake_agreed_on_and_each_accepted_connection_has_its_own() {
    let mut harness = Harness::with_tls(Negotiated, Config::default(), &tls());
    let first = String::from_utf8(harness.take_output()).expect("text");
    assert!(
        first.starts_with("TLSv1_3 TLS13_") && first.ends_with("Some(Ok(\"negotiated/1\"))\n"),
        "{first}"
    );
    let other = harness.accept();
    assert_ne!(other, harness.id());
    assert_eq!(String::from_utf8(harness.take_output_of(other)).expect("text"), first);
}

#[test]
fn the_loops_timeouts_hold_over_tls() {
    let config = Config { idle_timeout: Some(Duration::from_secs(5)), ..Config::default() };
    let mut harness = Harness::with_tls(hello(&HelloConfig::default()), config, &tls());
    harness.set_peer_reads(PeerReads::AtOnce);
    harness.receive(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n");
    assert!(harness.take_output().starts_with(b"HTTP/1.1 200 OK"));
    harness.advance(Duration::from_secs(6));
    assert!(harness.closed(harness.id()).is_some(), "idle past the timeout");
}

/// Opens two TLS connections when its own opens: one to a name that is no name,
/// one to `localhost`; keeps what each close said.
struct Dialer {
    client: percore::tls::ClientTls,
    opened: Vec<percore::reactor::ConnId>,
    closed: Vec<(percore::reactor::ConnId, percore::reactor::Closed)>,
}

impl Protocol for Dialer {
    type Conn = ();
    fn on_open(&mut self, _: &mut (), io: &mut Io<'_>) -> Flow {
        if self.opened.is_empty() {
            let addr = std::net::SocketAddr::from(([127, 0, 0, 1], 443));
            self.opened.push(io.connect_tls(addr, &self.client, "not a name!"));
            self.opened.push(io.connect_tls(addr, &self.client, "localhost"));
        }
        Flow::Continue
    }
    fn on_data(&mut self, _: &mut (), input: &[u8], _: &mut Io<'_>) -> Verdict {
        Verdict::keep(input.len())
    }
    fn on_close(&mut self, _: &mut (), closed: percore::reactor::Closed, _: &[u8], io: &mut Io<'_>) {
        self.closed.push((io.id(), closed));
    }
}

#[test]
fn a_callback_opens_tls_connections_and_a_name_that_is_none_fails_as_a_connect() {
    use percore::tls::{ClientTls, ClientTlsOptions, Trust};
    let client =
        ClientTls::new(&Trust::InsecureAnyCertificate, &ClientTlsOptions::default()).expect("a client");
    let mut harness = Harness::new(Dialer { client, opened: Vec::new(), closed: Vec::new() });
    harness.open();
    let (bad, good) = (harness.protocol().opened[0], harness.protocol().opened[1]);
    let refused = percore::reactor::Closed::ConnectFailed(std::io::ErrorKind::InvalidInput);
    assert_eq!(harness.protocol().closed, [(bad, refused)]);
    // The other is being opened (the harness plays no TLS server: a test of one
    // runs a loop, as percore-bin/tests/tls.rs does through the proxy).
    assert_eq!(harness.connecting().iter().map(|(id, _)| *id).collect::<Vec<_>>(), [good]);
}
