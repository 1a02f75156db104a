//! The [`Harness`](super::Harness)'s wire: the test is the peer, and the bytes it
//! sends and reads are vectors.

use std::io;
use std::net::{Ipv4Addr, SocketAddr};

use crate::listen::Address;
use crate::reactor::io::Addresses;
use crate::reactor::output::{Output, SendQueue};
use crate::reactor::protocol::Closed;
use crate::reactor::slab::Token;
use crate::reactor::wire::{Establishing, Received, Wire};

/// One connection's wire, its far end the test.
#[derive(Debug)]
pub(crate) struct Peer {
    /// Bytes the test sent that the connection has not read yet.
    pub(crate) unread: Vec<u8>,
    /// The test finished sending: once `unread` is read, reads find the end of the
    /// stream.
    pub(crate) ended: bool,
    /// How many more bytes the test reads now: the wire takes up to that many of
    /// what is sent, into `taken`; the rest waits in the connection's queue.
    /// [`ALL`] (as good as endless) while the test reads everything.
    pub(crate) room: usize,
    pub(crate) taken: Vec<u8>,
    /// Shut down for writing.
    pub(crate) shut: bool,
    /// Being opened, to this address, until the test establishes or fails it.
    pub(crate) connecting: Option<Address>,
    /// The order the connection was made in.
    pub(crate) serial: u64,
    /// Its ends' IP addresses, this one's and the far one's; `None` for a
    /// connection to a Unix socket, whose ends have none.
    ends: Option<(SocketAddr, SocketAddr)>,
    /// The test's TLS, as the client of a connection that speaks it.
    #[cfg(feature = "tls")]
    pub(crate) far: Option<Box<crate::tls::Session>>,
}

/// A peer's room while it reads everything.
pub(crate) const ALL: usize = usize::MAX;

/// The local address of the harness's accepted connections.
pub(crate) const LISTENING: SocketAddr = SocketAddr::new(std::net::IpAddr::V4(Ipv4Addr::LOCALHOST), 8080);

/// When the test, as the peer of the harness's connections, reads their output.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PeerReads {
    /// Only when the test takes it ([`take_output`](super::Harness::take_output)):
    /// until then it waits unsent, as for a peer that does not read; it counts in
    /// [`Io::is_full`](crate::reactor::Io::is_full), and a protocol paused for it
    /// goes on once the test has taken it. The default.
    #[default]
    WhenTaken,
    /// As soon as it is sent, as a peer whose socket has room for it (a loop's peer
    /// on loopback, for small output): a protocol paused for its output goes on at
    /// once. The test still takes what was sent with `take_output`.
    AtOnce,
}

/// What the harness remembers of its connections beyond their lives.
#[derive(Debug, Default)]
pub(crate) struct Record {
    /// When the test reads what each connection sends.
    pub(crate) reads: PeerReads,
    made: u64,
    /// Each connection closed, how, and what the test had not taken of its output.
    pub(crate) closed: Vec<(Token, Closed, Vec<u8>)>,
}

impl Record {
    /// A new connection's wire, being opened to `to` if given, else accepted. The
    /// test's end of it is a loopback address whose port counts the connections
    /// made, from 49152; an accepted one's local end is [`LISTENING`]. One opened
    /// to a Unix socket has no IP address at either end.
    pub(crate) fn peer(&mut self, connecting: Option<Address>) -> Peer {
        self.made += 1;
        let test = SocketAddr::from((Ipv4Addr::LOCALHOST, 49151 + (self.made % 16384) as u16));
        let ends = match &connecting {
            Some(Address::Ip(to)) => Some((test, *to)),
            Some(Address::Unix(_)) => None,
            None => Some((LISTENING, test)),
        };
        Peer {
            unread: Vec::new(),
            ended: false,
            room: if self.reads == PeerReads::AtOnce { ALL } else { 0 },
            taken: Vec::new(),
            shut: false,
            connecting,
            serial: self.made,
            ends,
            #[cfg(feature = "tls")]
            far: None,
        }
    }
}

impl Peer {
    /// The test sends `bytes`: sealed by its TLS, if the connection speaks it.
    pub(crate) fn send(&mut self, bytes: &[u8]) {
        #[cfg(feature = "tls")]
        if let Some(records) = self.far.as_deref_mut().and_then(crate::tls::Session::records) {
            for content in bytes.chunks(crate::tls::MAX_PLAINTEXT) {
                let start = records.begin(&mut self.unread);
                self.unread.extend_from_slice(content);
                records.seal(&mut self.unread, start, crate::tls::ContentType::ApplicationData);
            }
            return;
        }
        self.unread.extend_from_slice(bytes);
    }

