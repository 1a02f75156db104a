//! [`Secured`]: a wire that may speak TLS. Without it, a connection's bytes go to
//! and from its inner wire (a socket, or the harness's vectors) as they are; with
//! it, they go through its session: the handshake first, while the connection is
//! being established, then records. A protocol sees plaintext either way: TLS is
//! the wire's, not the connection machine's.
//!
//! Reading decrypts in place in the loop's read buffer: a record begun and not
//! whole waits in the session, and goes in front of the next read. Sending seals
//! the output into records as the inner wire takes them: memory pieces are copied
//! once, into the record, a file range is read into it, 16 KiB a record, a few
//! records a call. What the inner wire did not take of what was sealed waits, and
//! covers the first bytes of the output the machine offers next: those are sent
//! from it, not sealed again, and only once all of it went are they counted as
//! taken, so that the machine's count of what is unsent stays exact (a close waits
//! for it; the budget counts it).

use std::io;
use std::net::SocketAddr;
use std::os::fd::BorrowedFd;

use super::io::Addresses;
use super::output::{Output, SendQueue};
use super::protocol::Closed;
use super::slab::Token;
use super::wire::{Establishing, Received, Wire, WithTls};
use crate::listen::Address;
use crate::tls::{ContentType, Failure, Handshaking, Session, TlsFailure, MAX_PLAINTEXT};

/// Plaintext one send seals at most before it hands the records to the inner
/// wire: three full records, as a plaintext send hands the socket 48 KiB a call.
const SEALED_PER_CALL: usize = 3 * MAX_PLAINTEXT;

/// The buffer of sealed records a connection keeps once all went: enough for the
/// records of small answers; a larger one (a body's) is freed, so that a
/// connection idle after a body holds no more than after a hello.
const KEPT_SEALED: usize = 1024;

/// A connection's wire, and its TLS if it speaks it.
#[derive(Debug)]
pub(crate) struct Secured<W> {
    inner: W,
    tls: Option<Box<Tls>>,
}

/// What a wire speaking TLS keeps.
#[derive(Debug)]
struct Tls {
    session: Session,
    /// Records sealed (and the handshake's flights, alerts), in order; the inner
    /// wire took the first `sent` bytes.
    sealed: Vec<u8>,
    sent: usize,
    /// How many bytes of the output the records in `sealed` hold: the first bytes
    /// of what the machine offers next.
    covered: usize,
    /// The peer's close_notify came: the next read finds the end of the stream.
    peer_closed: bool,
    /// Why the handshake failed, once it did.
    failure: Option<Box<TlsFailure>>,
}

impl<W: Wire> WithTls for Secured<W> {
    fn speak_tls(&mut self, session: Session) {
        self.tls = Some(Box::new(Tls::new(session)));
    }
}

/// A secured wire is its inner one, with TLS on it: the harness reaches its peer's
/// vectors through it.
impl<W> std::ops::Deref for Secured<W> {
    type Target = W;

    fn deref(&self) -> &W {
        &self.inner
    }
}

impl<W> std::ops::DerefMut for Secured<W> {
    fn deref_mut(&mut self) -> &mut W {
        &mut self.inner
    }
}

impl<W> From<W> for Secured<W> {
    fn from(inner: W) -> Secured<W> {
        Secured { inner, tls: None }
    }
}

impl<W: Wire> Secured<W> {
    /// `inner`, speaking TLS as `session` says (its handshake to come).
    pub(crate) fn with_tls(inner: W, session: Session) -> Secured<W> {
        Secured { inner, tls: Some(Box::new(Tls::new(session))) }
    }
}

impl Tls {
    fn new(session: Session) -> Tls {
        Tls { session, sealed: Vec::new(), sent: 0, covered: 0, peer_closed: false, failure: None }
    }

