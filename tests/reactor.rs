//! The loop used directly as a library, in-process: limits any protocol gets.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use percore::listen::{self, ListenOptions};
use percore::reactor::{Config, Io, Protocol, Reactor, Verdict};

/// Waits for a terminator that never comes: consumes nothing, answers nothing.
struct NeverConsumes;

impl Protocol for NeverConsumes {
    type Conn = ();

    fn on_data(&mut self, _conn: &mut (), _input: &[u8], _io: &mut Io<'_>) -> Verdict {
        Verdict::keep(0)
    }
}

#[test]
fn pending_input_beyond_the_limit_closes_the_connection() {
    let listener = listen::bind(([127, 0, 0, 1], 0).into(), &ListenOptions::default()).expect("binding");
    let addr = listener.local_addr().expect("the bound address");
    let config = Config { max_pending_input: 4096, ..Config::default() };
    let mut reactor = Reactor::new(listener, NeverConsumes, config).expect("a loop");
    // The loop runs until the test process exits.
    std::thread::spawn(move || reactor.run());

    let mut client = TcpStream::connect(addr).expect("connecting");
    client.set_read_timeout(Some(Duration::from_secs(10))).expect("a read timeout");
    client.write_all(&[b'x'; 1000]).expect("sending under the limit");
    client.write_all(&[b'x'; 8000]).expect("sending over the limit");
    let mut rest = Vec::new();
    // Closed without an answer: end of stream, or a reset for the unread bytes.
    match client.read_to_end(&mut rest) {
        Ok(_) => assert!(rest.is_empty(), "no answer expected, got {rest:?}"),
        Err(e) => assert_eq!(e.kind(), std::io::ErrorKind::ConnectionReset, "{e}"),
    }
}