    /// The test finishes sending: after close_notify, if the connection speaks TLS.
    pub(crate) fn finish(&mut self) {
        #[cfg(feature = "tls")]
        if let Some(far) = self.far.as_deref_mut() {
            far.close_notify(&mut self.unread);
        }
        self.ended = true;
    }

    /// What the test reads now of `bytes`; returns how many. Over TLS, the test's
    /// TLS reads the handshake whatever the test reads, and opens the records it
    /// reads: their plaintext is what the test takes.
    fn take(&mut self, bytes: &[u8]) -> usize {
        #[cfg(feature = "tls")]
        if let Some(far) = self.far.as_deref_mut() {
            if !far.is_established() {
                // A handshake the server failed leaves the test's TLS failed too.
                let _ = far.handshake(bytes, &mut self.unread);
                return bytes.len();
            }
            let n = bytes.len().min(self.room);
            let mut input = vec![0; far.partial_len() + n];
            let kept = far.take_partial(&mut input);
            input[kept..].copy_from_slice(&bytes[..n]);
            let len = input.len();
            if let Ok(opened) = far.open(&mut input, len, &mut self.unread) {
                self.taken.extend_from_slice(&input[..opened.plaintext]);
            }
            self.room -= n;
            return n;
        }
        let n = bytes.len().min(self.room);
        self.taken.extend_from_slice(&bytes[..n]);
        self.room -= n;
        n
    }
}

impl Addresses for Peer {
    /// As a socket's: a Unix socket's end is no IP address.
    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.ends.map(|(local, _)| local).ok_or_else(|| io::ErrorKind::Unsupported.into())
    }

    /// As a socket's: a connection being opened has no peer yet.
    fn peer_addr(&self) -> io::Result<SocketAddr> {
        match (&self.connecting, self.ends) {
            (Some(_), _) => Err(io::ErrorKind::NotConnected.into()),
            (None, Some((_, remote))) => Ok(remote),
            (None, None) => Err(io::ErrorKind::Unsupported.into()),
        }
    }
}

impl Wire for Peer {
    type Registry = Record;

    fn connect(record: &mut Record, _token: Token, addr: &Address) -> io::Result<Peer> {
        Ok(record.peer(Some(addr.clone())))
    }

    fn register(&self, _record: &mut Record, _token: Token) -> io::Result<()> {
        Ok(())
    }

    /// The test says when a connect is established (the harness's `establish`),
    /// or fails: until then an edge finds it in progress.
    fn establish(&mut self, _: &mut [u8]) -> Establishing {
        if self.connecting.is_some() {
            Establishing::InProgress
        } else {
            Establishing::Done
        }
    }

    fn recv(&mut self, buffer: &mut [u8]) -> io::Result<Received> {
        if self.unread.is_empty() {
            let end = Received { len: 0, filled: false };
            return if self.ended { Ok(end) } else { Err(io::ErrorKind::WouldBlock.into()) };
        }
        let n = self.unread.len().min(buffer.len());
        buffer[..n].copy_from_slice(&self.unread[..n]);
        self.unread.drain(..n);
        Ok(Received { len: n, filled: n == buffer.len() })
    }

    fn send(&mut self, output: &Output) -> io::Result<usize> {
        Ok(self.take(&output.to_vec()))
    }

    fn send_bytes(&mut self, bytes: &[u8]) -> io::Result<usize> {
        Ok(self.take(bytes))
    }

    fn flush(&mut self, queue: &mut SendQueue) -> io::Result<usize> {
        let n = queue.take_into(&mut self.taken, self.room);
        self.room -= n;
        Ok(n)
    }

    fn shutdown_write(&mut self) -> io::Result<()> {
        self.shut = true;
        Ok(())
    }

    /// The test, as a peer, reads the end of the stream and closes at once.
    fn linger(&mut self) -> io::Result<()> {
        self.shut = true;
        self.ended = true;
        Ok(())
    }

    fn retire(self, record: &mut Record, token: Token, closed: Closed) {
        record.closed.push((token, closed, self.taken));
    }
}