    /// Hands the inner wire what is sealed; returns whether it took it all. Once
    /// it did, a buffer larger than [`KEPT_SEALED`] is freed.
    fn send_sealed(&mut self, inner: &mut impl Wire) -> io::Result<bool> {
        while self.sent < self.sealed.len() {
            let sent = inner.send_bytes(&self.sealed[self.sent..])?;
            if sent == 0 {
                return Ok(false);
            }
            self.sent += sent;
        }
        self.sent = 0;
        if self.sealed.capacity() > KEPT_SEALED {
            self.sealed = Vec::new();
        }
        self.sealed.clear();
        Ok(true)
    }

    /// Seals the output `gather` gives, from its byte `skip` on, and hands the
    /// records to the inner wire; returns how many of its bytes were taken. What
    /// was sealed before covers the first bytes.
    fn send(
        &mut self,
        inner: &mut impl Wire,
        len: usize,
        mut gather: impl FnMut(usize, &mut Vec<u8>, usize) -> io::Result<usize>,
    ) -> io::Result<usize> {
        let mut taken = 0;
        loop {
            if !self.send_sealed(inner)? {
                return Ok(taken);
            }
            taken += std::mem::take(&mut self.covered);
            if taken == len {
                return Ok(taken);
            }
            // AES-GCM's limit for one key: TLS 1.3 updates it; a TLS 1.2 connection
            // that sealed sixteen million records ends.
            if !self.session.refresh_if_exhausted(&mut self.sealed) {
                return Err(io::Error::other("TLS 1.2: the key's record limit reached"));
            }
            let records = self.session.records().ok_or(io::ErrorKind::NotConnected)?;
            while self.covered < SEALED_PER_CALL && taken + self.covered < len {
                let start = records.begin(&mut self.sealed);
                let n = gather(taken + self.covered, &mut self.sealed, MAX_PLAINTEXT)?;
                records.seal(&mut self.sealed, start, ContentType::ApplicationData);
                self.covered += n;
            }
        }
    }

    /// Sends our end of the stream, close_notify, if the inner wire takes it now.
    fn close_notify(&mut self, inner: &mut impl Wire) {
        if self.session.is_established() && self.covered == 0 {
            self.session.close_notify(&mut self.sealed);
            let _ = self.send_sealed(inner);
        }
    }
}

impl<W: Addresses> Addresses for Secured<W> {
    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.inner.local_addr()
    }

    fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.inner.peer_addr()
    }

    fn tls(&self) -> Option<&crate::tls::Negotiated> {
        self.tls.as_deref()?.session.negotiated()
    }

    fn tls_failure(&self) -> Option<&TlsFailure> {
        self.tls.as_deref()?.failure.as_deref()
    }
}

/// A TLS failure, as the wire's callers see it: the connection cannot go on.
fn failed(failure: Failure) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, failure.to_string())
}

impl<W: Wire> Wire for Secured<W> {
    type Registry = W::Registry;

    fn connect(registry: &mut Self::Registry, token: Token, addr: &Address) -> io::Result<Self> {
        W::connect(registry, token, addr).map(Secured::from)
    }

    fn register(&self, registry: &mut Self::Registry, token: Token) -> io::Result<()> {
        self.inner.register(registry, token)
    }

    /// Established once the inner wire is, and its handshake is done: each call
    /// sends what the handshake has to send and reads what came of the peer's.
    fn establish(&mut self, buffer: &mut [u8]) -> Establishing {
        let established = self.inner.establish(buffer);
        let Some(tls) = self.tls.as_deref_mut().filter(|tls| !tls.session.is_established()) else {
            return established;
        };
        if established != Establishing::Done {
            return established;
        }
        // A client's first flight needs no input.
        let mut received = 0;
        loop {
            match tls.session.handshake(&buffer[..received], &mut tls.sealed) {
                Ok(done) => {
                    let sent = tls.send_sealed(&mut self.inner);
                    match (done, sent) {
                        (_, Err(e)) => return Establishing::Failed(e.kind()),
                        (Handshaking::Done, Ok(_)) => return Establishing::Done,
                        (Handshaking::Reading, Ok(_)) => {}
                    }
                }
                Err(failure) => {
                    // The alert rustls wrote goes if it can.
                    let _ = tls.send_sealed(&mut self.inner);
                    tls.failure = Some(Box::new(TlsFailure(failure)));
                    return Establishing::Failed(io::ErrorKind::InvalidData);
                }
            }
            received = match self.inner.recv(buffer) {
                Ok(Received { len: 0, .. }) => return Establishing::Failed(io::ErrorKind::UnexpectedEof),
                Ok(read) => read.len,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Establishing::InProgress,
                Err(e) => return Establishing::Failed(e.kind()),
            };
        }
    }

    fn recv(&mut self, buffer: &mut [u8]) -> io::Result<Received> {
        let Some(tls) = self.tls.as_deref_mut() else { return self.inner.recv(buffer) };
        let early = tls.session.take_early(buffer);
        if early > 0 {
            return Ok(Received { len: early, filled: true });
        }
        loop {
            if tls.peer_closed {
                return Ok(Received { len: 0, filled: false });
            }
            let kept = tls.session.partial_len();
            let read = self.inner.recv(&mut buffer[kept..])?;
            if read.len == 0 {
                // The end of the stream; without close_notify a truncation, which
                // the protocol sees as an end like any other.
                return Ok(read);
            }
            tls.session.take_partial(buffer);
            let opened = tls.session.open(buffer, kept + read.len, &mut tls.sealed);
            // A key update's answer, or an alert, goes now if it can.
            let sent = tls.send_sealed(&mut self.inner);
            let opened = opened.map_err(failed)?;
            sent?;
            tls.peer_closed = opened.peer_closed;
            if opened.plaintext > 0 || opened.peer_closed {
                return Ok(Received { len: opened.plaintext, filled: read.filled || opened.peer_closed });
            }
            if !read.filled {
                return Err(io::ErrorKind::WouldBlock.into());
            }
        }
    }

    fn send(&mut self, output: &Output) -> io::Result<usize> {
        match self.tls.as_deref_mut() {
            None => self.inner.send(output),
            Some(tls) => {
                tls.send(&mut self.inner, output.len(), |skip, out, max| output.gather(skip, out, max))
            }
        }
    }

    fn send_bytes(&mut self, bytes: &[u8]) -> io::Result<usize> {
        match self.tls.as_deref_mut() {
            None => self.inner.send_bytes(bytes),
            Some(tls) => tls.send(&mut self.inner, bytes.len(), |skip, out, max| {
                let piece = &bytes[skip..bytes.len().min(skip + max)];
                out.extend_from_slice(piece);
                Ok(piece.len())
            }),
        }
    }

    fn flush(&mut self, queue: &mut SendQueue) -> io::Result<usize> {
        let Some(tls) = self.tls.as_deref_mut() else { return self.inner.flush(queue) };
        let sent = tls.send(&mut self.inner, queue.len(), |skip, out, max| queue.gather(skip, out, max))?;
        queue.consume(sent);
        Ok(sent)
    }

    fn shutdown_write(&mut self) -> io::Result<()> {
        if let Some(tls) = self.tls.as_deref_mut() {
            tls.close_notify(&mut self.inner);
        }
        self.inner.shutdown_write()
    }

    fn linger(&mut self) -> io::Result<()> {
        if let Some(tls) = self.tls.as_deref_mut() {
            tls.close_notify(&mut self.inner);
        }
        self.inner.linger()
    }

    /// Spliced input would be records: a TLS wire has none to splice from or to.
    fn splice_fd(&self) -> Option<BorrowedFd<'_>> {
        if self.tls.is_some() {
            return None;
        }
        self.inner.splice_fd()
    }

    fn retire(mut self, registry: &mut Self::Registry, token: Token, closed: Closed) {
        if let (Some(tls), Closed::Done) = (self.tls.as_deref_mut(), closed) {
            tls.close_notify(&mut self.inner);
        }
        self.inner.retire(registry, token, closed)
    }
}
